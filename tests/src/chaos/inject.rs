//! The process and network side of each fault (kills, restarts, the partition) and the
//! upstream faults a phase scripts, with the time windows the checker needs to know about.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::checks;
use super::faults::{Fault, OOM_CLEARED, Phase};
use super::invariants::{FaultWindows, Span};
use super::load::Load;
use super::observe::epoch_ms;
use super::operator;
use super::report::Check;
use super::topology::{NODES, PARTITIONED_NODE, Topology};
use crate::cluster::{cluster_degraded, metric_sum, metrics_text};
use crate::harness::http_get_status;

/// How long after Redis returns (or a partition heals) a node may still act on stale state:
/// its subscriber reconnects within a second and it resyncs from the keys every 5 s.
pub(super) const RESYNC_MS: u64 = 6_000;

/// The node killed by [`Fault::KillNode`].
pub(super) const KILLED_NODE: usize = 1;

/// How long [`Fault::RedisStall`] freezes Redis: half the permit TTL, five redis timeouts.
const REDIS_STALL: Duration = Duration::from_millis(1_500);

/// How long the nodes have to subscribe again and resync after [`Fault::SubscriberKill`].
const RESUBSCRIBE_WITHIN: Duration = Duration::from_secs(10);

pub(super) async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
}

/// The process and network side of a fault.
pub(super) async fn act(
    topo: &mut Topology,
    load: &Load,
    phase: &Phase,
    started: Instant,
    epoch_of: &impl Fn(Duration) -> u64,
    windows: &mut FaultWindows,
    checks: &mut Vec<Check>,
) -> io::Result<()> {
    let length = phase.end - phase.start;
    let at = |fraction: f64| started + phase.start + length.mul_f64(fraction);
    match phase.fault {
        Fault::Burst503 => {
            windows.burst = Some(Span {
                from: epoch_of(phase.start),
                to: epoch_of(phase.end),
            });
        }
        Fault::Terminal402 => windows.terminal_from = Some(epoch_of(phase.start)),
        Fault::ReasoningOnly => windows.reasoning.push(Span {
            from: epoch_of(phase.start),
            to: epoch_of(phase.end),
        }),
        Fault::KillNode => {
            // Let slow streams get going first, so the kill lands mid-stream.
            sleep_until(at(0.3)).await;
            set_node(load, KILLED_NODE, None);
            let kill_at = epoch_ms();
            topo.kill_node(KILLED_NODE);
            windows.kills.push((KILLED_NODE, kill_at));
            sleep_until(at(0.6)).await;
            topo.restart_node(KILLED_NODE).await?;
            let back = epoch_ms();
            windows.blind.push((
                KILLED_NODE,
                Span {
                    from: kill_at,
                    to: back + 1_000,
                },
            ));
            let url = topo.nodes[KILLED_NODE].as_ref().map(|n| n.client_url());
            set_node(load, KILLED_NODE, url);
        }
        Fault::RedisRestart => {
            let from = epoch_ms();
            topo.kill_redis();
            sleep_until(at(0.5)).await;
            topo.restart_redis().await?;
            let back = epoch_ms();
            for n in 0..NODES {
                windows.blind.push((
                    n,
                    Span {
                        from,
                        to: back + RESYNC_MS,
                    },
                ));
            }
        }
        Fault::Partition => {
            let from = epoch_ms();
            topo.partition(true);
            sleep_until(at(0.6)).await;
            topo.partition(false);
            let back = epoch_ms();
            windows.blind.push((
                PARTITIONED_NODE,
                Span {
                    from,
                    to: back + RESYNC_MS,
                },
            ));
        }
        Fault::RedisStall => {
            sleep_until(at(0.2)).await;
            let from = epoch_ms();
            topo.pause_redis();
            tokio::time::sleep(REDIS_STALL).await;
            topo.resume_redis();
            let back = epoch_ms();
            for n in 0..NODES {
                windows.blind.push((
                    n,
                    Span {
                        from,
                        to: back + RESYNC_MS,
                    },
                ));
            }
        }
        Fault::SubscriberKill => {
            sleep_until(at(0.2)).await;
            let admins = topo.admins();
            let before = resyncs(&admins).await;
            let from = epoch_ms();
            let killed = topo.kill_subscribers().await?;
            let (resubscribed, detail) = resubscribed(&admins, &before).await;
            let back = epoch_ms();
            for n in 0..NODES {
                windows.blind.push((
                    n,
                    Span {
                        from,
                        to: back + RESYNC_MS,
                    },
                ));
            }
            checks.push(Check {
                name: "every node subscribed again and resynced after CLIENT KILL".to_owned(),
                passed: killed >= NODES && resubscribed,
                detail: format!("{killed} subscribers killed; {detail}"),
            });
        }
        Fault::RedisFailover => {
            sleep_until(at(0.2)).await;
            let admins = topo.admins();
            let before = resyncs(&admins).await;
            let from = epoch_ms();
            topo.fail_over().await?;
            let (followed, detail) = resubscribed(&admins, &before).await;
            let back = epoch_ms();
            for n in 0..NODES {
                windows.blind.push((
                    n,
                    Span {
                        from,
                        to: back + RESYNC_MS,
                    },
                ));
            }
            checks.push(Check {
                name: "every node followed the failover to the promoted replica and resynced"
                    .to_owned(),
                passed: followed,
                detail,
            });
        }
        Fault::RedisOom => redis_oom(topo, at, windows, checks).await?,
        Fault::CoordinatorKill => {
            topo.kill_coordinator();
            sleep_until(at(0.4)).await;
            topo.restart_coordinator().await?;
            checks.push(coordinator_check(topo).await);
        }
        _ => {}
    }
    Ok(())
}

/// [`Fault::RedisOom`]: the cooldown of [`OOM_CLEARED`] reaches Redis (its 429 is scripted for
/// the phase), Redis goes out of memory, an operator clears that cooldown through node 0, and
/// Redis gets its memory back. The operator's answer is judged against what Redis held right
/// after it and after the heal.
async fn redis_oom(
    topo: &mut Topology,
    at: impl Fn(f64) -> Instant,
    windows: &mut FaultWindows,
    checks: &mut Vec<Check>,
) -> io::Result<()> {
    let name = "Redis OOM: no operator write reported as done when it failed, none applied later";
    let Some(store) = operator::reader(&topo.redis_url()) else {
        checks.push(Check {
            name: name.to_owned(),
            passed: false,
            detail: "no store to read Redis with".to_owned(),
        });
        return Ok(());
    };
    // The 429s are scripted for the phase; the load meets one within a few hundred ms.
    let within = at(0.3).saturating_duration_since(Instant::now());
    let before_ms = operator::wait_cooling(&store, OOM_CLEARED, within).await;
    sleep_until(at(0.3)).await;
    let from = epoch_ms();
    topo.set_oom(true).await?;
    sleep_until(at(0.45)).await;
    let admin = topo.admins().first().map(|(_, a)| *a);
    let mut op = match admin {
        Some(admin) => operator::clear(admin, &store, OOM_CLEARED, before_ms).await,
        None => operator::OperatorWrite {
            at: epoch_ms(),
            connection: OOM_CLEARED.to_owned(),
            status: 0,
            body: "node 0 down".to_owned(),
            before_ms,
            during_ms: None,
            after_ms: None,
            after_delay_ms: 0,
        },
    };
    sleep_until(at(0.65)).await;
    topo.set_oom(false).await?;
    let back = epoch_ms();
    for n in 0..NODES {
        windows.blind.push((
            n,
            Span {
                from,
                to: back + RESYNC_MS,
            },
        ));
    }
    // Long enough after the heal for a queued write to have been replayed.
    sleep_until(at(0.95)).await;
    op.after_ms = operator::cooldown_left(&store, OOM_CLEARED).await;
    op.after_delay_ms = epoch_ms().saturating_sub(op.at);
    let violations = operator::operator_writes_honest(std::slice::from_ref(&op));
    let mut check = checks::check_list(name, &violations);
    check.detail = format!(
        "{}; {OOM_CLEARED} cooling {before_ms} ms before, clear answered {} {} ({}), Redis then {:?} ms, {:?} ms after the heal",
        check.detail,
        op.status,
        op.body.chars().take(120).collect::<String>(),
        if op.reported_done() {
            "done"
        } else {
            "not done"
        },
        op.during_ms,
        op.after_ms
    );
    // The clear must have reached a node. A run where no 429 reached Redis before the OOM
    // judges the clear on an empty record, which the detail shows (`cooling 0 ms before`).
    check.passed &= op.status != 0;
    checks.push(check);
    Ok(())
}

/// Each node's `switchyard_cluster_resyncs_total` (`None` when unreadable).
async fn resyncs(admins: &[(usize, SocketAddr)]) -> Vec<Option<f64>> {
    let admins = admins.to_vec();
    tokio::task::spawn_blocking(move || {
        admins
            .iter()
            .map(|(_, a)| metric_sum(&metrics_text(*a), "switchyard_cluster_resyncs_total"))
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// Waits until every node has resynced since `before` and says it is subscribed again (not
/// degraded); returns whether they all did within [`RESUBSCRIBE_WITHIN`], and how long it took.
async fn resubscribed(admins: &[(usize, SocketAddr)], before: &[Option<f64>]) -> (bool, String) {
    let started = Instant::now();
    let admins = admins.to_vec();
    let before = before.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut pending: Vec<usize> = admins.iter().map(|(i, _)| *i).collect();
        // Bounded by time: one round every 100 ms.
        while started.elapsed() < RESUBSCRIBE_WITHIN {
            pending = admins
                .iter()
                .zip(&before)
                .filter(|((_, a), b)| {
                    let now = metric_sum(&metrics_text(*a), "switchyard_cluster_resyncs_total");
                    let resynced = matches!((now, b), (Some(n), Some(b)) if n > *b);
                    !resynced || cluster_degraded(*a)
                })
                .map(|((i, _), _)| *i)
                .collect();
            if pending.is_empty() {
                return (
                    true,
                    format!(
                        "all resubscribed and resynced within {} ms",
                        started.elapsed().as_millis()
                    ),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (
            false,
            format!("nodes {pending:?} not resubscribed and resynced within 10 s"),
        )
    })
    .await
    .unwrap_or((false, "check task failed".to_owned()))
}

pub(super) fn set_node(load: &Load, i: usize, url: Option<String>) {
    if let Ok(mut nodes) = load.nodes.write()
        && let Some(slot) = nodes.get_mut(i)
    {
        *slot = url;
    }
}

/// After its restart, the coordinator answers and sees every node.
pub(super) async fn coordinator_check(topo: &Topology) -> Check {
    let Some(addr) = topo.coordinator.as_ref().map(|c| c.addr) else {
        return Check {
            name: "the coordinator came back after kill -9".to_owned(),
            passed: false,
            detail: "not running".to_owned(),
        };
    };
    let result = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = String::new();
        while Instant::now() < deadline {
            if http_get_status(addr, "/readyz") == Some(200)
                && let Some((200, body)) = crate::cluster::http_get(addr, "/api/cluster/nodes")
            {
                let live = body.matches("\"node-").count();
                if live >= NODES {
                    return (
                        true,
                        format!("/readyz 200, {live} node mentions in /api/cluster/nodes"),
                    );
                }
                last = body.chars().take(200).collect();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        (
            false,
            format!("not ready with every node within 10 s: {last}"),
        )
    })
    .await
    .unwrap_or((false, "check task failed".to_owned()));
    Check {
        name: "the coordinator came back after kill -9".to_owned(),
        passed: result.0,
        detail: result.1,
    }
}
