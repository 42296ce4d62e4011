//! An upstream endpoint, checked and prepared once when the configuration is loaded.
//!
//! Why a type: every request used to carry its endpoint as an absolute URI, which the client
//! took apart again per request (the pool key, the origin-form target, a `Host` value
//! formatted and allocated) and which could in principle not be absolute. Parsed here once,
//! a request cannot name an endpoint that is not absolute, and those parts are ready.
//!
//! Why in the shared crate: configuration validation refuses a `base_url` with this same
//! parse, so a URL the node could not send to (`https:///v1`) fails at load instead of
//! failing every attempt as a refused connect and cooling the provider's connections.

use http::uri::Authority;
use http::{HeaderValue, Uri};

/// An absolute `http` or `https` URL with a host and no credentials, with what an HTTP/1.1
/// request to it needs.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The whole URL: what the proxied client and connecting take.
    absolute: Uri,
    /// Path and query: the request line's target.
    origin: Uri,
    /// `Host` as hyper-util wrote it: the host, and the port unless it is the scheme's default.
    host: HeaderValue,
    https: bool,
    authority: Authority,
}

impl Endpoint {
    /// The endpoint `url` names; `None` unless it is absolute, `http` or `https`, with a
    /// host. Credentials in the authority (`user:pass@host`) are refused rather than silently
    /// dropped: credentials belong in the connection's key.
    pub fn parse(url: &str) -> Option<Self> {
        let absolute: Uri = url.parse().ok()?;
        let https = match absolute.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let authority = absolute.authority()?.clone();
        if authority.host().is_empty() || authority.as_str().contains('@') {
            return None;
        }
        // `http` accepts `host:port` with a port that is not a number and then reports no
        // port at all, which would send to the scheme's default port instead.
        let after_host = authority.as_str().get(authority.host().len()..)?;
        if !after_host.is_empty() && authority.port_u16().is_none() {
            return None;
        }
        let default_port = if https { 443 } else { 80 };
        let host = match authority.port_u16() {
            Some(port) if port != default_port => authority.as_str(),
            _ => authority.host(),
        };
        let host = HeaderValue::from_str(host).ok()?;
        let origin = absolute
            .path_and_query()
            .cloned()
            .map_or_else(|| Uri::from_static("/"), Uri::from);
        Some(Self {
            absolute,
            origin,
            host,
            https,
            authority,
        })
    }

    /// The whole URL.
    pub fn uri(&self) -> &Uri {
        &self.absolute
    }

    /// Path and query, as the request line names them.
    pub fn origin(&self) -> &Uri {
        &self.origin
    }

    /// The `Host` header's value.
    pub fn host(&self) -> &HeaderValue {
        &self.host
    }

    pub fn https(&self) -> bool {
        self.https
    }

    pub fn authority(&self) -> &Authority {
        &self.authority
    }
}

/// `base_url` with `path` appended, trailing slashes of `base_url` dropped so that
/// `…/v1/` and `…/v1` name the same endpoint.
pub fn join(base_url: &str, path: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let mut url = String::with_capacity(base.len() + path.len());
    url.push_str(base);
    url.push_str(path);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_absolute_http_urls_without_credentials() {
        let e = Endpoint::parse("https://api.example.com:8443/v1/chat/completions").unwrap();
        assert_eq!(e.uri().host(), Some("api.example.com"));
        assert_eq!(e.uri().port_u16(), Some(8443));
        assert_eq!(e.uri().path(), "/v1/chat/completions");
        assert!(Endpoint::parse("http://127.0.0.1:9/v1/messages").is_some());
        for bad in [
            "api.example.com/v1/chat/completions",
            "/v1/chat/completions",
            "ftp://api.example.com/v1",
            "https://user:secret@api.example.com/v1",
            "https:///v1",
            "http://host:port/v1",
            "http://host:/v1",
            "http://host:99999/v1",
            "not a url",
            "",
        ] {
            assert!(Endpoint::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn host_names_the_port_only_when_it_is_not_the_schemes_default() {
        for (url, host, origin) in [
            (
                "https://api.example.com/v1/messages",
                "api.example.com",
                "/v1/messages",
            ),
            ("https://api.example.com:443/v1", "api.example.com", "/v1"),
            ("https://api.example.com:80/v1", "api.example.com:80", "/v1"),
            ("http://127.0.0.1:8080/a?b=1", "127.0.0.1:8080", "/a?b=1"),
            ("http://[::1]:80", "[::1]", "/"),
        ] {
            let e = Endpoint::parse(url).unwrap();
            assert_eq!(e.host().to_str().unwrap(), host, "{url}");
            assert_eq!(e.origin().to_string(), origin, "{url}");
            assert_eq!(e.https(), url.starts_with("https"), "{url}");
            assert_eq!(e.uri().to_string().trim_end_matches('/'), url, "{url}");
        }
    }
}
