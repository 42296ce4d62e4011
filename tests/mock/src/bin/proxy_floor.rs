//! `switchyard-proxy-floor`: the customer's HTTP stack with no gateway in it, as the
//! benchmark's floor for a proxy.
//!
//! The node's CPU per request is judged against the bare hyper server behind it (issue 21:
//! ≤ 3.0× for JSON, ≤ 2.5× for SSE). Part of that ratio is not the node's logic but the
//! stack any proxy built on it pays: actix-web reading and answering the client, hyper's
//! HTTP/1.1 client writing the request upstream and reading the answer, and the kernel's
//! socket work on both sides. This binary is only that: one actix-web worker that forwards
//! each request's body to one upstream over pooled keep-alive connections (hyper's
//! connection API, one pool per worker, as the node's transport) and hands the answer back,
//! a JSON answer whole with its length and an SSE answer frame by frame. No routing, no
//! authentication, no inspection, no log line: whatever the node spends above it is the
//! gateway's own.
//!
//! ```text
//! switchyard-proxy-floor --listen 127.0.0.1:0 --upstream 127.0.0.1:PORT
//! ```
//!
//! The first stdout line is the bound address, as with the mocks.

use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A proxy with no logic in front of one upstream.
#[derive(Debug, Parser)]
#[command(name = "switchyard-proxy-floor", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The upstream every request is forwarded to.
    #[arg(long)]
    upstream: SocketAddr,
    /// actix-web workers (the benchmark's node runs one).
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

type Sender = SendRequest<Full<Bytes>>;

/// One worker's idle upstream connections.
struct Pool {
    upstream: SocketAddr,
    host: HeaderValue,
    idle: RefCell<Vec<Sender>>,
}

impl Pool {
    async fn sender(&self) -> Result<Sender, String> {
        loop {
            let Some(sender) = self.idle.borrow_mut().pop() else {
                break;
            };
            if sender.is_ready() {
                return Ok(sender);
            }
        }
        let stream = TcpStream::connect(self.upstream)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        actix_web::rt::spawn(conn);
        Ok(sender)
    }
}

/// An SSE answer, frame by frame; its connection goes back to the pool at the end of body.
struct Relay {
    body: Incoming,
    sender: Option<Sender>,
    pool: Rc<Pool>,
}

impl futures_util::Stream for Relay {
    type Item = Result<Bytes, hyper::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Some(Ok(data)));
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    if let Some(sender) = this.sender.take() {
                        this.pool.idle.borrow_mut().push(sender);
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The app of one worker: every path goes to `upstream`.
fn app(
    pool: Rc<Pool>,
) -> App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new().app_data(pool).default_service(web::to(forward))
}

fn pool(upstream: SocketAddr, host: HeaderValue) -> Rc<Pool> {
    Rc::new(Pool {
        upstream,
        host,
        idle: RefCell::new(Vec::new()),
    })
}

async fn forward(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let Some(pool) = req.app_data::<Rc<Pool>>().cloned() else {
        return HttpResponse::InternalServerError().body("no pool");
    };
    match relay(&req, body, pool).await {
        Ok(resp) => resp,
        Err(e) => HttpResponse::BadGateway().body(e),
    }
}

async fn relay(req: &HttpRequest, body: Bytes, pool: Rc<Pool>) -> Result<HttpResponse, String> {
    let upstream_req = http::Request::post(req.uri().path())
        .header(http::header::HOST, pool.host.as_bytes())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let mut sender = pool.sender().await?;
    let resp = sender
        .send_request(upstream_req)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = StatusCode::from_u16(resp.status().as_u16()).map_err(|e| e.to_string())?;
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok());
    let mut answer = HttpResponse::build(status);
    if let Some(content_type) = &content_type {
        answer.insert_header((CONTENT_TYPE, content_type.clone()));
    }
    let streamed = content_type
        .as_ref()
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let body = resp.into_body();
    if streamed {
        return Ok(answer.streaming(Relay {
            body,
            sender: Some(sender),
            pool,
        }));
    }
    let whole = body
        .collect()
        .await
        .map_err(|e| format!("read: {e}"))?
        .to_bytes();
    pool.idle.borrow_mut().push(sender);
    Ok(answer.body(whole))
}

/// Turns Nagle's algorithm off on an accepted client connection, as the node does.
fn set_nodelay(conn: &dyn std::any::Any, _ext: &mut actix_web::dev::Extensions) {
    if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
        let _ = tcp.set_nodelay(true);
    }
}

// The address on stdout is this binary's interface, as with the mocks.
#[allow(clippy::print_stdout, clippy::print_stderr)]
fn main() -> ExitCode {
    let args = Args::parse();
    let Ok(host) = HeaderValue::from_str(&args.upstream.to_string()) else {
        eprintln!("switchyard-proxy-floor: bad upstream address");
        return ExitCode::FAILURE;
    };
    let upstream = args.upstream;
    let result = actix_web::rt::System::new().block_on(async move {
        let server = HttpServer::new(move || app(pool(upstream, host.clone())))
            // The node's server settings that change the wire: without TCP_NODELAY a stream's
            // last small write waits for the client's delayed ACK (40 ms).
            .on_connect(set_nodelay)
            .keep_alive(Duration::from_secs(75))
            .client_request_timeout(Duration::from_secs(60))
            .workers(args.workers.max(1))
            .bind(args.listen)?;
        for addr in server.addrs() {
            println!("{addr}");
        }
        std::io::stdout().flush()?;
        // actix-web stops on SIGTERM and SIGINT.
        server.run().await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard-proxy-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test;
    use switchyard_mock::{MockConfig, MockUpstream};

    use super::*;

    fn host(addr: SocketAddr) -> HeaderValue {
        HeaderValue::from_str(&addr.to_string()).unwrap()
    }

    #[actix_web::test]
    async fn answers_are_relayed_and_connections_reused() {
        let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
        let pool = pool(mock.addr(), host(mock.addr()));
        let service = test::init_service(app(pool.clone())).await;
        for stream in [true, false, true] {
            let req = test::TestRequest::post()
                .uri("/v1/chat/completions")
                .set_payload(format!(r#"{{"model":"m","stream":{stream}}}"#))
                .to_request();
            let resp = test::call_service(&service, req).await;
            assert_eq!(resp.status(), StatusCode::OK);
            let body = test::read_body(resp).await;
            let text = String::from_utf8_lossy(&body);
            if stream {
                assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
                assert_eq!(text.matches("data: ").count(), 23, "{text}");
            } else {
                assert!(text.contains("chat.completion"), "{text}");
            }
            // The connection went back to the pool at the end of each answer, the stream's
            // included (where the relay gives it back).
            assert_eq!(pool.idle.borrow().len(), 1);
        }
        assert_eq!(mock.stats().requests_total, 3);
    }

    #[actix_web::test]
    async fn an_unreachable_upstream_is_a_bad_gateway() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let service = test::init_service(app(pool(addr, host(addr)))).await;
        let req = test::TestRequest::post()
            .uri("/v1/chat/completions")
            .to_request();
        let resp = test::call_service(&service, req).await;
        assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
        let body = test::read_body(resp).await;
        assert!(String::from_utf8_lossy(&body).starts_with("connect:"));
    }
}
