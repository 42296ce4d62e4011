//! Upstream status restatement: correcting a status the upstream got wrong.
//!
//! Some gateways report a temporary quota exhaustion as 403 or 400 (e.g. a body containing
//! `额度不足`, "insufficient quota"). Clients such as Claude Code treat those statuses as
//! permanent and abort, and the classifier would see an auth or request error. A restatement
//! rule rewrites the status (typically to 429) **before** classification, so the classifier,
//! the combo engine and the client all see the corrected status.
//!
//! Invariants:
//! - rules are per provider and tried in order; the first match wins;
//! - a rule matches when the status is one of its `from_statuses`, the lower-cased
//!   `message + body` contains one of its `text_markers` (a rule without text markers restates
//!   on status alone), and none of its `exclude_markers`
//!   (an exclude marker vetoes, e.g. `无权访问` "no access" is a real permission error);
//! - markers are lower-cased once at construction; empty markers are dropped (an empty marker
//!   would match, or veto, everything);
//! - `retry_after_ms` is the upstream's own value when it sent one, else the rule's default. It
//!   is only what the client is told; the internal cooldown comes from classification.

use serde::{Deserialize, Serialize};

use crate::Millis;

/// One restatement rule, as configured under `[[providers.status_restatement]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RestatementRuleSpec")]
pub struct RestatementRule {
    id: String,
    from_statuses: Vec<u16>,
    to_status: u16,
    text_markers: Vec<String>,
    exclude_markers: Vec<String>,
    default_retry_after_ms: Option<Millis>,
}

/// The configuration shape of a rule, before markers are normalised.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestatementRuleSpec {
    id: String,
    from_statuses: Vec<u16>,
    to_status: u16,
    text_markers: Vec<String>,
    #[serde(default)]
    exclude_markers: Vec<String>,
    #[serde(default)]
    default_retry_after_ms: Option<Millis>,
}

impl From<RestatementRuleSpec> for RestatementRule {
    fn from(spec: RestatementRuleSpec) -> Self {
        Self::new(
            spec.id,
            spec.from_statuses,
            spec.to_status,
            spec.text_markers,
            spec.exclude_markers,
            spec.default_retry_after_ms,
        )
    }
}

fn normalise_markers<S: AsRef<str>>(markers: impl IntoIterator<Item = S>) -> Vec<String> {
    markers
        .into_iter()
        .map(|m| m.as_ref().to_lowercase())
        .filter(|m| !m.is_empty())
        .collect()
}

impl RestatementRule {
    /// Builds a rule; markers are lower-cased and empty ones dropped.
    pub fn new<S: AsRef<str>>(
        id: impl Into<String>,
        from_statuses: Vec<u16>,
        to_status: u16,
        text_markers: impl IntoIterator<Item = S>,
        exclude_markers: impl IntoIterator<Item = S>,
        default_retry_after_ms: Option<Millis>,
    ) -> Self {
        Self {
            id: id.into(),
            from_statuses,
            to_status,
            text_markers: normalise_markers(text_markers),
            exclude_markers: normalise_markers(exclude_markers),
            default_retry_after_ms,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn from_statuses(&self) -> &[u16] {
        &self.from_statuses
    }
    pub fn to_status(&self) -> u16 {
        self.to_status
    }
    /// Lower-cased, non-empty.
    pub fn text_markers(&self) -> &[String] {
        &self.text_markers
    }
    /// Lower-cased, non-empty.
    pub fn exclude_markers(&self) -> &[String] {
        &self.exclude_markers
    }
    pub fn default_retry_after_ms(&self) -> Option<Millis> {
        self.default_retry_after_ms
    }

    /// Whether this rule restates `status` given the lower-cased error text.
    fn matches(&self, status: u16, lowered: &str) -> bool {
        self.applies(status, lowered) && !self.excludes(lowered)
    }

    /// The status and a text marker match (before any exclude marker is looked at).
    fn applies(&self, status: u16, lowered: &str) -> bool {
        // No text markers means "restate on status alone", as the config contract says.
        self.from_statuses.contains(&status)
            && (self.text_markers.is_empty()
                || self
                    .text_markers
                    .iter()
                    .any(|m| lowered.contains(m.as_str())))
    }

    fn excludes(&self, lowered: &str) -> bool {
        self.exclude_markers
            .iter()
            .any(|m| lowered.contains(m.as_str()))
    }
}

/// A restated status: what classification and the client see instead of the upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restated<'a> {
    pub status: u16,
    /// The `Retry-After` to tell the client: the upstream's, else the rule's default.
    pub retry_after_ms: Option<Millis>,
    pub rule_id: &'a str,
    /// The status the upstream actually sent.
    pub from_status: u16,
}

/// Applies the first matching rule of `rules` (one provider's list) to an error response.
///
/// `message` and `body` are matched together, lower-cased. `upstream_retry_after_ms` is the
/// upstream's own `Retry-After` (zero counts as absent). `None` means the status stands.
pub fn restate<'a>(
    status: u16,
    message: &str,
    body: &str,
    rules: &'a [RestatementRule],
    upstream_retry_after_ms: Option<Millis>,
) -> Option<Restated<'a>> {
    // Most responses meet no rule for their status; skip the lower-casing then.
    if !rules.iter().any(|r| r.from_statuses.contains(&status)) {
        return None;
    }
    let mut lowered = String::with_capacity(message.len() + body.len() + 1);
    lowered.push_str(message);
    lowered.push(' ');
    lowered.push_str(body);
    let lowered = lowered.to_lowercase();
    let rule = rules.iter().find(|r| r.matches(status, &lowered))?;
    Some(Restated {
        status: rule.to_status,
        retry_after_ms: upstream_retry_after_ms
            .filter(|ms| *ms > 0)
            .or(rule.default_retry_after_ms),
        rule_id: &rule.id,
        from_status: status,
    })
}

/// The id of the first rule that would restate this response but for one of its exclude
/// markers: the operator has said what the body is (`无权访问`, "no access", is a real
/// permission error), so classification must not read it as anything else either, the
/// built-in quota and credits texts included (RESILIENCE.md, third-round clarifications).
/// `None` when no rule applies or a rule restates it.
pub fn vetoed<'a>(
    status: u16,
    message: &str,
    body: &str,
    rules: &'a [RestatementRule],
) -> Option<&'a str> {
    if !rules.iter().any(|r| r.from_statuses.contains(&status)) {
        return None;
    }
    let lowered = format!("{message} {body}").to_lowercase();
    // The first rule that applies decides, as in [`restate`].
    rules
        .iter()
        .find(|r| r.applies(status, &lowered))
        .filter(|r| r.excludes(&lowered))
        .map(|r| r.id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The example rule of `switchyard.example.toml` (agentrouter-style quota misstatus).
    fn quota_rule() -> RestatementRule {
        RestatementRule::new(
            "example-quota-403",
            vec![400, 403],
            429,
            ["额度不足"],
            ["无权访问"],
            Some(60_000),
        )
    }

    #[test]
    fn r1_quota_403_becomes_429_with_default_retry_after() {
        let rules = [quota_rule()];
        let message = r#"{"error":{"message":"用户额度不足","type":"insufficient_user_quota"}}"#;
        let out = restate(403, message, "", &rules, None).expect("restated");
        assert_eq!(out.status, 429);
        assert_eq!(out.from_status, 403);
        assert_eq!(out.rule_id, "example-quota-403");
        assert_eq!(out.retry_after_ms, Some(60_000));
    }

    #[test]
    fn r2_exclude_marker_vetoes_even_with_a_quota_marker() {
        let rules = [quota_rule()];
        assert_eq!(
            restate(403, "无权访问模型 claude-sonnet-4", "", &rules, None),
            None
        );
        assert_eq!(
            restate(403, "额度不足 / 无权访问模型", "", &rules, None),
            None
        );
    }

    #[test]
    fn r2b_an_excluded_body_is_vetoed_for_classification_too() {
        let rules = [quota_rule()];
        let body = r#"{"error":{"message":"用户额度不足，无权访问该模型"}}"#;
        assert_eq!(restate(403, "", body, &rules, None), None);
        assert_eq!(
            vetoed(403, "", body, &rules),
            Some("example-quota-403"),
            "the exclude marker vetoes every reading of the body"
        );
        // Not vetoed: a body the rule restates, one without its text marker, another status.
        assert_eq!(vetoed(403, "", "用户额度不足", &rules), None);
        assert_eq!(vetoed(403, "", "无权访问该模型", &rules), None);
        assert_eq!(vetoed(500, "", body, &rules), None);
    }

    #[test]
    fn r3_marker_in_body_not_message_still_restates() {
        let rules = [quota_rule()];
        let body = r#"{"error":{"message":"用户额度不足，请充值"}}"#;
        let out = restate(403, "Forbidden", body, &rules, None).expect("restated");
        assert_eq!(out.status, 429);
    }

    #[test]
    fn r4_upstream_retry_after_wins_over_the_default() {
        let rules = [quota_rule()];
        let out = restate(403, "用户额度不足", "", &rules, Some(5_000)).expect("restated");
        assert_eq!(out.retry_after_ms, Some(5_000));
        // A zero upstream value is no value.
        let out = restate(403, "用户额度不足", "", &rules, Some(0)).expect("restated");
        assert_eq!(out.retry_after_ms, Some(60_000));
    }

    #[test]
    fn r5_a_400_with_the_marker_also_restates() {
        let rules = [quota_rule()];
        assert_eq!(
            restate(400, "额度不足", "", &rules, None).map(|r| r.status),
            Some(429)
        );
    }

    #[test]
    fn r6_403_without_markers_is_untouched() {
        let rules = [quota_rule()];
        assert_eq!(restate(403, "Invalid API key", "", &rules, None), None);
    }

    #[test]
    fn r7_a_provider_without_rules_is_untouched() {
        assert_eq!(restate(403, "用户额度不足", "", &[], None), None);
    }

    #[test]
    fn r8_statuses_a_rule_does_not_list_pass_through() {
        let rules = [quota_rule()];
        assert_eq!(restate(429, "用户额度不足", "", &rules, Some(1_000)), None);
        assert_eq!(restate(500, "用户额度不足", "", &rules, None), None);
    }

    #[test]
    fn r9_config_shape_deserialises_and_lowercases_markers() {
        let toml = r#"
            id = "codebuddy-waf"
            from_statuses = [400]
            to_status = 429
            text_markers = ["Request ILLEGAL", ""]
            exclude_markers = ["First Message Is Not System Prompt"]
            default_retry_after_ms = 1000
        "#;
        let rule: RestatementRule = toml::from_str(toml).expect("valid rule");
        assert_eq!(rule.text_markers(), ["request illegal"]);
        assert_eq!(
            rule.exclude_markers(),
            ["first message is not system prompt"]
        );
        assert_eq!(rule.default_retry_after_ms(), Some(1_000));
        let example = r#"
            id = "example-quota-403"
            from_statuses = [400, 403]
            to_status = 429
            text_markers = ["额度不足"]
            exclude_markers = ["无权访问"]
            default_retry_after_ms = 60000
        "#;
        let parsed: RestatementRule = toml::from_str(example).expect("valid rule");
        assert_eq!(parsed, quota_rule());
    }

    #[test]
    fn r10_ascii_markers_match_case_insensitively() {
        let rules = [RestatementRule::new(
            "waf",
            vec![400],
            429,
            ["Request Illegal"],
            ["first message is not system prompt"],
            Some(1_000),
        )];
        let out = restate(
            400,
            "",
            r#"{"msg":"REQUEST ILLEGAL","code":11128}"#,
            &rules,
            None,
        );
        assert_eq!(
            out.map(|r| (r.status, r.retry_after_ms)),
            Some((429, Some(1_000)))
        );
        let vetoed = "Request illegal: FIRST MESSAGE IS NOT SYSTEM PROMPT";
        assert_eq!(restate(400, vetoed, "", &rules, None), None);
    }

    #[test]
    fn r11_first_matching_rule_wins_and_no_default_means_no_retry_after() {
        let rules = [
            RestatementRule::new("first", vec![403], 429, ["quota"], [""; 0], None),
            RestatementRule::new("second", vec![403], 503, ["quota"], [""; 0], Some(9)),
        ];
        let out = restate(403, "Quota gone", "", &rules, None).expect("restated");
        assert_eq!(out.rule_id, "first");
        assert_eq!(out.retry_after_ms, None);
        // A rule that does not list the status is skipped, the next one applies.
        let rules = [
            RestatementRule::new("only-400", vec![400], 429, ["quota"], [""; 0], None),
            RestatementRule::new("for-403", vec![403], 503, ["quota"], [""; 0], Some(9)),
        ];
        let out = restate(403, "quota", "", &rules, None).expect("restated");
        assert_eq!(
            (out.rule_id, out.status, out.retry_after_ms),
            ("for-403", 503, Some(9))
        );
    }

    #[test]
    fn a_rule_without_text_markers_restates_on_status_alone() {
        // The config contract: `text_markers = []` restates on status alone (found writing the
        // fuzz oracle against the contract; such a rule never matched before). Excludes still
        // veto.
        let rules = [RestatementRule::new(
            "status-only",
            vec![403],
            429,
            [""; 0],
            ["forbidden"],
            Some(5),
        )];
        let out = restate(403, "anything", "", &rules, None).expect("restated");
        assert_eq!((out.status, out.retry_after_ms), (429, Some(5)));
        assert_eq!(restate(403, "Forbidden", "", &rules, None), None);
        assert_eq!(restate(400, "anything", "", &rules, None), None);
        // An empty marker is dropped, which leaves a status-only rule too.
        let rules = [RestatementRule::new(
            "blank",
            vec![403],
            429,
            [""],
            [],
            None,
        )];
        assert!(restate(403, "x", "", &rules, None).is_some());
    }

    #[test]
    fn unknown_config_fields_are_rejected() {
        let toml = r#"
            id = "x"
            from_statuses = [403]
            to_status = 429
            text_markers = ["a"]
            exclude_marker = ["typo"]
        "#;
        assert!(toml::from_str::<RestatementRule>(toml).is_err());
    }

    proptest! {
        #[test]
        fn restate_never_panics(
            status in any::<u16>(),
            message in any::<String>(),
            body in any::<String>(),
            marker in any::<String>(),
            upstream in any::<Option<u64>>(),
        ) {
            let rules = [
                quota_rule(),
                RestatementRule::new("fuzz", vec![status], 429, [marker.as_str()], [""; 0], None),
            ];
            if let Some(out) = restate(status, &message, &body, &rules, upstream) {
                prop_assert_eq!(out.from_status, status);
            }
        }
    }
}
