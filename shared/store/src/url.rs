//! Which Redis URL a process uses, and how it is shown.
//!
//! Why here: nodes and the coordinator must agree that `SWITCHYARD_REDIS_URL` overrides
//! `[cluster] redis_url` (so a password can come from a Kubernetes Secret), and neither may
//! ever print that password.

/// The environment variable that overrides `[cluster] redis_url`.
pub const REDIS_URL_ENV: &str = "SWITCHYARD_REDIS_URL";

/// The URL to connect to: the environment override when set and not blank, else the file's.
pub fn effective_url(config_url: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    env(REDIS_URL_ENV)
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| config_url.to_owned())
}

/// A Redis URL safe to show in health bodies and logs: any password is replaced.
pub fn redact_url(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() + 3 => {
            let host = &url[at + 1..];
            let user = rest.split_once(':').map_or("", |(u, _)| u);
            if user.is_empty() {
                format!("{scheme}://***@{host}")
            } else {
                format!("{scheme}://{user}:***@{host}")
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_redaction() {
        assert_eq!(
            redact_url("redis://:s3cret@10.0.0.1:6380/0"),
            "redis://***@10.0.0.1:6380/0"
        );
        assert_eq!(
            redact_url("rediss://app:s3cret@redis.example:6380"),
            "rediss://app:***@redis.example:6380"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6380/0"),
            "redis://127.0.0.1:6380/0"
        );
    }

    #[test]
    fn the_environment_overrides_unless_blank() {
        let set = |k: &str| (k == REDIS_URL_ENV).then(|| "redis://env:1/0".to_owned());
        let blank = |k: &str| (k == REDIS_URL_ENV).then(|| "  ".to_owned());
        assert_eq!(effective_url("redis://file:1/0", &set), "redis://env:1/0");
        assert_eq!(
            effective_url("redis://file:1/0", &blank),
            "redis://file:1/0"
        );
        assert_eq!(
            effective_url("redis://file:1/0", &|_| None),
            "redis://file:1/0"
        );
    }
}
