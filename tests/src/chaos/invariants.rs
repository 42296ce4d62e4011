//! The invariant checker: pure functions over what a run recorded (client records, upstream
//! arrivals per node, cluster events, end states), each returning violations with enough
//! detail to find the request or event in the logs.

use std::collections::BTreeMap;

use switchyard_shared::wire::{BreakerPhase, WireEvent};

use crate::mock_upstream::Arrival;

use super::load::{Outcome, Record};
use super::observe::Seen;
use super::scenario;

/// An arrival this soon after a state change reached the node was already on its way
/// (dispatched before): the propagation target is 50 ms, the rest is scheduling slack on a
/// loaded machine.
pub const IN_FLIGHT_ALLOWANCE_MS: u64 = 250;

/// A span of wall-clock time, epoch ms, `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from: u64,
    pub to: u64,
}

impl Span {
    pub fn contains(&self, t: u64) -> bool {
        self.from <= t && t < self.to
    }
}

/// Times the checker must know about the faults themselves.
#[derive(Debug, Clone, Default)]
pub struct FaultWindows {
    /// `(node, kill time)`: requests on that node around then may end without an answer.
    pub kills: Vec<(usize, u64)>,
    /// Per node: spans in which it could not hear other nodes (Redis down, partitioned,
    /// resync pending), so only its own state changes bind it.
    pub blind: Vec<(usize, Span)>,
    /// The 503 burst's span, when it ran.
    pub burst: Option<Span>,
    /// When the 402 fault started, if it ran.
    pub terminal_from: Option<u64>,
    /// The reasoning-only fault's spans (one per cycle of the schedule).
    pub reasoning: Vec<Span>,
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Epoch ms it happened at (to place it in a phase).
    pub at: u64,
    pub detail: String,
}

/// Invariant 1: every request ended with a success or a definite, well-formed error within
/// its deadline. A request on a node killed while it ran may end with a transport error or a
/// truncated stream instead. `epoch_of` maps a record's offsets to epoch ms.
pub fn definite_outcomes(
    records: &[Record],
    windows: &FaultWindows,
    epoch_of: impl Fn(std::time::Duration) -> u64,
) -> Vec<Violation> {
    records
        .iter()
        .filter(|r| !r.outcome.is_definite())
        .filter(|r| {
            let (start, end) = (epoch_of(r.start), epoch_of(r.end));
            let killed = windows
                .kills
                .iter()
                .any(|(n, t)| *n == r.node && start <= t + 500 && *t <= end + 500);
            let excusable = matches!(r.outcome, Outcome::Transport(_) | Outcome::TruncatedStream);
            !(killed && excusable)
        })
        .map(|r| Violation {
            at: epoch_of(r.start),
            detail: format!(
                "request {} on node-{} ({}, stream {}): {:?}",
                r.seq, r.node, r.model, r.stream, r.outcome
            ),
        })
        .collect()
}

/// Why a connection must not be used, and since when.
#[derive(Debug, Clone)]
struct Ban {
    connection: String,
    /// `None`: every model.
    model: Option<String>,
    /// From the change's stamp on the node that made it.
    span: Span,
    /// When the change was published (the runner's receipt of the event, which other nodes
    /// get at the same moment): the ban binds other nodes from then.
    published: u64,
    origin_node: String,
    what: &'static str,
}

fn bans(events: &[Seen]) -> Vec<Ban> {
    let mut sorted: Vec<&Seen> = events.iter().collect();
    sorted.sort_by_key(|s| s.envelope.origin_ts_ms);
    let mut out: Vec<Ban> = Vec::new();
    for (i, seen) in sorted.iter().enumerate() {
        let env = &seen.envelope;
        let t = env.origin_ts_ms;
        // A later clear of the same connection ends the ban early.
        let cleared_after = |conn: &str, kinds: fn(&WireEvent, &str) -> bool| -> u64 {
            sorted[i + 1..]
                .iter()
                .find(|s| kinds(&s.envelope.event, conn))
                .map_or(u64::MAX, |s| s.envelope.origin_ts_ms)
        };
        match &env.event {
            WireEvent::CooldownSet {
                connection,
                until_remaining_ms,
                terminal,
                ..
            } => {
                let to = if terminal.is_some() {
                    u64::MAX
                } else {
                    t.saturating_add(*until_remaining_ms)
                };
                let clear = cleared_after(
                    connection,
                    |e, c| matches!(e, WireEvent::CooldownCleared { connection } | WireEvent::CooldownEased { connection, .. } | WireEvent::TerminalReinstated { connection } if connection == c),
                );
                out.push(Ban {
                    connection: connection.clone(),
                    model: None,
                    span: Span {
                        from: t,
                        to: to.min(clear),
                    },
                    published: seen.received_ms.max(t),
                    origin_node: env.origin_node.clone(),
                    what: if terminal.is_some() {
                        "terminal"
                    } else {
                        "cooldown"
                    },
                });
            }
            WireEvent::TerminalSet { connection, .. } => {
                let clear = cleared_after(
                    connection,
                    |e, c| matches!(e, WireEvent::TerminalReinstated { connection } if connection == c),
                );
                out.push(Ban {
                    connection: connection.clone(),
                    model: None,
                    span: Span { from: t, to: clear },
                    published: seen.received_ms.max(t),
                    origin_node: env.origin_node.clone(),
                    what: "terminal",
                });
            }
            WireEvent::LockoutSet {
                connection,
                model,
                remaining_ms,
                ..
            } => {
                out.push(Ban {
                    connection: connection.clone(),
                    model: Some(model.clone()),
                    span: Span {
                        from: t,
                        to: t.saturating_add(*remaining_ms),
                    },
                    published: seen.received_ms.max(t),
                    origin_node: env.origin_node.clone(),
                    what: "lockout",
                });
            }
            WireEvent::BreakerTransition {
                provider,
                to: BreakerPhase::Open,
                retry_after_ms,
                ..
            } => {
                let next = sorted[i + 1..]
                    .iter()
                    .find(|s| matches!(&s.envelope.event, WireEvent::BreakerTransition { provider: p, .. } if p == provider))
                    .map_or(u64::MAX, |s| s.envelope.origin_ts_ms);
                let to = t.saturating_add(*retry_after_ms).min(next);
                for conn in scenario::connections_of(provider) {
                    out.push(Ban {
                        connection: conn.to_owned(),
                        model: None,
                        span: Span { from: t, to },
                        published: seen.received_ms.max(t),
                        origin_node: env.origin_node.clone(),
                        what: "breaker open",
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// How many bans of each kind the events describe (for the report: a check over no bans
/// proves nothing).
pub fn ban_counts(events: &[Seen]) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for b in bans(events) {
        *out.entry(b.what).or_insert(0) += 1;
    }
    out
}

/// Invariant 2: no request reached a connection while it was cooling, terminal, locked for
/// the model, or behind an open breaker, except requests already on their way when the state
/// changed ([`IN_FLIGHT_ALLOWANCE_MS`]). `arrivals[j]` is what node j sent upstream; while node
/// j is blind it is bound only by the changes it made itself.
pub fn no_banned_arrivals(
    arrivals: &[Vec<Arrival>],
    events: &[Seen],
    windows: &FaultWindows,
) -> Vec<Violation> {
    let bans = bans(events);
    let mut out = Vec::new();
    for (node, list) in arrivals.iter().enumerate() {
        let node_id = format!("node-{node}");
        for a in list {
            let Some(conn) = scenario::connection_of_key(&a.api_key) else {
                continue;
            };
            let blind = windows
                .blind
                .iter()
                .any(|(n, s)| *n == node && s.contains(a.epoch_ms));
            let hit = bans.iter().find(|b| {
                let own = b.origin_node == node_id;
                let binds_from = if own { b.span.from } else { b.published };
                b.connection == conn
                    && b.model
                        .as_deref()
                        .is_none_or(|m| m == a.model || m.ends_with(&format!("/{}", a.model)))
                    && binds_from.saturating_add(IN_FLIGHT_ALLOWANCE_MS) <= a.epoch_ms
                    && a.epoch_ms < b.span.to
                    && (!blind || own)
            });
            if let Some(b) = hit {
                out.push(Violation {
                    at: a.epoch_ms,
                    detail: format!(
                        "node-{node} sent a request to {conn} at {} ms, {} ms after a {} set by {} was stamped ({} ms after it was published)",
                        a.epoch_ms,
                        a.epoch_ms.saturating_sub(b.span.from),
                        b.what,
                        b.origin_node,
                        a.epoch_ms.saturating_sub(b.published)
                    ),
                });
            }
        }
    }
    out
}

/// How far a cooldown's end reconstructed from an event may be off. An event carries the
/// change's stamp time and the remaining time the Redis script reported later, so stamp +
/// remaining overstates the end by the writer's queueing and the script's round trip (tens
/// of milliseconds on a loaded node, seen in the soak). The exact extend-only property of the
/// script is tested against Redis itself in `store_state`.
pub const END_TOLERANCE_MS: u64 = 250;

/// Invariant 4a: a cooldown never got shorter. Within one connection, a new cooldown set
/// while an earlier one was still running (and not cleared) must not end sooner, beyond
/// [`END_TOLERANCE_MS`].
pub fn cooldowns_never_shorter(events: &[Seen]) -> Vec<Violation> {
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut sorted: Vec<&Seen> = events.iter().collect();
    sorted.sort_by_key(|s| s.envelope.origin_ts_ms);
    let mut out = Vec::new();
    for s in sorted {
        let t = s.envelope.origin_ts_ms;
        match &s.envelope.event {
            WireEvent::CooldownSet {
                connection,
                until_remaining_ms,
                ..
            } => {
                let until = t.saturating_add(*until_remaining_ms);
                if let Some(prev) = last.get(connection)
                    && *prev > t
                    && until + END_TOLERANCE_MS < *prev
                {
                    out.push(Violation {
                        at: t,
                        detail: format!(
                            "{connection}: a cooldown until {until} replaced one until {prev} (set by {})",
                            s.envelope.origin_node
                        ),
                    });
                }
                let e = last.entry(connection.clone()).or_insert(0);
                *e = (*e).max(until);
            }
            WireEvent::CooldownCleared { connection }
            | WireEvent::CooldownEased { connection, .. }
            | WireEvent::TerminalReinstated { connection } => {
                last.remove(connection);
            }
            _ => {}
        }
    }
    out
}

/// Invariant 4b: the provider breaker opened during the 503 burst (in time for its
/// failures to count: within the burst or 2 s after it).
pub fn breaker_opened(events: &[Seen], provider: &str, burst: Span) -> bool {
    events.iter().any(|s| {
        matches!(&s.envelope.event, WireEvent::BreakerTransition { provider: p, to: BreakerPhase::Open, .. } if p == provider)
            && s.envelope.origin_ts_ms >= burst.from
            && s.envelope.origin_ts_ms < burst.to + 2_000
    })
}

/// Whether connection `conn` was made terminal (by a terminal set or a terminal cooldown).
pub fn made_terminal(events: &[Seen], conn: &str) -> bool {
    events.iter().any(|s| match &s.envelope.event {
        WireEvent::TerminalSet { connection, .. } => connection == conn,
        WireEvent::CooldownSet {
            connection,
            terminal: Some(_),
            ..
        } => connection == conn,
        _ => false,
    })
}

/// Whether a terminal state was lifted (nobody reinstates during a run).
pub fn reinstated(events: &[Seen]) -> Vec<String> {
    events
        .iter()
        .filter_map(|s| match &s.envelope.event {
            WireEvent::TerminalReinstated { connection } => Some(connection.clone()),
            _ => None,
        })
        .collect()
}

/// Secret values found in `outputs` (logs, metrics, health bodies): `(secret name, where)`.
pub fn leaked_secrets(
    secrets: &[(&str, &str)],
    outputs: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, value) in secrets {
        for (place, text) in outputs {
            if text.contains(value) {
                out.push(((*name).to_owned(), place.clone()));
            }
        }
    }
    out
}

/// The p99 of `values` (nearest rank); 0 when empty.
pub fn p99(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64) * 0.99).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use switchyard_shared::outcome::{FailureReason, TerminalStatus};
    use switchyard_shared::wire::Envelope;

    use super::*;

    fn seen(origin: &str, ts: u64, event: WireEvent) -> Seen {
        Seen {
            received_ms: ts + 1,
            envelope: Envelope {
                origin_node: origin.to_owned(),
                origin_ts_ms: ts,
                seq: 0,
                event,
            },
        }
    }

    fn cooldown(conn: &str, remaining: u64) -> WireEvent {
        WireEvent::CooldownSet {
            connection: conn.to_owned(),
            until_remaining_ms: remaining,
            backoff_level: 1,
            reason: FailureReason::RateLimitExceeded,
            terminal: None,
        }
    }

    fn arrival(key_of: &str, t: u64) -> Arrival {
        Arrival {
            epoch_ms: t,
            route: "chat_completions".to_owned(),
            api_key: scenario::key_of(key_of).unwrap_or_default().to_owned(),
            model: "m".to_owned(),
        }
    }

    #[test]
    fn arrivals_inside_a_cooldown_are_caught_and_in_flight_ones_forgiven() {
        let events = vec![seen("node-0", 10_000, cooldown("a0", 2_000))];
        let arrivals = vec![
            vec![arrival("a0", 10_100), arrival("a0", 12_500)],
            vec![arrival("a0", 11_000), arrival("a1", 11_000)],
        ];
        let v = no_banned_arrivals(&arrivals, &events, &FaultWindows::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("node-1") && v[0].detail.contains("cooldown"));
        // node-1 blind at the time: another node's cooldown does not bind it.
        let windows = FaultWindows {
            blind: vec![(
                1,
                Span {
                    from: 10_500,
                    to: 11_500,
                },
            )],
            ..FaultWindows::default()
        };
        assert!(no_banned_arrivals(&arrivals, &events, &windows).is_empty());
        // A clear ends the ban.
        let cleared = vec![
            seen("node-0", 10_000, cooldown("a0", 2_000)),
            seen(
                "node-2",
                10_500,
                WireEvent::CooldownCleared {
                    connection: "a0".to_owned(),
                },
            ),
        ];
        assert!(no_banned_arrivals(&arrivals, &cleared, &FaultWindows::default()).is_empty());
        // Published late: other nodes are bound from the publication, the origin at once.
        let mut late = seen("node-0", 10_000, cooldown("a0", 2_000));
        late.received_ms = 10_900;
        let arrivals = vec![vec![arrival("a0", 11_000)], vec![arrival("a0", 11_000)]];
        let v = no_banned_arrivals(&arrivals, &[late], &FaultWindows::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.starts_with("node-0"), "{v:?}");
    }

    #[test]
    fn an_open_breaker_bans_every_connection_of_its_provider_until_it_moves() {
        let open = WireEvent::BreakerTransition {
            provider: "pb".to_owned(),
            from: BreakerPhase::Closed,
            to: BreakerPhase::Open,
            generation: 1,
            retry_after_ms: 2_000,
        };
        let half = WireEvent::BreakerTransition {
            provider: "pb".to_owned(),
            from: BreakerPhase::Open,
            to: BreakerPhase::HalfOpen,
            generation: 2,
            retry_after_ms: 0,
        };
        let events = vec![seen("node-0", 1_000, open), seen("node-1", 2_000, half)];
        let arrivals = vec![vec![
            arrival("b2", 1_500),
            arrival("b0", 2_100),
            arrival("a0", 1_500),
        ]];
        let v = no_banned_arrivals(&arrivals, &events, &FaultWindows::default());
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("b2") && v[0].detail.contains("breaker"));
        assert!(breaker_opened(&events, "pb", Span { from: 0, to: 1_000 }));
        assert!(!breaker_opened(&events, "pa", Span { from: 0, to: 1_000 }));
    }

    #[test]
    fn shorter_cooldowns_and_reinstatements_are_reported() {
        let events = vec![
            seen("node-0", 1_000, cooldown("a0", 5_000)),
            seen("node-1", 2_000, cooldown("a0", 1_000)),
            seen("node-2", 2_100, cooldown("a0", 3_800)),
            seen("node-1", 7_000, cooldown("a0", 1_000)),
        ];
        let v = cooldowns_never_shorter(&events);
        assert_eq!(v.len(), 1, "{v:?}");
        let term = WireEvent::CooldownSet {
            connection: "c1".to_owned(),
            until_remaining_ms: 1_000,
            backoff_level: 1,
            reason: FailureReason::QuotaExhausted,
            terminal: Some(TerminalStatus::CreditsExhausted),
        };
        let events = vec![seen("node-0", 1_000, term)];
        assert!(made_terminal(&events, "c1"));
        assert!(!made_terminal(&events, "c0"));
        assert!(reinstated(&events).is_empty());
        let late = vec![arrival("c1", 9_000_000)];
        assert_eq!(
            no_banned_arrivals(&[late], &events, &FaultWindows::default()).len(),
            1
        );
    }

    #[test]
    fn outcomes_other_than_answers_are_violations_unless_their_node_was_killed() {
        let rec = |node, outcome| Record {
            seq: 1,
            node,
            model: "pa/m",
            stream: true,
            start: Duration::from_millis(100),
            end: Duration::from_millis(900),
            outcome,
            connection: None,
            tokens: 0,
        };
        let records = vec![
            rec(1, Outcome::TruncatedStream),
            rec(0, Outcome::TruncatedStream),
            rec(1, Outcome::EmptyOk),
            rec(2, Outcome::Success),
        ];
        let windows = FaultWindows {
            kills: vec![(1, 500)],
            ..FaultWindows::default()
        };
        let v = definite_outcomes(&records, &windows, |d| d.as_millis() as u64);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0].detail.contains("node-0"));
        assert!(v[1].detail.contains("EmptyOk"));
    }

    #[test]
    fn secrets_and_percentiles() {
        let outputs = vec![("node-0 log".to_owned(), "key sk-1 leaked".to_owned())];
        assert_eq!(
            leaked_secrets(&[("k", "sk-1"), ("j", "sk-2")], &outputs).len(),
            1
        );
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(p99(&mut v), 99.0);
        assert_eq!(p99(&mut []), 0.0);
    }
}
