//! Pooled upstream HTTP clients.
//!
//! Requests go straight to hyper over rustls, through a pool of this thread's connections
//! (`pooled`): reqwest's layers (its own URL type, request builder, retry and redirect
//! services, boxed bodies) cost about a fifth of a proxied JSON request and did nothing the
//! attempt needs, and hyper-util's pooled client about another 6 %. What reqwest did and the
//! attempt relies on is kept: rustls with the platform verifier and the same crypto provider,
//! keep-alive pools keyed by host with a 90 s idle timeout (one pool per worker thread),
//! `TCP_NODELAY`, the connect timeout, no redirects, no retries of a request that reached the
//! wire, and no content decoding.
//!
//! **HTTP versions.** With `http_version = "auto"` (the default) an HTTPS provider is
//! offered `h2` and `http/1.1` by ALPN, and where it chooses `h2` concurrent requests share a
//! few connections (at most 100 streams each, fewer if the provider says so: no request
//! queues behind a full connection). `"http1"` offers HTTP/1.1 only. Plain `http://`
//! providers always get HTTP/1.1. **Extra roots.** A provider's `ca_file` adds its PEM
//! certificates to the platform's roots for that provider's client.
//!
//! One client is shared by every provider with the same [`ClientSettings`]: building one
//! loads the TLS root store, which a catalogue of thousands of providers and connections
//! cannot afford at startup. Only the connect timeout is set here; headers, first content,
//! idle and attempt deadlines are enforced by the attempt itself, so that long streams are
//! never cut.
//!
//! **Proxies.** reqwest honoured `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` (with `NO_PROXY`).
//! When the node's environment names a proxy, every upstream request goes through a reqwest
//! client as before: proxy matching, `CONNECT` tunnels and proxy credentials stay reqwest's
//! well-tested code instead of a second implementation here, and the direct path stays free
//! of it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use switchyard_shared::config::{HttpVersion, ProviderConfig, ProviderTimeouts};

use super::Endpoint;
use super::body::{RespBody, TransportError};
use super::pooled::{Direct, POOL_IDLE, POOL_MAX_IDLE_PER_HOST};
/// The environment variables through which reqwest picked up a proxy.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The upstream client of a connection: a cheap handle; its connections are pooled per
/// worker thread.
#[derive(Clone, Debug)]
pub struct UpstreamClient {
    direct: Direct,
    /// Set when the environment names a proxy: then every request goes through it.
    via_proxy: Option<reqwest::Client>,
}

/// Why a client could not be built (the TLS setup failed).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("TLS setup failed: {0}")]
    Tls(#[from] rustls::Error),
    #[error("{0}")]
    Proxied(#[from] reqwest::Error),
    #[error("ca_file `{file}`: {why}")]
    CaFile { file: String, why: String },
}

/// What a client is built from; providers with equal settings share one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientSettings {
    pub connect_ms: u64,
    pub http_version: HttpVersion,
    pub ca_file: Option<String>,
}

impl ClientSettings {
    /// The settings of `provider`'s client.
    pub fn of(provider: &ProviderConfig) -> Self {
        Self {
            connect_ms: provider.timeouts.connect_ms,
            http_version: provider.http_version,
            ca_file: provider.ca_file.clone(),
        }
    }
}

/// Builds the client for providers with `timeouts`' connect timeout, the default HTTP
/// versions and the platform's roots.
pub fn build_client(timeouts: &ProviderTimeouts) -> Result<UpstreamClient, BuildError> {
    build_client_with(&ClientSettings {
        connect_ms: timeouts.connect_ms,
        http_version: HttpVersion::default(),
        ca_file: None,
    })
}

/// Builds the client for providers with `settings`.
pub fn build_client_with(settings: &ClientSettings) -> Result<UpstreamClient, BuildError> {
    let connect = Duration::from_millis(settings.connect_ms.max(1));
    let mut http = HttpConnector::new();
    http.set_connect_timeout(Some(connect));
    http.set_nodelay(true);
    // The TLS layer on top decides the scheme; the TCP connector must accept `https` URIs.
    http.enforce_http(false);
    let builder = HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(settings.ca_file.as_deref())?)
        .https_or_http();
    let multiplex = settings.http_version == HttpVersion::Auto;
    // The builder sets ALPN: `h2` and `http/1.1`, or none for HTTP/1.1 alone (a server
    // without ALPN speaks HTTP/1.1).
    let connector = if multiplex {
        builder.enable_all_versions().wrap_connector(http)
    } else {
        builder.enable_http1().wrap_connector(http)
    };
    let direct = Direct::new(connector, multiplex);
    let via_proxy = if proxy_in_environment() {
        Some(proxied_client(connect, settings.ca_file.as_deref())?)
    } else {
        None
    };
    Ok(UpstreamClient { direct, via_proxy })
}

impl UpstreamClient {
    /// Sends `req` (its method, headers and body; any URI it holds is replaced) to `to` and
    /// returns the response head; the body streams from [`RespBody`].
    pub async fn send(
        &self,
        to: &Endpoint,
        mut req: Request<Bytes>,
    ) -> Result<Response<RespBody>, TransportError> {
        match &self.via_proxy {
            None => {
                let resp = self.direct.send(to, req).await?;
                Ok(resp.map(RespBody::Direct))
            }
            Some(client) => {
                *req.uri_mut() = to.uri().clone();
                let req = reqwest::Request::try_from(req).map_err(TransportError::Proxied)?;
                let resp = client.execute(req).await.map_err(TransportError::Proxied)?;
                Ok(http::Response::<reqwest::Body>::from(resp).map(RespBody::Proxied))
            }
        }
    }

    /// Whether requests go through a proxy named by the environment.
    pub fn proxied(&self) -> bool {
        self.via_proxy.is_some()
    }
}

/// rustls as reqwest configured it: the process-wide crypto provider if one is installed,
/// else aws-lc-rs; the platform's certificate verifier, with `ca_file`'s certificates as
/// extra roots.
fn tls_config(ca_file: Option<&str>) -> Result<rustls::ClientConfig, BuildError> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = match ca_file {
        None => rustls_platform_verifier::Verifier::new(provider.clone())?,
        Some(file) => rustls_platform_verifier::Verifier::new_with_extra_roots(
            extra_roots(file)?,
            provider.clone(),
        )?,
    };
    // No ALPN list here (the connector builder refuses one and sets its own).
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// The certificates of a PEM file (config validation checked it holds at least one).
fn extra_roots(file: &str) -> Result<Vec<CertificateDer<'static>>, BuildError> {
    let bad = |why: String| BuildError::CaFile {
        file: file.to_owned(),
        why,
    };
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".to_owned()));
    }
    Ok(certs)
}

fn proxy_in_environment() -> bool {
    names_a_proxy(|var| std::env::var_os(var))
}

/// Whether any proxy variable is set and not empty, `get` reading the environment.
fn names_a_proxy(get: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    PROXY_VARS
        .iter()
        .any(|var| get(var).is_some_and(|v| !v.is_empty()))
}

/// The client used when a proxy is configured: reqwest as before (it reads the proxy
/// variables itself, `NO_PROXY` included), HTTP/1.1 only, with `ca_file`'s extra roots.
fn proxied_client(connect: Duration, ca_file: Option<&str>) -> Result<reqwest::Client, BuildError> {
    let mut builder = reqwest::Client::builder();
    if let Some(file) = ca_file {
        let pem = std::fs::read(file).map_err(|e| BuildError::CaFile {
            file: file.to_owned(),
            why: e.to_string(),
        })?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder
        .connect_timeout(connect)
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
        .tcp_nodelay(true)
        .http1_only()
        // Never follow redirects: a provider redirect would silently change where credentials go.
        .redirect(reqwest::redirect::Policy::none())
        // No retries inside the client: failover is the router's decision.
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_is_named_by_any_non_empty_proxy_variable() {
        assert!(!names_a_proxy(|_| None));
        assert!(!names_a_proxy(|_| Some("".into())));
        for var in PROXY_VARS {
            assert!(names_a_proxy(
                |v| (v == var).then(|| "http://proxy:3128".into())
            ));
        }
        assert!(!names_a_proxy(|v| (v == "NO_PROXY").then(|| "*".into())));
    }

    #[tokio::test]
    async fn a_closed_port_is_a_refused_connect() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = build_client(&ProviderTimeouts::default()).unwrap();
        let mut req = Request::new(Bytes::from_static(b"{}"));
        *req.method_mut() = http::Method::POST;
        let to = Endpoint::parse(&format!("http://{addr}/v1/chat/completions")).unwrap();
        let err = client.send(&to, req).await.unwrap_err();
        assert_eq!(
            err.classify(),
            (
                switchyard_shared::classify::TransportFailure::ConnectRefused,
                "connect refused"
            )
        );
    }
}
