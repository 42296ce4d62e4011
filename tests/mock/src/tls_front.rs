//! An HTTPS front for a plain upstream: TLS with ALPN `h2` and `http/1.1`, each request
//! forwarded to the upstream over pooled HTTP/1.1 keep-alive connections.
//!
//! Why: every real provider is HTTPS, most offer HTTP/2, and the mock speaks plain HTTP/1.1
//! (it owns its sockets to send TCP resets). Put in front of the mock, this gives the node's
//! upstream client a TLS and HTTP/2 provider with the mock's scripted behaviour behind it.
//! An upstream body that fails mid-answer (the mock's `reset_after_chunks`) fails that one
//! response here, which hyper's HTTP/2 server turns into `RST_STREAM` for that stream only:
//! the other streams of the connection go on. It counts the TLS connections it accepted by
//! the protocol ALPN chose, so a test can tell how many connections carried its streams.
//!
//! ```text
//! switchyard-tls-front --listen 127.0.0.1:0 --upstream 127.0.0.1:PORT --cert server.pem --key server.key
//! ```

use std::io::{self, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use clap::Parser;
use http::header::HOST;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// A test certificate authority and a server certificate for `127.0.0.1` signed by it
/// (`tests/mock/certs/README.md`): for tests only, nothing else trusts them.
pub mod test_certs {
    /// The authority, for a provider's `ca_file`.
    pub const CA_PEM: &str = include_str!("../certs/ca.pem");
    /// The server's certificate.
    pub const SERVER_PEM: &str = include_str!("../certs/server.pem");
    /// The server's key.
    pub const SERVER_KEY: &str = include_str!("../certs/server.key");
}

/// Which protocols the front offers by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// `h2` and `http/1.1`, as the large providers do.
    H2AndHttp1,
    /// `http/1.1` only.
    Http1,
}

/// A running front; stopped when dropped.
pub struct TlsFront {
    addr: SocketAddr,
    counts: Arc<Counts>,
    cancel: CancellationToken,
}

#[derive(Default)]
struct Counts {
    h2: AtomicU64,
    http1: AtomicU64,
}

impl TlsFront {
    /// Serves HTTPS on `listen` with the PEM certificate chain and key given, forwarding to
    /// the plain HTTP/1.1 `upstream`.
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        cert_pem: &[u8],
        key_pem: &[u8],
        offer: Offer,
    ) -> io::Result<Self> {
        let acceptor = TlsAcceptor::from(Arc::new(server_config(cert_pem, key_pem, offer)?));
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let cancel = CancellationToken::new();
        let pool = Arc::new(Pool {
            upstream,
            idle: std::sync::Mutex::new(Vec::new()),
        });
        tokio::spawn(accept_loop(
            listener,
            acceptor,
            pool,
            Arc::clone(&counts),
            cancel.clone(),
        ));
        Ok(Self {
            addr,
            counts,
            cancel,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// TLS connections accepted that chose HTTP/2.
    pub fn h2_connections(&self) -> u64 {
        self.counts.h2.load(Ordering::Relaxed)
    }

    /// TLS connections accepted that chose HTTP/1.1 (or offered no ALPN).
    pub fn http1_connections(&self) -> u64 {
        self.counts.http1.load(Ordering::Relaxed)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    offer: Offer,
) -> io::Result<rustls::ServerConfig> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {e}"))
    };
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("certificate", &e))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| bad("key", &e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS versions", &e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("certificate", &e))?;
    config.alpn_protocols = match offer {
        Offer::H2AndHttp1 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        Offer::Http1 => vec![b"http/1.1".to_vec()],
    };
    Ok(config)
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    pool: Arc<Pool>,
    counts: Arc<Counts>,
    cancel: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((tcp, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let pool = Arc::clone(&pool);
        let counts = Arc::clone(&counts);
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let counter = if h2 { &counts.h2 } else { &counts.http1 };
            counter.fetch_add(1, Ordering::Relaxed);
            let service = service_fn(move |req| forward(Arc::clone(&pool), req));
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                () = cancel.cancelled() => {}
                _ = conn => {}
            }
        });
    }
}

/// Idle HTTP/1.1 connections to the upstream.
struct Pool {
    upstream: SocketAddr,
    idle: std::sync::Mutex<Vec<SendRequest<Incoming>>>,
}

impl Pool {
    fn take(&self) -> Option<SendRequest<Incoming>> {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(sender) = idle.pop() {
            if sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    fn put(&self, sender: SendRequest<Incoming>) {
        if sender.is_ready() {
            self.idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(sender);
        }
    }

    async fn connect(&self) -> io::Result<SendRequest<Incoming>> {
        let tcp = TcpStream::connect(self.upstream).await?;
        tcp.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(io::Error::other)?;
        tokio::spawn(conn);
        Ok(sender)
    }
}

type Answer = Response<BoxBody<Bytes, hyper::Error>>;

async fn forward(pool: Arc<Pool>, req: Request<Incoming>) -> Result<Answer, hyper::Error> {
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    parts.uri = Uri::try_from(path).unwrap_or_else(|_| Uri::from_static("/"));
    parts.version = http::Version::HTTP_11;
    if let Ok(host) = HeaderValue::from_str(&pool.upstream.to_string()) {
        parts.headers.insert(HOST, host);
    }
    let req = Request::from_parts(parts, body);
    let mut sender = match pool.take() {
        Some(s) => s,
        None => match pool.connect().await {
            Ok(s) => s,
            Err(e) => return Ok(bad_gateway(&e.to_string())),
        },
    };
    let resp = match sender.send_request(req).await {
        Ok(resp) => resp,
        Err(e) => return Ok(bad_gateway(&e.to_string())),
    };
    Ok(resp.map(|body| {
        Relay {
            body,
            back: Some((sender, pool)),
        }
        .boxed()
    }))
}

fn bad_gateway(why: &str) -> Answer {
    let mut resp = Response::new(
        Full::new(Bytes::from(format!("tls front: {why}")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = StatusCode::BAD_GATEWAY;
    resp
}

/// The upstream's answer, relayed frame by frame; its connection goes back to the pool at
/// the end. An upstream failure is this body's failure (on HTTP/2, a reset of the stream).
struct Relay {
    body: Incoming,
    back: Option<(SendRequest<Incoming>, Arc<Pool>)>,
}

impl Body for Relay {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(None) = polled
            && let Some((sender, pool)) = this.back.take()
        {
            pool.put(sender);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// `switchyard-tls-front`'s arguments.
#[derive(Debug, Parser)]
#[command(name = "switchyard-tls-front", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The plain HTTP/1.1 upstream every request is forwarded to.
    #[arg(long)]
    upstream: SocketAddr,
    /// PEM certificate chain (the server's certificate first).
    #[arg(long)]
    cert: std::path::PathBuf,
    /// PEM private key.
    #[arg(long)]
    key: std::path::PathBuf,
    /// Offer HTTP/1.1 only (no `h2` in ALPN).
    #[arg(long)]
    http1_only: bool,
}

/// The binary: serves until killed.
#[allow(clippy::print_stdout)]
pub fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard-tls-front: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<(), String> = runtime.block_on(async {
        let cert =
            std::fs::read(&args.cert).map_err(|e| format!("{}: {e}", args.cert.display()))?;
        let key = std::fs::read(&args.key).map_err(|e| format!("{}: {e}", args.key.display()))?;
        let offer = if args.http1_only {
            Offer::Http1
        } else {
            Offer::H2AndHttp1
        };
        let front = TlsFront::start(args.listen, args.upstream, &cert, &key, offer)
            .await
            .map_err(|e| e.to_string())?;
        println!("{}", front.addr());
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        std::future::pending::<()>().await;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard-tls-front: {e}");
            ExitCode::FAILURE
        }
    }
}
