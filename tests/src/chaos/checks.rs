//! The global checks of a run, built from the pure invariants and what was read at the end:
//! each returns a named [`Check`] whose detail says what was compared, so a pass over nothing
//! is visible as such.

use std::time::Duration;

use super::invariants::{self, FaultWindows, Violation};
use super::leases;
use super::load::{Outcome, Record};
use super::observe::{self, NodeEnd};
use super::report::Check;
use super::scenario;
use super::topology::{NODES, Topology};
use crate::cluster::MGMT_KEY;
use crate::mock_upstream::Arrival;

pub(super) fn check_list(name: &str, violations: &[Violation]) -> Check {
    let detail = if violations.is_empty() {
        "none".to_owned()
    } else {
        let first: Vec<&str> = violations
            .iter()
            .take(3)
            .map(|v| v.detail.as_str())
            .collect();
        format!(
            "{} violations, first: {}",
            violations.len(),
            first.join("; ")
        )
    };
    Check {
        name: name.to_owned(),
        passed: violations.is_empty(),
        detail,
    }
}

pub(super) fn lease_check(
    ops: &[leases::LeaseOp],
    windows: &FaultWindows,
    epoch_of: &impl Fn(Duration) -> u64,
) -> Check {
    let killed = |node: usize, start: Duration, end: Duration| {
        let (s, e) = (epoch_of(start), epoch_of(end));
        windows
            .kills
            .iter()
            .any(|(n, t)| *n == node && s <= t + 500 && *t <= e + 500)
    };
    let (violations, compared) = leases::check(ops, killed);
    let count = |kind: &str, status: u16| {
        ops.iter()
            .filter(|o| o.kind == kind && o.status == status)
            .count()
    };
    let stale = ops.iter().filter(|o| o.code == "LEASE_FENCE_STALE").count();
    let unavailable = ops
        .iter()
        .filter(|o| o.code == "LEASE_SERVICE_UNAVAILABLE")
        .count();
    let served = count("chat", 200);
    let mut detail = format!(
        "{} operations: {} grants, {served} leased requests served, {stale} refused as stale, {unavailable} refused while Redis was unreachable, {compared} ordering checks",
        ops.len(),
        count("acquire", 200),
    );
    if !violations.is_empty() {
        detail = format!(
            "{} violations, first: {}; {detail}",
            violations.len(),
            violations
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Check {
        name: "leases: one owner per generation, nothing served under a superseded generation"
            .to_owned(),
        passed: violations.is_empty() && served > 0 && compared > 0,
        detail,
    }
}

/// The cluster-wide caps held: the sampled upstream concurrency of each capped connection.
pub(super) fn caps_check(samples: &[super::caps::CapSample]) -> Check {
    let caps: Vec<(&str, u64)> = scenario::CAPPED
        .iter()
        .map(|c| (*c, scenario::CAP))
        .collect();
    let (violations, peaks) = super::caps::caps_held(samples, &caps);
    let mut c = check_list(
        "max_concurrent never exceeded across the nodes (upstream in flight, sampled every 100 ms)",
        &violations,
    );
    c.detail = format!(
        "{}; {} samples, peak in flight {peaks:?} (cap {})",
        c.detail,
        samples.len(),
        scenario::CAP
    );
    c.passed &= !samples.is_empty();
    c
}

pub(super) fn drained(ends: &[NodeEnd], mock_in_flight: u64) -> Check {
    let busy: Vec<String> = ends
        .iter()
        .filter(|e| e.in_flight != 0.0 || e.semaphore_in_flight != 0.0 || e.permits_held != 0.0)
        .map(|e| {
            format!(
                "node-{}: in flight {}, semaphore {}, cluster permits {}",
                e.node, e.in_flight, e.semaphore_in_flight, e.permits_held
            )
        })
        .collect();
    Check {
        name: "in-flight gauges, semaphore permits and cluster permits returned to zero".to_owned(),
        passed: busy.is_empty() && mock_in_flight == 0 && ends.len() == NODES,
        detail: if busy.is_empty() {
            format!(
                "{} nodes read, upstream in flight {mock_in_flight}",
                ends.len()
            )
        } else {
            busy.join("; ")
        },
    }
}

pub(super) fn banned_check(
    violations: &[Violation],
    seen: &[observe::Seen],
    arrivals: &[Vec<Arrival>],
) -> Check {
    let mut c = check_list(
        "no request reached a cooling, terminal, locked or breaker-open connection",
        violations,
    );
    let bans = invariants::ban_counts(seen);
    let checked: usize = arrivals.iter().map(Vec::len).sum();
    c.detail = format!(
        "{}; {checked} upstream requests checked against {bans:?}",
        c.detail
    );
    c
}

/// Usage is counted once per request: on every node that ran the whole time, the request
/// counter equals the responses its clients got, and the token counter is at least the tokens
/// in the answers they got. Tokens are counted per upstream usage object, and in this
/// scenario only a reasoning-only answer that the node then failed over (a combo moving on)
/// is billed by the upstream without reaching the client, so the excess may not pass that
/// many answers of the largest size seen. Every other failed attempt ends before its usage
/// frame.
pub(super) fn usage_once(
    ends: &[NodeEnd],
    records: &[Record],
    lease_ops: &[leases::LeaseOp],
    windows: &FaultWindows,
    arrivals: &[Vec<Arrival>],
) -> Check {
    let largest = records.iter().map(|r| r.tokens).max().unwrap_or(0);
    let reasoning_key = scenario::key_of("b2").unwrap_or_default();
    let mut problems = Vec::new();
    let mut compared = Vec::new();
    for e in ends
        .iter()
        .filter(|e| !windows.kills.iter().any(|(n, _)| *n == e.node))
    {
        let mine = records.iter().filter(|r| r.node == e.node);
        let responses = mine
            .clone()
            .filter(|r| !matches!(r.outcome, Outcome::Transport(_) | Outcome::Timeout))
            .count() as f64;
        let tokens: u64 = mine.map(|r| r.tokens).sum();
        // Leased requests are client requests too (lease operations are not counted).
        let leased = lease_ops
            .iter()
            .filter(|o| o.node == e.node && o.kind == "chat" && o.status != 0);
        let responses = responses + leased.clone().count() as f64;
        let tokens = tokens + leased.map(|o| o.tokens).sum::<u64>();
        let reasoning_answers: u64 = windows
            .reasoning
            .iter()
            .map(|span| {
                arrivals.get(e.node).map_or(0, |list| {
                    list.iter()
                        .filter(|a| a.api_key == reasoning_key && span.contains(a.epoch_ms))
                        .count() as u64
                })
            })
            .sum();
        let excess = e.tokens_total - tokens as f64;
        compared.push(format!(
            "node-{}: {} requests counted / {} responses; {} tokens counted / {} seen by clients (excess {excess}, bound {reasoning_answers} reasoning-only answers × {largest})",
            e.node, e.requests_total, responses, e.tokens_total, tokens
        ));
        if e.requests_total != responses
            || excess < 0.0
            || excess > (reasoning_answers * largest) as f64
        {
            problems.push(compared.last().cloned().unwrap_or_default());
        }
    }
    Check {
        name: "usage counted once per request".to_owned(),
        passed: problems.is_empty() && !compared.is_empty(),
        detail: if problems.is_empty() {
            compared.join("; ")
        } else {
            problems.join("; ")
        },
    }
}

pub(super) fn breaker_checks(
    seen: &[observe::Seen],
    ends: &[NodeEnd],
    windows: &FaultWindows,
) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(burst) = windows.burst {
        out.push(Check {
            name: "the pb breaker opened during the 503 burst".to_owned(),
            passed: invariants::breaker_opened(seen, "pb", burst),
            detail: format!(
                "{} breaker transitions seen",
                seen.iter()
                    .filter(|s| s.envelope.event.kind() == "breaker_transition")
                    .count()
            ),
        });
    }
    let open: Vec<String> = ends
        .iter()
        .flat_map(|e| {
            e.breakers
                .iter()
                .filter(|(_, v)| *v != 0.0)
                .map(move |(p, v)| format!("node-{} {p}={v}", e.node))
        })
        .collect();
    out.push(Check {
        name: "every breaker closed again after the faults stopped".to_owned(),
        passed: open.is_empty(),
        detail: if open.is_empty() {
            "all closed on every node".to_owned()
        } else {
            open.join(", ")
        },
    });
    out
}

pub(super) fn terminal_checks(
    seen: &[observe::Seen],
    ends: &[NodeEnd],
    windows: &FaultWindows,
) -> Vec<Check> {
    let mut out = Vec::new();
    let reinstated = invariants::reinstated(seen);
    out.push(Check {
        name: "no terminal state was lifted".to_owned(),
        passed: reinstated.is_empty(),
        detail: if reinstated.is_empty() {
            "none".to_owned()
        } else {
            reinstated.join(", ")
        },
    });
    if windows.terminal_from.is_some() {
        let everywhere = ends.iter().all(|e| e.terminal.iter().any(|c| c == "c1"));
        out.push(Check {
            name: "c1 became terminal (402) and stayed terminal on every node".to_owned(),
            passed: invariants::made_terminal(seen, "c1") && everywhere,
            detail: ends
                .iter()
                .map(|e| format!("node-{}: {:?}", e.node, e.terminal))
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    out
}

/// No configured secret appears in any log, metrics page or health body.
/// Every secret of the scenario: upstream keys, client keys, the management key and the
/// lease owner tokens.
fn secrets() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = scenario::CONNECTIONS
        .iter()
        .map(|(c, _, k)| (format!("{c} upstream key"), (*k).to_owned()))
        .collect();
    out.push(("client key".to_owned(), scenario::CLIENT_KEY.to_owned()));
    out.push(("lease client key".to_owned(), leases::AGENT_KEY.to_owned()));
    out.push(("management key".to_owned(), MGMT_KEY.to_owned()));
    for i in 0..leases::OWNERS {
        out.push((format!("lease owner token {i}"), leases::owner_token(i)));
    }
    out
}

/// Upstream requests carry no secret but the connection's own key (in its auth header): the
/// mocks' recent headers and bodies are scanned.
pub(super) fn upstream_secrets_check(topo: &Topology) -> Check {
    let secrets = secrets();
    let mut leaks = Vec::new();
    let mut scanned = 0usize;
    for (node, mock) in topo.mocks.iter().enumerate() {
        let stats = mock.stats();
        for (key, sets) in &stats.recent_headers {
            for (name, value) in sets.iter().flatten() {
                scanned += 1;
                for (what, secret) in &secrets {
                    if secret != key && value.contains(secret.as_str()) {
                        leaks.push(format!(
                            "node-{node}: upstream header {name} carried the {what}"
                        ));
                    }
                }
            }
        }
        for body in &stats.recent_bodies {
            scanned += 1;
            for (what, secret) in &secrets {
                if body.body.contains(secret.as_str()) {
                    leaks.push(format!("node-{node}: an upstream body carried the {what}"));
                }
            }
        }
    }
    Check {
        name: "upstream requests carry no secret but their own key".to_owned(),
        passed: leaks.is_empty() && scanned > 0,
        detail: if leaks.is_empty() {
            format!(
                "{scanned} recent upstream headers and bodies scanned for {} secrets",
                secrets.len()
            )
        } else {
            leaks.join("; ")
        },
    }
}

pub(super) fn secrets_check(topo: &Topology, ends: &[NodeEnd]) -> Check {
    let mut outputs: Vec<(String, String)> = topo
        .all_logs()
        .into_iter()
        .enumerate()
        .map(|(i, l)| (format!("log {i}"), l))
        .collect();
    for e in ends {
        outputs.push((format!("node-{} metrics", e.node), e.metrics.clone()));
        outputs.push((format!("node-{} health", e.node), e.health.clone()));
    }
    let owned = secrets();
    let secrets: Vec<(&str, &str)> = owned
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let leaks = invariants::leaked_secrets(&secrets, &outputs);
    Check {
        name: "no secret in logs, metrics or health bodies".to_owned(),
        passed: leaks.is_empty(),
        detail: if leaks.is_empty() {
            format!(
                "{} outputs scanned for {} secrets",
                outputs.len(),
                secrets.len()
            )
        } else {
            format!("{leaks:?}")
        },
    }
}
