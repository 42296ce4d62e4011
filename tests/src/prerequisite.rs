//! One rule for tests whose tool is missing: under CI they fail, elsewhere they skip loudly.
//!
//! Some tests drive a tool the suite does not build (the coding agents from npm, `promtool`,
//! `cargo` itself). A test that printed a line and passed when its tool was missing let a CI
//! machine whose `npm ci` had failed go green. Now a missing prerequisite fails the test when
//! `SWITCHYARD_REQUIRE_PREREQS=1` (which `.ci/run` sets) or `CI=true` (what hosted CI sets);
//! on a developer machine the test still skips, with a banner on stderr that names the
//! install command. `SWITCHYARD_REQUIRE_PREREQS=0` turns the requirement off even under CI.
//! The one exception is a Docker engine, which neither `tests/run.sh` nor CI provides: the
//! image build test skips with the same banner everywhere ([`optional`]).

/// The variable that makes a missing prerequisite fail its test.
pub const REQUIRE_VAR: &str = "SWITCHYARD_REQUIRE_PREREQS";

/// Whether a missing prerequisite fails the test, from the values of [`REQUIRE_VAR`] and `CI`:
/// the explicit variable decides when set, else `CI`.
pub fn enforced(require: Option<&str>, ci: Option<&str>) -> bool {
    let truthy = |v: &str| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes");
    match require.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => truthy(v),
        None => ci.is_some_and(truthy),
    }
}

/// What becomes of a test whose prerequisite is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It fails ([`enforced`]).
    Fail,
    /// It skips, loudly.
    Skip,
    /// It skips everywhere: the prerequisite is one CI does not promise (see [`optional`]).
    SkipOptional,
}

/// The text of the failure or of the skip banner.
pub fn notice(test: &str, missing: &str, install: &str, outcome: Outcome) -> String {
    let rule = "=".repeat(78);
    let (head, tail) = match outcome {
        Outcome::Fail => (
            format!("FAILED {test}: a prerequisite is missing ({REQUIRE_VAR}=1 or CI=true)"),
            String::new(),
        ),
        Outcome::Skip => (
            format!("SKIPPED {test}: it did NOT run, a prerequisite is missing"),
            format!("\n  (under CI, or with {REQUIRE_VAR}=1, this is a failure)"),
        ),
        Outcome::SkipOptional => (
            format!("SKIPPED {test}: it did NOT run, an optional prerequisite is missing"),
            "\n  (CI machines are not promised this one; it skips there too)".to_owned(),
        ),
    };
    format!("\n{rule}\n{head}\n  missing: {missing}\n  install: {install}{tail}\n{rule}\n")
}

/// Whether `test` can run: `true` when nothing is `missing`. When something is, the test
/// fails (panics) under [`enforced`] rules, and otherwise prints a `SKIPPED` banner to stderr
/// and returns `false`, so the caller returns. `install` is the command that provides it.
pub fn require(test: &str, missing: Option<&str>, install: &str) -> bool {
    let Some(missing) = missing else {
        return true;
    };
    let enforced = enforced(
        std::env::var(REQUIRE_VAR).ok().as_deref(),
        std::env::var("CI").ok().as_deref(),
    );
    if enforced {
        fail(&notice(test, missing, install, Outcome::Fail));
    }
    eprintln!("{}", notice(test, missing, install, Outcome::Skip));
    false
}

/// [`require`] for the one kind of prerequisite neither `tests/run.sh` nor CI provides (a
/// Docker engine): a missing one never fails the test, but the banner is the same.
pub fn optional(test: &str, missing: Option<&str>, install: &str) -> bool {
    let Some(missing) = missing else {
        return true;
    };
    eprintln!("{}", notice(test, missing, install, Outcome::SkipOptional));
    false
}

/// Failing the calling test is what a missing prerequisite does under CI.
#[allow(clippy::panic)]
fn fail(text: &str) -> ! {
    panic!("{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_decides_then_ci() {
        assert!(!enforced(None, None));
        assert!(enforced(Some("1"), None));
        assert!(enforced(None, Some("true")));
        assert!(enforced(None, Some("1")));
        assert!(!enforced(None, Some("false")));
        assert!(
            !enforced(Some("0"), Some("true")),
            "an explicit 0 wins over CI"
        );
        assert!(
            enforced(Some(" "), Some("true")),
            "an empty variable is unset"
        );
    }

    #[test]
    fn the_notice_names_the_test_and_the_install() {
        let install = "apt-get install nodejs npm";
        let fail = notice("t", "`node`", install, Outcome::Fail);
        assert!(fail.contains("FAILED t") && fail.contains("install: apt-get install nodejs npm"));
        let skip = notice("t", "`node`", install, Outcome::Skip);
        assert!(skip.contains("SKIPPED t") && skip.contains("missing: `node`"));
        assert!(skip.contains(REQUIRE_VAR), "{skip}");
        let optional = notice("t", "a Docker engine", "docs", Outcome::SkipOptional);
        assert!(optional.contains("SKIPPED t") && optional.contains("optional"));
    }

    #[test]
    fn present_prerequisites_run() {
        assert!(require("t", None, "nothing"));
        assert!(optional("t", None, "nothing"));
        assert!(!optional("t", Some("a Docker engine"), "docs"));
    }
}
