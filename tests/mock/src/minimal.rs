//! `switchyard-mock-minimal`: the smallest hyper server that answers like the mock's plain
//! path, as the benchmark's second baseline.
//!
//! A proxy's CPU per request is judged against the upstream behind it. A mock that parses,
//! counts and serialises per request makes that denominator larger than a real provider's
//! front end would be and so flatters the proxy. This server does only what any HTTP
//! upstream must: read the request, look for `"stream":true`, and write bytes prepared at
//! start. The bytes are the mock's own plain answers (same JSON body, same SSE frames as one
//! chunked write, same provider headers), so a node in front of either sees the same wire.
//!
//! ```text
//! switchyard-mock-minimal --listen 127.0.0.1:0 [--chunks 20] [--model bench-model]
//! ```
//!
//! The first stdout line is the bound address, as with `switchyard-mock-upstream`.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use clap::Parser;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::wire::{Reply, openai};

/// Minimal hyper responder answering the mock's plain JSON and SSE bodies.
#[derive(Debug, Parser)]
#[command(name = "switchyard-mock-minimal", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Runtime worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Content chunks of the streamed answer (words of the JSON one).
    #[arg(long, default_value_t = 20)]
    chunks: u32,
    /// Model echoed in the answers.
    #[arg(long, default_value = "bench-model")]
    model: String,
}

/// The two answers, prepared once.
struct Answers {
    json: Bytes,
    sse: Bytes,
    json_headers: HeaderMap,
    sse_headers: HeaderMap,
}

/// The mock's plain answers to a Chat Completions request with this model and chunk count.
fn answers(model: &str, chunks: u32) -> Answers {
    let reply = Reply {
        model: model.to_owned(),
        input_tokens: 30,
        chunks,
        reasoning_chunks: 0,
        tool_call: None,
        include_usage: false,
        script_text: None,
    };
    let mut sse = BytesMut::new();
    for frame in openai::chat_frames(&reply) {
        sse.extend_from_slice(&frame.bytes);
    }
    let headers = |content_type: &'static str| {
        let mut h = HeaderMap::with_capacity(6);
        h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(
            "x-request-id",
            HeaderValue::from_static("req_0123456789abcdef0123456789abcdef"),
        );
        h.insert("openai-version", HeaderValue::from_static("2020-10-01"));
        h.insert("openai-processing-ms", HeaderValue::from_static("1"));
        h
    };
    let mut sse_headers = headers("text/event-stream; charset=utf-8");
    sse_headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Answers {
        json: openai::chat_json(&reply),
        sse: sse.freeze(),
        json_headers: headers("application/json"),
        sse_headers,
    }
}

/// One buffer sent as one frame; `chunked` hides its length so hyper uses chunked transfer
/// encoding, as the mock does for a stream.
struct Once {
    bytes: Option<Bytes>,
    chunked: bool,
}

impl Body for Once {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().bytes.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.bytes, self.chunked) {
            (_, true) => SizeHint::default(),
            (Some(b), false) => SizeHint::with_exact(b.len() as u64),
            (None, false) => SizeHint::with_exact(0),
        }
    }
}

/// Whether a request body asks for a stream (compact or spaced JSON).
fn wants_stream(body: &[u8]) -> bool {
    const NEEDLES: [&[u8]; 2] = [b"\"stream\":true", b"\"stream\": true"];
    NEEDLES
        .iter()
        .any(|n| body.windows(n.len()).any(|w| w == *n))
}

async fn answer(answers: &Answers, req: Request<Incoming>) -> Response<Once> {
    let body = match req.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let stream = wants_stream(&body);
    let (bytes, headers) = if stream {
        (&answers.sse, &answers.sse_headers)
    } else {
        (&answers.json, &answers.json_headers)
    };
    let mut resp = Response::new(Once {
        bytes: Some(bytes.clone()),
        chunked: stream,
    });
    *resp.headers_mut() = headers.clone();
    resp
}

async fn serve(listener: TcpListener, answers: Arc<Answers>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let answers = Arc::clone(&answers);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let answers = Arc::clone(&answers);
                async move { Ok::<_, Infallible>(answer(&answers, req).await) }
            });
            // A connection error only ends that connection.
            let _ = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Parses the command line, serves until a signal, and returns the exit code.
// The address on stdout is this binary's interface, as with the mock upstream.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard-mock-minimal: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<(), String> = runtime.block_on(async {
        let listener = TcpListener::bind(args.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let answers = Arc::new(answers(&args.model, args.chunks));
        let server = tokio::spawn(serve(listener, answers));
        println!("{addr}");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let r = wait_for_signal().await;
        server.abort();
        r
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard-mock-minimal: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn wait_for_signal() -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|e| e.to_string()),
        _ = term.recv() => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_the_mocks_plain_bodies() {
        let a = answers("m", 20);
        let json: serde_json::Value = serde_json::from_slice(&a.json).unwrap_or_default();
        assert_eq!(json["object"], "chat.completion");
        assert_eq!(json["model"], "m");
        let text = std::str::from_utf8(&a.sse).unwrap_or_default();
        // Role delta, 20 content deltas, the finish chunk and [DONE].
        assert_eq!(text.matches("data: ").count(), 23);
        assert!(text.ends_with("data: [DONE]\n\n"));
    }

    #[test]
    fn stream_flag_is_found_compact_or_spaced() {
        assert!(wants_stream(br#"{"model":"m","stream":true}"#));
        assert!(wants_stream(br#"{"model": "m", "stream": true}"#));
        assert!(!wants_stream(br#"{"model":"m","stream":false}"#));
    }
}
