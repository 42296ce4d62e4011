//! The catalogue the chaos runner drives: 3 providers (two OpenAI-format, one
//! Anthropic-format), 8 connections with distinct upstream keys, and 2 combos, with resilience
//! settings short enough that cooldowns, breakers and watchdogs act within a short run.
//! Providers rotate round-robin over their connections, so a fault scripted on any one
//! connection is met by live traffic. Connection a2 is reserved for exclusive session leases
//! (the lease owners compete for it); ordinary `pa` traffic uses a0 and a1.

/// Provider ids with their wire format.
pub const PROVIDERS: [(&str, &str); 3] = [("pa", "openai"), ("pb", "openai"), ("pc", "anthropic")];

/// `(connection id, provider id, upstream API key)`.
pub const CONNECTIONS: [(&str, &str, &str); 8] = [
    ("a0", "pa", "sk-chaos-a0-4f1e"),
    ("a1", "pa", "sk-chaos-a1-92bd"),
    ("a2", "pa", "sk-chaos-a2-0c77"),
    ("b0", "pb", "sk-chaos-b0-5a30"),
    ("b1", "pb", "sk-chaos-b1-d9e2"),
    ("b2", "pb", "sk-chaos-b2-71fc"),
    ("c0", "pc", "sk-chaos-c0-3b08"),
    ("c1", "pc", "sk-chaos-c1-e6a4"),
];

/// Connections with a cluster-wide `max_concurrent` of [`CAP`].
pub const CAPPED: [&str; 2] = ["a2", "b0"];

/// The `max_concurrent` of each [`CAPPED`] connection.
pub const CAP: u64 = 12;

/// The client API key every load request carries.
pub const CLIENT_KEY: &str = "sk-chaos-client-8d2f61";

/// The upstream model every provider serves.
pub const MODEL: &str = "m";

/// What clients ask for: each provider's model and both combos.
pub const CLIENT_MODELS: [&str; 5] = ["pa/m", "pb/m", "pc/m", "combo-ab", "combo-bc"];

/// Per-provider timeouts: the stream watchdog must end a stalled stream well inside the
/// client's deadline.
pub const IDLE_MS: u64 = 1_500;

/// The upstream key of connection `id`.
pub fn key_of(connection: &str) -> Option<&'static str> {
    CONNECTIONS
        .iter()
        .find(|(c, _, _)| *c == connection)
        .map(|(_, _, k)| *k)
}

/// The connection that holds upstream key `key`.
pub fn connection_of_key(key: &str) -> Option<&'static str> {
    CONNECTIONS
        .iter()
        .find(|(_, _, k)| *k == key)
        .map(|(c, _, _)| *c)
}

/// The provider of connection `id`.
pub fn provider_of(connection: &str) -> Option<&'static str> {
    CONNECTIONS
        .iter()
        .find(|(c, _, _)| *c == connection)
        .map(|(_, p, _)| *p)
}

/// Connections of provider `provider`.
pub fn connections_of(provider: &str) -> impl Iterator<Item = &'static str> + '_ {
    CONNECTIONS
        .iter()
        .filter(move |(_, p, _)| *p == provider)
        .map(|(c, _, _)| *c)
}

/// Environment variable that carries connection `id`'s key.
fn key_env(connection: &str) -> String {
    format!("CHAOS_KEY_{}", connection.to_ascii_uppercase())
}

/// Every environment variable a node needs besides the cluster ones: the upstream keys and
/// the client key.
pub fn node_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = CONNECTIONS
        .iter()
        .map(|(c, _, k)| (key_env(c), (*k).to_owned()))
        .collect();
    env.push(("CHAOS_CLIENT_KEY".to_owned(), CLIENT_KEY.to_owned()));
    env.push((
        "CHAOS_AGENT_KEY".to_owned(),
        super::leases::AGENT_KEY.to_owned(),
    ));
    env
}

/// The node config (without listeners or the cluster table) for a node whose upstreams are
/// all served by the mock at `mock_base` (`http://127.0.0.1:PORT`).
pub fn node_body(mock_base: &str) -> String {
    let mut out = String::from(
        r#"
[server]
workers = 2
shutdown_grace_ms = 1000

[auth]
require_api_key = true
management_key_env = "SWITCHYARD_MANAGEMENT_KEY"

[[api_keys]]
id = "chaos-client"
key_env = "CHAOS_CLIENT_KEY"

[[api_keys]]
id = "chaos-agents"
key_env = "CHAOS_AGENT_KEY"
scopes = ["lease:exclusive"]
allowed_connections = ["a2"]
"#,
    );
    for (id, format) in PROVIDERS {
        out.push_str(&format!(
            "\n[[providers]]\nid = \"{id}\"\ncategory = \"apikey\"\nformat = \"{format}\"\n\
             base_url = \"{mock_base}/v1\"\nmodels = [\"{MODEL}\"]\n\
             connection_strategy = \"round-robin\"\n\
             [providers.timeouts]\nconnect_ms = 1000\nheaders_ms = 4000\n\
             first_content_ms = 3000\nidle_ms = {IDLE_MS}\n"
        ));
    }
    for (i, (id, provider, _)) in CONNECTIONS.iter().enumerate() {
        out.push_str(&format!(
            "\n[[connections]]\nid = \"{id}\"\nprovider = \"{provider}\"\n\
             api_key_env = \"{}\"\npriority = {}\n",
            key_env(id),
            i % 3 + 1
        ));
        // Two connections carry a cluster-wide cap, so the permit blocks are exercised.
        if CAPPED.contains(id) {
            out.push_str(&format!("max_concurrent = {CAP}\n"));
        }
    }
    for (name, targets) in [
        ("combo-ab", ["pa/m", "pb/m"]),
        ("combo-bc", ["pb/m", "pc/m"]),
    ] {
        out.push_str(&format!(
            "\n[[combos]]\nname = \"{name}\"\nstrategy = \"priority\"\ntargets = [\
             {{ target = \"{}\" }}, {{ target = \"{}\" }}]\n\
             [combos.config]\nmax_retries = 0\nmax_attempts = 6\n",
            targets[0], targets[1]
        ));
    }
    out.push_str(
        r#"
[resilience.provider_breaker.apikey]
failure_threshold = 6
reset_timeout_ms = 2000

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false
"#,
    );
    out.push_str(&format!(
        "\n[resilience.session_leases]\nttl_ms = {}\n",
        super::leases::TTL_MS
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_connections_map_both_ways() {
        for (c, p, k) in CONNECTIONS {
            assert_eq!(key_of(c), Some(k));
            assert_eq!(connection_of_key(k), Some(c));
            assert_eq!(provider_of(c), Some(p));
        }
        assert_eq!(connections_of("pb").collect::<Vec<_>>(), ["b0", "b1", "b2"]);
        assert_eq!(key_of("zz"), None);
        assert_eq!(node_env().len(), CONNECTIONS.len() + 2);
    }

    #[test]
    fn the_body_names_every_connection_and_combo() {
        let body = node_body("http://127.0.0.1:9");
        for (c, _, _) in CONNECTIONS {
            assert!(body.contains(&format!("id = \"{c}\"")), "{c}");
        }
        assert!(body.contains("name = \"combo-bc\""));
        assert!(body.contains("format = \"anthropic\""));
    }
}
