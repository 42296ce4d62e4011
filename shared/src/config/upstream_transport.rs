//! The provider settings of the connection to the provider itself: which HTTP version the
//! node may speak to it, and an extra certificate authority to trust for it.
//!
//! Why a module: both are read by the node's upstream client, not by routing, and both are
//! checked at config load (an unreadable CA file must fail `--check` and startup, not the
//! first request).

use serde::{Deserialize, Serialize};

use super::ProviderConfig;
use super::error::Collector;

/// `http_version`: the HTTP versions the node offers a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpVersion {
    /// HTTPS providers are offered HTTP/2 and HTTP/1.1 by ALPN and the provider chooses;
    /// concurrent requests share a few HTTP/2 connections. Plain `http://` providers get
    /// HTTP/1.1 (no cleartext HTTP/2).
    #[default]
    Auto,
    /// HTTP/1.1 only, one request per connection at a time: for a provider that
    /// misbehaves on HTTP/2.
    Http1,
}

/// The largest CA file read: a bundle of a few hundred certificates fits.
const MAX_CA_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The marker of a PEM certificate block.
const PEM_CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----";

/// Checks `ca_file` of one provider: when set, a readable file of PEM certificates.
pub(super) fn validate(provider: &ProviderConfig, path: &str, errors: &mut Collector) {
    let Some(file) = &provider.ca_file else {
        return;
    };
    let field = format!("{path}.ca_file");
    if file.trim().is_empty() {
        errors.push(
            field,
            "must name a PEM file of certificate authorities, or be left out",
        );
        return;
    }
    match std::fs::metadata(file) {
        Ok(meta) if meta.len() > MAX_CA_FILE_BYTES => {
            errors.push(field, format!("`{file}` is larger than 4 MiB"));
            return;
        }
        Ok(_) => {}
        Err(e) => {
            errors.push(field, format!("`{file}` cannot be read: {e}"));
            return;
        }
    }
    match std::fs::read_to_string(file) {
        Ok(text) if text.contains(PEM_CERTIFICATE) => {}
        Ok(_) => errors.push(
            field,
            format!("`{file}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ),
        Err(e) => errors.push(field, format!("`{file}` cannot be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn config(extra: &str) -> Result<Config, String> {
        let text = format!(
            "[auth]\nrequire_api_key = false\n\n[[providers]]\nid = \"p\"\nbase_url = \"https://p.example/v1\"\n{extra}\n\
             [[connections]]\nid = \"c\"\nprovider = \"p\"\napi_key_env = \"K\"\n"
        );
        Config::from_toml_str(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn http_version_defaults_to_auto_and_takes_http1() {
        assert_eq!(
            config("").unwrap().providers[0].http_version,
            HttpVersion::Auto
        );
        let c = config("http_version = \"http1\"").unwrap();
        assert_eq!(c.providers[0].http_version, HttpVersion::Http1);
        let err = config("http_version = \"h3\"").unwrap_err();
        assert!(err.contains("http_version") || err.contains("h3"), "{err}");
    }

    #[test]
    fn a_ca_file_must_be_a_readable_pem_file() {
        // A folder of this test's own under the system's temporary one.
        let dir = std::env::temp_dir().join(format!("switchyard-ca-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("ca.pem");
        std::fs::write(
            &good,
            format!("{PEM_CERTIFICATE}\nMIIB\n-----END CERTIFICATE-----\n"),
        )
        .unwrap();
        let c = config(&format!("ca_file = {:?}", good.display().to_string())).unwrap();
        assert_eq!(
            c.providers[0].ca_file.as_deref(),
            Some(good.to_str().unwrap())
        );

        let missing = dir.join("missing.pem");
        let err = config(&format!("ca_file = {:?}", missing.display().to_string())).unwrap_err();
        assert!(
            err.contains("providers[0].ca_file") && err.contains("cannot be read"),
            "{err}"
        );

        let not_pem = dir.join("key.txt");
        std::fs::write(&not_pem, "hello").unwrap();
        let err = config(&format!("ca_file = {:?}", not_pem.display().to_string())).unwrap_err();
        assert!(err.contains("no PEM certificate"), "{err}");

        let err = config("ca_file = \"\"").unwrap_err();
        assert!(err.contains("providers[0].ca_file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
