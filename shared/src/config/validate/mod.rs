//! Semantic validation: the rules serde cannot express (references between sections, unique
//! ids, formats, sane numbers). Every rule pushes into one collector so all problems are
//! reported together.
//!
//! Resilience values out of their bounds are *not* errors: the specification has them clamped
//! with a warning (see [`crate::settings::build`]).

mod routing;

use std::collections::HashMap;
use std::net::SocketAddr;

use super::error::Collector;
use super::{ApiKeyConfig, ClusterMode, Config, ConfigErrors, KNOWN_SCOPES, SCOPE_LEASE_EXCLUSIVE};

pub(super) fn validate(config: &Config) -> Result<(), ConfigErrors> {
    let mut errors = Collector::default();
    server(config, &mut errors);
    auth(config, &mut errors);
    for (index, key) in config.api_keys.iter().enumerate() {
        api_key(config, key, &format!("api_keys[{index}]"), &mut errors);
    }
    unique(
        config.api_keys.iter().map(|key| key.id.as_str()),
        "api_keys",
        "id",
        &mut errors,
    );
    cluster(config, &mut errors);
    routing::providers(config, &mut errors);
    routing::connections(config, &mut errors);
    routing::combos(config, &mut errors);
    routing::resilience(config, &mut errors);
    super::strategy_inputs::validate_catalog(&config.model_catalog, &mut errors);
    super::strategy_inputs::validate_preflight(&config.quota_preflight, &mut errors);
    super::fallback::validate(config, &mut errors);
    super::multi_call::validate(config, &mut errors);
    super::context_relay::validate(config, &mut errors);
    super::egress::validate(config, &mut errors);
    super::usage_wall::validate(config, &mut errors);
    errors.finish()
}

fn server(config: &Config, errors: &mut Collector) {
    let server = &config.server;
    let listen = socket_addr(&server.listen, "server.listen", errors);
    let admin = socket_addr(&server.admin_listen, "server.admin_listen", errors);
    if let (Some(listen), Some(admin)) = (listen, admin)
        && listeners_clash(listen, admin)
    {
        errors.push(
            "server.admin_listen",
            format!("`{admin}` clashes with server.listen `{listen}`; they must differ"),
        );
    }
    if server.max_body_bytes == 0 {
        errors.push("server.max_body_bytes", "must be above 0");
    }
    if server.workers > 1024 {
        errors.push("server.workers", "must be at most 1024 (0 = one per core)");
    }
    if !server.node_id.is_empty() && !is_label(&server.node_id) {
        errors.push("server.node_id", "may only contain A-Z a-z 0-9 . _ -");
    }
}

fn socket_addr(value: &str, path: &str, errors: &mut Collector) -> Option<SocketAddr> {
    match value.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            errors.push(
                path,
                format!("`{value}` is not a socket address (e.g. 127.0.0.1:8080 or [::]:8080)"),
            );
            None
        }
    }
}

/// Two listeners clash when they would bind the same port on overlapping addresses. Port 0
/// (an ephemeral port, used by tests) never clashes.
fn listeners_clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

fn auth(config: &Config, errors: &mut Collector) {
    let env = &config.auth.management_key_env;
    if !env.is_empty() && !is_env_name(env) {
        errors.push("auth.management_key_env", bad_env_name(env));
    }
    if config.auth.require_api_key && config.api_keys.is_empty() {
        errors.push(
            "auth.require_api_key",
            "is true but no [[api_keys]] are configured, so every client request would be refused",
        );
    }
}

fn api_key(config: &Config, key: &ApiKeyConfig, path: &str, errors: &mut Collector) {
    if key.id.is_empty() {
        errors.push(format!("{path}.id"), "is required");
    } else if !is_label(&key.id) {
        errors.push(format!("{path}.id"), "may only contain A-Z a-z 0-9 . _ -");
    }
    match (&key.key_env, &key.key_sha256) {
        (None, None) => errors.push(path, "needs one of `key_env` or `key_sha256`"),
        (Some(_), Some(_)) => errors.push(path, "set only one of `key_env` and `key_sha256`"),
        (Some(env), None) if !is_env_name(env) => {
            errors.push(format!("{path}.key_env"), bad_env_name(env));
        }
        (None, Some(hash)) if !is_sha256_hex(hash) => errors.push(
            format!("{path}.key_sha256"),
            "must be a SHA-256 digest: 64 hexadecimal digits",
        ),
        _ => {}
    }
    for (index, pattern) in key.allowed_models.iter().enumerate() {
        if pattern.trim().is_empty() {
            errors.push(
                format!("{path}.allowed_models[{index}]"),
                "must not be empty",
            );
        }
    }
    for (index, id) in key.allowed_connections.iter().enumerate() {
        if config.connection(id).is_none() {
            errors.push(
                format!("{path}.allowed_connections[{index}]"),
                format!("no connection has id `{id}`"),
            );
        }
    }
    for (index, scope) in key.scopes.iter().enumerate() {
        if !KNOWN_SCOPES.contains(&scope.as_str()) {
            errors.push(
                format!("{path}.scopes[{index}]"),
                format!(
                    "unknown scope `{scope}` (known: {})",
                    KNOWN_SCOPES.join(", ")
                ),
            );
        }
    }
    if key.has_scope(SCOPE_LEASE_EXCLUSIVE) && key.allowed_connections.is_empty() {
        errors.push(
            format!("{path}.allowed_connections"),
            "must list the connections a `lease:exclusive` key may lease",
        );
    }
}

fn cluster(config: &Config, errors: &mut Collector) {
    let cluster = &config.cluster;
    if cluster.mode == ClusterMode::Redis {
        let url = &cluster.redis_url;
        // The store also takes Sentinel and Redis Cluster URLs (`store::sentinel`,
        // `store::cluster`), which the chart writes into the file.
        let rest = [
            "redis://",
            "rediss://",
            "redis+sentinel://",
            "rediss+sentinel://",
            "redis+cluster://",
            "rediss+cluster://",
        ]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme));
        match rest {
            None => errors.push(
                "cluster.redis_url",
                "must start with redis:// (or rediss:// for TLS, redis+sentinel:// or \
                 rediss+sentinel:// for Sentinel, redis+cluster:// or rediss+cluster:// for \
                 Redis Cluster) when mode = \"redis\"",
            ),
            Some(rest) if rest.split(['/', '?']).next().is_none_or(str::is_empty) => {
                errors.push("cluster.redis_url", "has no host");
            }
            Some(_) => {}
        }
    }
    if cluster.key_prefix.contains(['{', '}']) {
        errors.push(
            "cluster.key_prefix",
            "must not contain `{` or `}` (Switchyard adds its own hash tags)",
        );
    }
    if cluster.heartbeat_interval_ms == 0 {
        errors.push("cluster.heartbeat_interval_ms", "must be above 0");
    }
    if cluster.node_ttl_ms <= cluster.heartbeat_interval_ms {
        errors.push(
            "cluster.node_ttl_ms",
            format!(
                "must be longer than heartbeat_interval_ms ({})",
                cluster.heartbeat_interval_ms
            ),
        );
    }
    if cluster.redis_timeout_ms == 0 {
        errors.push("cluster.redis_timeout_ms", "must be above 0");
    }
}

/// Reports every value that occurs more than once, at the later occurrences.
fn unique<'a>(
    values: impl Iterator<Item = &'a str>,
    section: &str,
    field: &str,
    errors: &mut Collector,
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, value) in values.enumerate() {
        if value.is_empty() {
            continue;
        }
        if let Some(first) = seen.get(value) {
            errors.push(
                format!("{section}[{index}].{field}"),
                format!("`{value}` is already used by {section}[{first}]"),
            );
        } else {
            seen.insert(value, index);
        }
    }
}

/// Ids that end up in metrics labels and Redis keys.
fn is_label(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn is_env_name(value: &str) -> bool {
    let mut chars = value.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn bad_env_name(value: &str) -> String {
    format!("`{value}` is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
}

fn is_sha256_hex(value: &str) -> bool {
    value.len() == 64 && value.chars().all(|c| c.is_ascii_hexdigit())
}
