//! The direct client against a raw HTTP/1.1 server on a real socket: what goes on the wire,
//! and when a connection is reused, dropped or replaced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use switchyard_shared::classify::TransportFailure;
use switchyard_shared::config::ProviderTimeouts;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use super::test_wire::{Seen, read_request};
use super::{Endpoint, RespBody, TransportError, UpstreamClient, build_client};

/// How the server answers on a connection.
#[derive(Clone, Copy)]
enum Script {
    /// A short JSON answer, keep-alive, then the next request.
    KeepAlive,
    /// One answer, then the server closes the connection while the client holds it idle.
    CloseAfterOne,
    /// A chunked answer's first chunk, then nothing more for 5 s.
    Stall,
}

/// What the server saw: connections accepted and each request.
#[derive(Default)]
struct Log {
    connections: usize,
    requests: Vec<Seen>,
}

async fn server(script: Script) -> (u16, Arc<Mutex<Log>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Log::default()));
    let shared = seen.clone();
    tokio::spawn(async move {
        for _ in 0..64 {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            shared.lock().unwrap().connections += 1;
            tokio::spawn(serve(socket, script, shared.clone()));
        }
    });
    (port, seen)
}

async fn serve(mut socket: TcpStream, script: Script, seen: Arc<Mutex<Log>>) {
    for _ in 0..64 {
        let Some(request) = read_request(&mut socket).await else {
            return;
        };
        seen.lock().unwrap().requests.push(request);
        match script {
            Script::KeepAlive | Script::CloseAfterOne => {
                let body = r#"{"ok":true}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if socket.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                if let Script::CloseAfterOne = script {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    return;
                }
            }
            Script::Stall => {
                let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: \r\n";
                let _ = socket.write_all(answer.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
                return;
            }
        }
    }
}

fn client() -> UpstreamClient {
    build_client(&ProviderTimeouts::default()).unwrap()
}

/// A GET of `path` on the server at `port`: the endpoint, and the request to send there.
fn get(port: u16, path: &str) -> (Endpoint, Request<Bytes>) {
    let to = Endpoint::parse(&format!("http://127.0.0.1:{port}{path}")).unwrap();
    (to, Request::get("/").body(Bytes::new()).unwrap())
}

async fn send(
    client: &UpstreamClient,
    (to, req): (Endpoint, Request<Bytes>),
) -> Result<http::Response<RespBody>, TransportError> {
    client.send(&to, req).await
}

async fn read_all(body: &mut RespBody) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = body.next_chunk().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    out
}

#[tokio::test]
async fn requests_go_out_in_origin_form_with_a_host_and_reuse_one_connection() {
    let (port, seen) = server(Script::KeepAlive).await;
    let client = client();
    for _ in 0..3 {
        let mut resp = send(&client, get(port, "/v1/models?x=1")).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(read_all(resp.body_mut()).await, br#"{"ok":true}"#);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.connections, 1,
        "one kept-alive connection carried all three"
    );
    assert_eq!(seen.requests.len(), 3);
    let first = &seen.requests[0];
    assert!(
        first.head.starts_with("GET /v1/models?x=1 HTTP/1.1\n"),
        "{}",
        first.head
    );
    let host = format!("127.0.0.1:{port}");
    assert_eq!(first.header("host"), Some(host.as_str()));
}

#[tokio::test]
async fn a_body_dropped_before_its_end_does_not_give_its_connection_back() {
    let (port, seen) = server(Script::Stall).await;
    let client = client();
    for _ in 0..2 {
        let mut resp = send(&client, get(port, "/v1/stream")).await.unwrap();
        let first = resp.body_mut().next_chunk().await.unwrap().unwrap();
        assert_eq!(&first[..], b"data: ");
        drop(resp);
    }
    assert_eq!(seen.lock().unwrap().connections, 2);
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_replaced() {
    let (port, seen) = server(Script::CloseAfterOne).await;
    let client = client();
    for round in 0..3 {
        let mut resp = send(&client, get(port, "/v1/models")).await.unwrap();
        assert_eq!(
            read_all(resp.body_mut()).await,
            br#"{"ok":true}"#,
            "{round}"
        );
        drop(resp);
        // Let the server close the idle connection before the next request.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.connections, 3);
    assert_eq!(seen.requests.len(), 3);
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_failure() {
    // A port nothing listens on: bind one, then close it.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = send(&client(), get(port, "/v1/models")).await.unwrap_err();
    assert!(matches!(err, TransportError::Connect(_)), "{err:?}");
    assert_eq!(err.classify().0, TransportFailure::ConnectRefused);
}

#[tokio::test]
async fn a_connection_task_holds_its_connection_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let io = super::io::UpstreamIo::Plain(hyper_util::rt::TokioIo::new(tcp));
    let (_sender, conn) =
        hyper::client::conn::http1::handshake::<_, http_body_util::Full<Bytes>>(io)
            .await
            .unwrap();
    let alone = std::mem::size_of_val(&conn);
    let task = super::pooled::watched(conn);
    let wrapped = std::mem::size_of_val(&task);
    assert!(wrapped <= alone + 16, "{wrapped} > {alone} + 16");
}

/// A connection the server closed while it sat idle, the close not yet read by this thread
/// when the next request comes: without a look first, hyper writes the request into the
/// closed connection and fails it as incomplete (a "connection reset" against a healthy
/// upstream). The close is made to land exactly there by blocking this current-thread
/// runtime while the server closes, so the connection's task cannot run before the request
/// takes the connection.
#[tokio::test(flavor = "current_thread")]
async fn a_close_not_yet_read_is_seen_before_an_idle_connection_is_reused() {
    use std::sync::mpsc;

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (close_tx, close_rx) = mpsc::channel::<()>();
    let (closed_tx, closed_rx) = mpsc::channel::<()>();
    // The server has a runtime of its own on its own thread: this test's runtime is blocked
    // on purpose below.
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            let answer = |mut socket: TcpStream| async move {
                let seen = read_request(&mut socket).await.expect("a whole request");
                let body = r#"{"ok":true}"#;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(head.as_bytes()).await.unwrap();
                (socket, seen.head)
            };
            let (first, _) = listener.accept().await.unwrap();
            let (first, first_head) = answer(first).await;
            close_rx.recv().unwrap();
            drop(first);
            closed_tx.send(()).unwrap();
            let (second, _) = listener.accept().await.unwrap();
            let (_second, second_head) = answer(second).await;
            [first_head, second_head]
        })
    });

    let client = client();
    let mut resp = send(&client, get(port, "/v1/first")).await.unwrap();
    assert_eq!(read_all(resp.body_mut()).await, br#"{"ok":true}"#);
    drop(resp);
    assert_eq!(
        super::pooled::idle_ready(),
        1,
        "the first connection is back in the pool"
    );

    // The server closes the idle connection while this thread blocks (no `.await`): the
    // connection's task has not read the FIN when the next request takes the connection.
    close_tx.send(()).unwrap();
    closed_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(super::pooled::idle_ready(), 1, "the close is not seen yet");
    let mut resp = send(&client, get(port, "/v1/second")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(read_all(resp.body_mut()).await, br#"{"ok":true}"#);

    let seen = server.join().unwrap();
    assert!(seen[0].starts_with("GET /v1/first "), "{}", seen[0]);
    assert!(seen[1].starts_with("GET /v1/second "), "{}", seen[1]);
}
