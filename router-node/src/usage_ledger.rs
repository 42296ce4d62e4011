//! The usage ledger's writer: one answered request (or one stream segment) booked under its
//! client key, model, provider and connection, and the key's token counters.
//!
//! Why here, below the HTTP edge: the request's end ([`crate::http::request_end`]) books
//! usage, and the admin API only reads the ledger (`GET /api/usage`), so the writer belongs
//! to neither; the request path no longer enters the admin module to record what it served.
//! The sums live in the node's [`ShardedLedger`] (one-minute buckets kept for a day), written
//! into the recording worker's own shard.
//!
//! [`ShardedLedger`]: switchyard_shared::usage::ShardedLedger

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use switchyard_shared::sse::Usage;
use switchyard_shared::usage::{self, Totals, Tuple};

use crate::runtime::Runtime;

/// Where one answer's usage goes: who asked, what served it.
#[derive(Clone, Copy)]
pub struct Booking<'a> {
    /// The client key, when one was required.
    pub key: Option<&'a str>,
    /// The model the provider served.
    pub model: &'a Arc<str>,
    pub provider: &'a Arc<str>,
    pub connection: &'a Arc<str>,
}

/// Records one answered request, with the tokens the upstream reported (`None`: a request
/// with zero tokens), and the key's token counters (`switchyard_client_key_token_usage_total`).
pub fn record(rt: &Runtime, booking: Booking<'_>, reported: Option<&Usage>) {
    let tuple = Tuple {
        key: booking.key.unwrap_or(usage::OTHER).into(),
        model: booking.model.clone(),
        provider: booking.provider.clone(),
        connection: booking.connection.clone(),
    };
    if let (Some(key), Some(reported)) = (booking.key, reported) {
        rt.table.metrics.key_usage(key, reported);
    }
    let now = rt.table.clock.epoch_ms();
    rt.stats
        .usage
        .record(worker_shard(), now, tuple, Totals::of_request(reported));
}

/// This thread's shard of the usage ledger: each worker thread takes the next index the
/// first time it records, so workers do not share a shard's lock.
fn worker_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|shard| *shard)
}
