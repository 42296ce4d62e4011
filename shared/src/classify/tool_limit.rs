//! Dynamic tool-limit detection: a 400 that says the request carries too many tools.
//!
//! Why: providers cap the number of tools a request may declare (OpenAI: "Invalid 'tools':
//! array too long. Expected an array with maximum length 128 …"), and the cap differs per
//! provider and model. The same request fails there every time, but another target may accept
//! it, so a combo moves on; and once the limit is known, later requests above it skip that
//! target without sending it (skip reason `tool_limit`). The limit is the number the error
//! names, else one less than the request's own tool count.

/// Whether an error text (lower-cased) says the request has too many tools.
pub fn says_too_many_tools(t: &str) -> bool {
    const PHRASES: [&str; 7] = [
        "too many tools",
        "'tools': array too long",
        "tools: array too long",
        "maximum number of tools",
        "number of tools",
        "too many function declarations",
        "tools exceeds",
    ];
    PHRASES.iter().any(|p| t.contains(p))
        || (t.contains("tools") && t.contains("at most") && t.contains("items"))
        || (t.contains("function declarations")
            && (t.contains("exceed") || t.contains("at most") || t.contains("limit")))
}

/// The first number after one of the phrases that name a maximum.
fn stated_limit(t: &str) -> Option<u32> {
    const PHRASES: [&str; 6] = [
        "maximum length",
        "at most",
        "maximum of",
        "limit of",
        "up to",
        "max",
    ];
    PHRASES.iter().find_map(|p| {
        let start = t.find(p)? + p.len();
        let digits: String = t
            .get(start..)?
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// The tool limit an error text (lower-cased) reveals for a request that declared
/// `requested` tools: the number it names when that is below `requested`, else
/// `requested - 1`. `None` when the text is not about too many tools.
pub fn tool_limit(t: &str, requested: usize) -> Option<u32> {
    if !says_too_many_tools(t) {
        return None;
    }
    let requested = u32::try_from(requested).unwrap_or(u32::MAX);
    let fallback = requested.saturating_sub(1);
    Some(match stated_limit(t) {
        Some(n) if n < requested => n,
        _ => fallback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_wordings_are_recognised_with_their_limit() {
        let openai = "invalid 'tools': array too long. expected an array with maximum length 128, but got an array with length 200 instead.";
        assert_eq!(tool_limit(openai, 200), Some(128));
        let anthropic = "tools: list should have at most 64 items after validation, not 90";
        assert_eq!(tool_limit(anthropic, 90), Some(64));
        let generic = "too many tools in request";
        assert_eq!(tool_limit(generic, 40), Some(39));
        assert_eq!(tool_limit("too many tools", 0), Some(0));
    }

    #[test]
    fn a_stated_number_not_below_the_request_is_not_the_limit() {
        // "max 300 tokens" is no tool limit below a 50-tool request.
        assert_eq!(tool_limit("too many tools: max 300", 50), Some(49));
    }

    #[test]
    fn other_errors_reveal_nothing() {
        for t in [
            "invalid prompt",
            "tool_choice must be auto",
            "the tools field is malformed",
        ] {
            assert_eq!(tool_limit(t, 10), None, "{t}");
        }
    }
}
