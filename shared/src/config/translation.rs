//! Translation settings: the `[translation]` table and the per-provider `responses_api` key.
//!
//! Both decide what happens when a client's format and a provider's format differ (see
//! `docs/translation.md`): whether request fields a provider format cannot express are dropped
//! (and named) or refused, and whether an `openai`-format provider is sent the Responses API
//! as is or Chat Completions.

use serde::{Deserialize, Serialize};

use crate::translate::UnknownParams;

/// `[translation]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranslationConfig {
    /// A client field or variant the provider format cannot express: `drop` (default; the
    /// older name `drop-hints` reads the same) drops it and names it; `refuse` refuses it.
    pub unknown_params: UnknownParams,
}

/// `[[providers]] responses_api`: how `/v1/responses` reaches an `openai`-format provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResponsesApi {
    /// Pass through to OpenAI's own hosts ([`is_openai_responses_host`]), translate to Chat
    /// Completions everywhere else: most OpenAI-compatible servers (vLLM, Ollama, DeepSeek,
    /// GLM, Groq, …) do not serve `/v1/responses`.
    #[default]
    Auto,
    /// Always pass `/v1/responses` through (a compatible server that serves it).
    Native,
    /// Always translate to Chat Completions.
    Translate,
}

impl ResponsesApi {
    /// Whether a provider at `base_url` is sent Responses requests unchanged.
    pub fn native_for(self, base_url: &str) -> bool {
        match self {
            Self::Native => true,
            Self::Translate => false,
            Self::Auto => is_openai_responses_host(base_url),
        }
    }
}

/// Whether `base_url` points at a host that serves OpenAI's Responses API: `api.openai.com`
/// or an Azure OpenAI resource (`*.openai.azure.com`).
pub fn is_openai_responses_host(base_url: &str) -> bool {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Drop userinfo and the port.
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = host
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    host == "api.openai.com" || host.ends_with(".openai.azure.com")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_openai_hosts_serve_responses_in_auto_mode() {
        for url in [
            "https://api.openai.com/v1",
            "https://API.openai.com:443/v1/",
            "https://my-resource.openai.azure.com/openai/v1",
        ] {
            assert!(ResponsesApi::Auto.native_for(url), "{url}");
        }
        for url in [
            "http://127.0.0.1:8000/v1",
            "https://api.deepseek.com",
            "https://open.bigmodel.cn/api/paas/v4",
            "https://api.openai.com.evil.example/v1",
            "https://openai.azure.com.example/v1",
            "api.groq.com/openai/v1",
        ] {
            assert!(!ResponsesApi::Auto.native_for(url), "{url}");
        }
        assert!(ResponsesApi::Native.native_for("http://127.0.0.1:8000/v1"));
        assert!(!ResponsesApi::Translate.native_for("https://api.openai.com/v1"));
    }

    #[test]
    fn settings_parse_from_toml() {
        let t: TranslationConfig = toml::from_str("unknown_params = \"refuse\"").unwrap();
        assert_eq!(t.unknown_params, UnknownParams::Refuse);
        let t: TranslationConfig = toml::from_str("").unwrap();
        assert_eq!(t.unknown_params, UnknownParams::Drop);
        let t: TranslationConfig = toml::from_str("unknown_params = \"drop-hints\"").unwrap();
        assert_eq!(t.unknown_params, UnknownParams::Drop);
        assert!(toml::from_str::<TranslationConfig>("unknown_params = \"ignore\"").is_err());
    }
}
