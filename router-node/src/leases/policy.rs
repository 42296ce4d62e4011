//! The pure rules of leases: formats, the owner's lease, the acquire plan, `Retry-After`, and
//! when and where a lease moves off an ineligible connection.
//!
//! Everything here takes its inputs (live leases, candidate connections, times) as values, so
//! the decisions are tested without a store or a clock.

use switchyard_shared::Millis;
use switchyard_store::leases::OWNER_PREFIX_LEN;
use switchyard_store::{LeaseInfo, owner_hash};

/// The owner token's fixed body length after `vlo_` (32 random bytes in unpadded base64url).
const TOKEN_BODY_LEN: usize = 43;
/// The largest generation a JSON client can carry exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `^vlo_[A-Za-z0-9_-]{43}$`.
pub fn valid_owner_token(token: &str) -> bool {
    token.strip_prefix("vlo_").is_some_and(|body| {
        body.len() == TOKEN_BODY_LEN
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// A positive safe integer written as `^[1-9]\d*$`.
pub fn parse_generation(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.starts_with('0') || text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>()
        .ok()
        .filter(|g| (1..=MAX_SAFE_INTEGER).contains(g))
}

/// The owner's lease among `live`, matched on the stored hash prefix. The prefix only finds
/// the candidate; every operation on it checks the full hash in the store.
pub fn find_owned<'a>(live: &'a [LeaseInfo], owner_token: &str) -> Option<&'a LeaseInfo> {
    let hash = owner_hash(owner_token);
    let prefix = hash.get(..OWNER_PREFIX_LEN).unwrap_or(&hash);
    live.iter().find(|l| l.owner_hash_prefix == prefix)
}

/// `Retry-After` seconds for lease contention: the earliest foreign expiry, 1–3600 s.
pub fn capacity_retry_after_secs(ms: Millis) -> u64 {
    ms.div_ceil(1000).clamp(1, 3600)
}

/// One connection a lease could go to, in preference order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub connection: String,
    /// False when cooling, locked out for the model or terminal.
    pub eligible: bool,
}

/// What an acquire should do, decided before any write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquirePlan {
    /// The owner already holds a lease with this key: re-acquire it (keeps the generation).
    Reuse { connection: String },
    /// The owner holds a lease through another API key.
    OwnerUnderOtherKey,
    /// No connection of the key serves the model.
    NoCandidates,
    /// Candidates exist but none is eligible now (cooling, locked out, terminal).
    NoneEligible,
    /// Try these free eligible connections in order. `foreign_min_ms` is the earliest expiry
    /// of a foreign lease on an eligible connection, for the capacity answer if all fail.
    Try {
        free: Vec<String>,
        eligible: usize,
        foreign_min_ms: Option<Millis>,
    },
}

/// Plans an acquire from the live leases of the managed connections.
pub fn plan_acquire(
    candidates: &[Candidate],
    live: &[LeaseInfo],
    owner_token: &str,
    api_key_id: &str,
) -> AcquirePlan {
    if let Some(own) = find_owned(live, owner_token) {
        return if own.api_key_id == api_key_id {
            AcquirePlan::Reuse {
                connection: own.name.clone(),
            }
        } else {
            AcquirePlan::OwnerUnderOtherKey
        };
    }
    if candidates.is_empty() {
        return AcquirePlan::NoCandidates;
    }
    let eligible: Vec<&Candidate> = candidates.iter().filter(|c| c.eligible).collect();
    if eligible.is_empty() {
        return AcquirePlan::NoneEligible;
    }
    let mut free = Vec::new();
    let mut foreign_min_ms: Option<Millis> = None;
    for c in &eligible {
        match live.iter().find(|l| l.name == c.connection) {
            Some(l) => {
                foreign_min_ms =
                    Some(foreign_min_ms.map_or(l.remaining_ms, |m| m.min(l.remaining_ms)));
            }
            None => free.push(c.connection.clone()),
        }
    }
    AcquirePlan::Try {
        free,
        eligible: eligible.len(),
        foreign_min_ms,
    }
}

/// What routing knows about the leased connection when it cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeatView {
    /// Terminal (revoked, banned, expired credentials).
    pub terminal: bool,
    /// When its connection cooldown ends (0 or past = not cooling).
    pub cooling_until: Millis,
    /// When the lockout of the request's model on it ends, if there is one.
    pub locked_until: Option<Millis>,
    /// The quota preflight cut it off.
    pub quota_cut: bool,
    /// It failed in this request (a 429, a 5xx…), so this request will not use it again.
    pub failed_in_request: bool,
}

/// Why a lease moves off its connection (the `reason` label of `switchyard_lease_moves_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveReason {
    Terminal,
    Failed,
    Cooldown,
    Lockout,
    QuotaCutoff,
}

impl MoveReason {
    pub fn label(self) -> &'static str {
        match self {
            Self::Terminal => "terminal",
            Self::Failed => "failed",
            Self::Cooldown => "cooldown",
            Self::Lockout => "lockout",
            Self::QuotaCutoff => "quota_cutoff",
        }
    }
}

/// Whether the leased connection is ineligible at `now`, and why (the most lasting cause
/// first). `None`: it is usable, and the lease stays (a full gate is not a reason to move).
pub fn move_reason(seat: &SeatView, now: Millis) -> Option<MoveReason> {
    if seat.terminal {
        Some(MoveReason::Terminal)
    } else if seat.failed_in_request {
        Some(MoveReason::Failed)
    } else if seat.cooling_until > now {
        Some(MoveReason::Cooldown)
    } else if seat.locked_until.is_some_and(|until| until > now) {
        Some(MoveReason::Lockout)
    } else if seat.quota_cut {
        Some(MoveReason::QuotaCutoff)
    } else {
        None
    }
}

/// Where a lease may move: the eligible connections (in routing order) other than its own
/// that no live lease holds. The store re-checks that each is still free when moving.
pub fn move_targets(current: &str, eligible: &[String], live: &[LeaseInfo]) -> Vec<String> {
    eligible
        .iter()
        .filter(|c| c.as_str() != current)
        .filter(|c| !live.iter().any(|l| &l.name == *c))
        .cloned()
        .collect()
}

/// RFC 3339 UTC time (millisecond precision) of a Unix time in ms, for the lease bodies.
pub fn rfc3339(epoch_ms: u64) -> String {
    let secs = epoch_ms / 1000;
    let ms = epoch_ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) date (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "vlo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

    fn info(name: &str, token: &str, key: &str, remaining_ms: Millis) -> LeaseInfo {
        LeaseInfo {
            name: name.into(),
            owner_hash_prefix: owner_hash(token)[..OWNER_PREFIX_LEN].to_owned(),
            api_key_id: key.into(),
            generation: 1,
            remaining_ms,
        }
    }

    fn cand(c: &str, eligible: bool) -> Candidate {
        Candidate {
            connection: c.into(),
            eligible,
        }
    }

    #[test]
    fn token_and_generation_formats() {
        assert!(valid_owner_token(TOKEN));
        assert!(!valid_owner_token("vlo_short"));
        assert!(!valid_owner_token(&TOKEN.replace("vlo_", "vlx_")));
        assert!(!valid_owner_token(&format!(
            "{}=",
            &TOKEN[..TOKEN.len() - 1]
        )));
        assert_eq!(parse_generation("1"), Some(1));
        assert_eq!(parse_generation("42"), Some(42));
        assert_eq!(parse_generation("0"), None);
        assert_eq!(parse_generation("01"), None);
        assert_eq!(parse_generation("-1"), None);
        assert_eq!(parse_generation("9007199254740992"), None);
        assert_eq!(parse_generation(""), None);
    }

    #[test]
    fn plans() {
        let other = "vlo_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
        let live = vec![info("c1", other, "k", 5_000)];
        assert_eq!(
            plan_acquire(&[cand("c1", true), cand("c2", true)], &live, TOKEN, "k"),
            AcquirePlan::Try {
                free: vec!["c2".into()],
                eligible: 2,
                foreign_min_ms: Some(5_000)
            }
        );
        assert_eq!(
            plan_acquire(&[cand("c1", true)], &live, other, "k"),
            AcquirePlan::Reuse {
                connection: "c1".into()
            }
        );
        assert_eq!(
            plan_acquire(&[cand("c1", true)], &live, other, "k2"),
            AcquirePlan::OwnerUnderOtherKey
        );
        assert_eq!(
            plan_acquire(&[], &[], TOKEN, "k"),
            AcquirePlan::NoCandidates
        );
        assert_eq!(
            plan_acquire(&[cand("c1", false)], &[], TOKEN, "k"),
            AcquirePlan::NoneEligible
        );
    }

    #[test]
    fn a_lease_moves_only_off_an_ineligible_connection() {
        let now = 1_000;
        let usable = SeatView::default();
        assert_eq!(move_reason(&usable, now), None);
        // Expired causes are no reason.
        let expired = SeatView {
            cooling_until: now,
            locked_until: Some(now - 1),
            ..usable
        };
        assert_eq!(move_reason(&expired, now), None);
        let cooling = SeatView {
            cooling_until: now + 1,
            ..usable
        };
        assert_eq!(move_reason(&cooling, now), Some(MoveReason::Cooldown));
        let locked = SeatView {
            locked_until: Some(now + 5),
            ..usable
        };
        assert_eq!(move_reason(&locked, now), Some(MoveReason::Lockout));
        let failed = SeatView {
            failed_in_request: true,
            ..cooling
        };
        assert_eq!(move_reason(&failed, now), Some(MoveReason::Failed));
        let terminal = SeatView {
            terminal: true,
            ..failed
        };
        assert_eq!(
            move_reason(&terminal, now).map(MoveReason::label),
            Some("terminal")
        );
        let cut = SeatView {
            quota_cut: true,
            ..usable
        };
        assert_eq!(move_reason(&cut, now), Some(MoveReason::QuotaCutoff));
    }

    #[test]
    fn move_targets_skip_the_own_and_held_connections() {
        let other = "vlo_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
        let live = vec![info("c1", TOKEN, "k", 5_000), info("c2", other, "k", 5_000)];
        let eligible: Vec<String> = ["c1", "c2", "c3", "c4"].map(String::from).to_vec();
        assert_eq!(move_targets("c1", &eligible, &live), vec!["c3", "c4"]);
        assert!(move_targets("c1", &eligible[..2], &live).is_empty());
    }

    #[test]
    fn retry_after_is_clamped_and_dates_format() {
        assert_eq!(capacity_retry_after_secs(0), 1);
        assert_eq!(capacity_retry_after_secs(1_500), 2);
        assert_eq!(capacity_retry_after_secs(10_000_000), 3600);
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_764_374_400_123), "2025-11-29T00:00:00.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
