//! Pooled upstream HTTP clients.
//!
//! One `reqwest::Client` per connection (rustls, HTTP/1.1 keep-alive pool). Per-connection
//! clients shard the pool naturally and avoid HTTP/2's single-connection queueing beyond the
//! server's stream limit. Only the connect timeout is set on the client: headers, first
//! content, idle and attempt deadlines are enforced by the attempt itself, because reqwest's
//! total `timeout` would also cut long streams.

use std::time::Duration;

use switchyard_shared::config::ProviderTimeouts;

/// Builds the client for one connection.
pub fn build_client(timeouts: &ProviderTimeouts) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(timeouts.connect_ms.max(1)))
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(1024)
        .tcp_nodelay(true)
        .http1_only()
        // Never follow redirects: a provider redirect would silently change where credentials go.
        .redirect(reqwest::redirect::Policy::none())
        .build()
}
