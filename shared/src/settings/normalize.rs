//! Rules that relate two settings (a maximum below its minimum, a degradation band above the
//! open threshold). They are applied to the merged result, because each value may come from a
//! different layer, and they clamp with a warning: the resilience specification says a bad
//! combination is corrected and logged, never a reason to refuse the file.

use super::{BreakerProfileEffective, FieldError, ResilienceEffective, Sourced, layer::join};

/// Applies every cross-field rule, pushing one warning per correction.
pub(super) fn cross_field(settings: &mut ResilienceEffective, warnings: &mut Vec<FieldError>) {
    let breakers = &mut settings.provider_breaker;
    for (name, profile) in [
        ("oauth", &mut breakers.oauth),
        ("apikey", &mut breakers.apikey),
        ("local", &mut breakers.local),
    ] {
        degradation(profile, &format!("provider_breaker.{name}"), warnings);
    }

    let cooldown = &mut settings.provider_cooldown;
    at_least(
        &mut cooldown.max_retry_cooldown_ms,
        cooldown.min_retry_cooldown_ms.value,
        "provider_cooldown.max_retry_cooldown_ms",
        "min_retry_cooldown_ms",
        warnings,
    );

    let lockout = &mut settings.model_lockout;
    at_least(
        &mut lockout.max_cooldown_ms,
        lockout.base_cooldown_ms.value,
        "model_lockout.max_cooldown_ms",
        "base_cooldown_ms",
        warnings,
    );

    let wait = &mut settings.wait_for_cooldown;
    at_least(
        &mut wait.budget_ms,
        wait.max_retry_wait_ms.value,
        "wait_for_cooldown.budget_ms",
        "max_retry_wait_ms",
        warnings,
    );

    let combo = &mut settings.combo_cooldown_wait;
    at_least(
        &mut combo.budget_ms,
        combo.max_wait_ms.value,
        "combo_cooldown_wait.budget_ms",
        "max_wait_ms",
        warnings,
    );
}

/// `degradation_threshold ≤ failure_threshold − 1`; 0 (derived) is always acceptable.
fn degradation(profile: &mut BreakerProfileEffective, path: &str, warnings: &mut Vec<FieldError>) {
    let limit = profile.failure_threshold.value.saturating_sub(1);
    let degradation = &mut profile.degradation_threshold;
    if degradation.value > limit {
        warnings.push(FieldError::new(
            join(path, "degradation_threshold"),
            format!(
                "{} must be at most failure_threshold - 1 = {limit} (clamped to {limit})",
                degradation.value
            ),
        ));
        degradation.value = limit;
    }
}

/// Raises `value` to `floor` (named `floor_name`) when it is below it.
fn at_least(
    value: &mut Sourced<u64>,
    floor: u64,
    path: &str,
    floor_name: &str,
    warnings: &mut Vec<FieldError>,
) {
    if value.value < floor {
        warnings.push(FieldError::new(
            path,
            format!(
                "{} is below {floor_name} = {floor} (raised to {floor})",
                value.value
            ),
        ));
        value.value = floor;
    }
}
