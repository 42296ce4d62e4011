//! Pooled upstream HTTP clients.
//!
//! Pooled `reqwest::Client`s (rustls, HTTP/1.1 keep-alive pools keyed by host), shared by every
//! provider with the same connect timeout: building a client loads the TLS root store, which a
//! catalogue of thousands of providers and connections cannot afford at startup. HTTP/1.1 only,
//! so HTTP/2's single-connection queueing beyond a server's stream limit never applies. Only the connect timeout is set on the client: headers, first
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
        // No retries inside the client: failover is the router's decision. With zero retries
        // the retry layer also stops cloning every request's headers up front, in case.
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .build()
}
