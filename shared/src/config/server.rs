//! `[server]`, `[auth]`, `[[api_keys]]` and `[cluster]`: how a node listens, who may call it and
//! how it finds its peers.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// `[server]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Client API listener (`/v1/*`, `/api/v1/session-leases`).
    pub listen: String,
    /// Admin listener (`/api/*`, `/metrics`, `/healthz`, `/readyz`).
    pub admin_listen: String,
    /// `""` = the hostname (the pod name in Kubernetes).
    pub node_id: String,
    /// Larger bodies get 413 before any parsing.
    pub max_body_bytes: u64,
    /// SIGTERM: stop accepting, fail `/readyz`, let streams finish for this long.
    pub shutdown_grace_ms: u64,
    /// 0 = one per core.
    pub workers: u32,
    /// Extra (not in the contract): ceiling for a whole client request, routing, waits and
    /// upstream attempts included. 0 = none (the per-attempt timeouts and wait budgets apply).
    pub client_request_timeout_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            admin_listen: "127.0.0.1:9090".into(),
            node_id: String::new(),
            max_body_bytes: 33_554_432,
            shutdown_grace_ms: 30_000,
            workers: 0,
            client_request_timeout_ms: 0,
        }
    }
}

impl ServerConfig {
    /// The client listener address (validated by [`crate::config::Config::validate`]).
    pub fn listen_addr(&self) -> Result<SocketAddr, std::net::AddrParseError> {
        self.listen.parse()
    }

    /// The admin listener address (validated by [`crate::config::Config::validate`]).
    pub fn admin_listen_addr(&self) -> Result<SocketAddr, std::net::AddrParseError> {
        self.admin_listen.parse()
    }
}

/// `[auth]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// false: anonymous clients are allowed on `/v1/*`.
    pub require_api_key: bool,
    /// Environment variable holding the bearer for `/api/*` on the admin listener. `""` turns the
    /// management API off (every `/api/*` call is refused).
    pub management_key_env: String,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            require_api_key: true,
            management_key_env: "SWITCHYARD_MANAGEMENT_KEY".into(),
        }
    }
}

/// The scope that lets a key hold exclusive session leases.
pub const SCOPE_LEASE_EXCLUSIVE: &str = "lease:exclusive";
/// Every scope a key may carry.
pub const KNOWN_SCOPES: &[&str] = &[SCOPE_LEASE_EXCLUSIVE];

/// `[[api_keys]]`: one client key. The key itself is never in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// REQUIRED; appears in logs and metrics (never the key itself).
    pub id: String,
    /// Environment variable holding the key. Exactly one of `key_env` / `key_sha256`.
    pub key_env: Option<String>,
    /// Hex SHA-256 of the key (64 hex digits).
    pub key_sha256: Option<String>,
    /// Glob patterns (`*`, `?`) over client model names and combo names.
    pub allowed_models: Vec<String>,
    /// `[]` = all; otherwise a hard restriction of the connection pool.
    pub allowed_connections: Vec<String>,
    /// e.g. `["lease:exclusive"]`.
    pub scopes: Vec<String>,
    /// 0 = unlimited (per key, cluster-wide in redis mode).
    pub requests_per_minute: u32,
}

impl Default for ApiKeyConfig {
    fn default() -> Self {
        Self {
            id: String::new(),
            key_env: None,
            key_sha256: None,
            allowed_models: vec!["*".into()],
            allowed_connections: Vec::new(),
            scopes: Vec::new(),
            requests_per_minute: 0,
        }
    }
}

impl ApiKeyConfig {
    /// Whether the key may ask for `model` (a client model name or combo name).
    pub fn allows_model(&self, model: &str) -> bool {
        self.allowed_models
            .iter()
            .any(|pattern| glob_match(pattern, model))
    }

    /// Whether the key may use `connection` (an empty list allows every connection).
    pub fn allows_connection(&self, connection: &str) -> bool {
        self.allowed_connections.is_empty()
            || self.allowed_connections.iter().any(|id| id == connection)
    }

    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// Minimal glob: `*` matches any run of characters (also `/`), `?` exactly one.
///
/// Runs for every request whose key restricts its models, so it works on the strings in
/// place: bytes when both are ASCII, characters otherwise (`?` is one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if pattern.is_ascii() && text.is_ascii() {
        return glob_items(pattern.as_bytes(), text.as_bytes());
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    glob_items(&pattern, &text)
}

/// The glob over items: `*` and `?` are the pattern's wildcards, anything else matches itself.
pub(crate) fn glob_items<T: GlobItem>(pattern: &[T], text: &[T]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(&c) if c == T::STAR => {
                backtrack = Some((p, t));
                p += 1;
            }
            Some(&c) if c == T::QUESTION || Some(&c) == text.get(t) => {
                p += 1;
                t += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    p = star + 1;
                    t = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == T::STAR))
}

/// The two wildcards, as bytes or as characters.
pub(crate) trait GlobItem: Copy + PartialEq {
    const STAR: Self;
    const QUESTION: Self;
}

impl GlobItem for u8 {
    const STAR: Self = b'*';
    const QUESTION: Self = b'?';
}

impl GlobItem for char {
    const STAR: Self = '*';
    const QUESTION: Self = '?';
}

/// `[cluster] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterMode {
    /// Single node, no external service.
    #[default]
    Embedded,
    /// Nodes share state through Redis.
    Redis,
}

impl ClusterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Redis => "redis",
        }
    }
}

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    pub mode: ClusterMode,
    /// Used when `mode = "redis"`; `rediss://` for TLS.
    pub redis_url: String,
    pub key_prefix: String,
    pub heartbeat_interval_ms: u64,
    /// A node missing heartbeats this long is reported down.
    pub node_ttl_ms: u64,
    /// Per command; on timeout the node degrades, it never blocks requests.
    pub redis_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            mode: ClusterMode::Embedded,
            redis_url: "redis://127.0.0.1:6379/0".into(),
            key_prefix: "switchyard:".into(),
            heartbeat_interval_ms: 2000,
            node_ttl_ms: 10_000,
            redis_timeout_ms: 250,
        }
    }
}
