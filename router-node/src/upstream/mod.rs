//! Talking to upstream providers.

pub mod client;

// ---- TEMPORARY interface stubs (replaced by the real implementation) ----
use crate::clock::Clock;
use crate::http::errors::ClientFormat;
use crate::state::{ConnHandle, ProviderHandle};
use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use std::sync::Arc;
use switchyard_shared::Millis;
use switchyard_shared::classify::TransportFailure;
use switchyard_shared::sse::{StreamAbort, Usage, WatchConfig};
pub struct AttemptRequest {
    pub conn: Arc<ConnHandle>,
    pub provider: Arc<ProviderHandle>,
    pub client_format: ClientFormat,
    pub body: Bytes,
    pub stream: bool,
    pub forward_headers: Vec<(HeaderName, HeaderValue)>,
    pub deadline_ms: Option<Millis>,
    pub watch: WatchConfig,
    pub clock: Clock,
}
pub enum AttemptResult {
    Json(JsonSuccess),
    Stream(CommittedStream),
    Failed(AttemptFailure),
}
pub struct JsonSuccess {
    pub status: u16,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    pub usage: Option<Usage>,
}
pub struct CommittedStream {
    pub headers: Vec<(HeaderName, HeaderValue)>,
}
impl CommittedStream {
    pub fn into_body(
        self,
        _on_finish: Box<dyn FnOnce(StreamEnd) + Send>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, actix_web::Error>> + 'static {
        futures_util::stream::empty()
    }
}
pub struct StreamEnd {
    pub completed: bool,
    pub abort: Option<StreamAbort>,
    pub upstream_error: Option<String>,
    pub usage: Option<Usage>,
    pub client_disconnected: bool,
    pub ended_empty: bool,
    pub bytes: u64,
    pub duration_ms: Millis,
}
#[derive(Debug)]
pub struct AttemptFailure {
    pub status: Option<u16>,
    pub transport: Option<TransportFailure>,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub message: String,
    pub stream_abort: Option<StreamAbort>,
    pub elapsed_ms: Millis,
}
pub async fn attempt(_req: AttemptRequest) -> AttemptResult {
    AttemptResult::Failed(AttemptFailure {
        status: None,
        transport: None,
        headers: vec![],
        body: String::new(),
        message: String::new(),
        stream_abort: None,
        elapsed_ms: 0,
    })
}
