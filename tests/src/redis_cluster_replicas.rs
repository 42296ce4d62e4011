//! What a managed Redis Cluster does to its clients while they run, on a [`RedisCluster`] of 3
//! masters with one replica each: a manual failover (`CLUSTER FAILOVER` on a replica, as an
//! operator or a rolling Redis upgrade does it) and a live slot migration (what
//! `redis-cli --cluster reshard` does: `SETSLOT … IMPORTING` on the target, `SETSLOT …
//! MIGRATING` on the source, `MIGRATE` key by key, then `SETSLOT … NODE` everywhere).
//!
//! Why: a failover by SIGKILL is one way a cluster moves a slot; these are the other two, and
//! during a migration clients meet `ASK` (a key already moved) and `TRYAGAIN` (a multi-key
//! call whose keys are split between the two nodes) instead of `MOVED`. Every wait is bounded.

use std::time::{Duration, Instant};

use crate::redis_topology::{RedisCluster, cli};

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub master: bool,
    pub failed: bool,
    /// The master's id for a replica, `-` for a master.
    pub master_id: String,
    /// Slot ranges served (masters only), inclusive.
    pub slots: Vec<(u16, u16)>,
}

impl ClusterNode {
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parses `CLUSTER NODES` (migrating/importing markers such as `[42->-id]` are skipped).
pub fn parse_nodes(text: &str) -> Vec<ClusterNode> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let port = f
                .get(1)?
                .split(['@', ','])
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let flags = f.get(2)?;
            let slots = f
                .iter()
                .skip(8)
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|n| (n, n)),
                })
                .collect();
            Some(ClusterNode {
                id: (*f.first()?).to_owned(),
                port,
                master: flags.split(',').any(|x| x == "master"),
                failed: flags.split(',').any(|x| x == "fail" || x == "fail?"),
                master_id: (*f.get(3)?).to_owned(),
                slots,
            })
        })
        .collect()
}

/// `CLUSTER NODES` as the node on `port` sees it.
pub fn nodes_seen_by(port: u16) -> std::io::Result<Vec<ClusterNode>> {
    Ok(parse_nodes(&cli(port, &["CLUSTER", "NODES"])?))
}

/// The id of the node on `port` (`CLUSTER MYID`).
pub fn node_id(port: u16) -> std::io::Result<String> {
    let id = cli(port, &["CLUSTER", "MYID"])?.trim().to_owned();
    if id.is_empty() {
        return Err(std::io::Error::other(format!("no CLUSTER MYID on {port}")));
    }
    Ok(id)
}

fn timed_out(what: &str, within: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} within {within:?}"),
    )
}

/// Polls `check` every 50 ms until it holds or `within` passed.
fn wait_for(within: Duration, what: &str, mut check: impl FnMut() -> bool) -> std::io::Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(timed_out(what, within))
}

/// Whether every live node of `cluster` says `cluster_state:ok` and names `owner` as the one
/// master serving `slot`.
fn settled(cluster: &RedisCluster, slot: u16, owner: u16) -> bool {
    cluster.live_ports().iter().all(|&p| {
        cli(p, &["CLUSTER", "INFO"]).is_ok_and(|s| s.contains("cluster_state:ok"))
            && nodes_seen_by(p).is_ok_and(|view| {
                let serving: Vec<u16> = view
                    .iter()
                    .filter(|n| n.master && !n.failed && n.serves(slot))
                    .map(|n| n.port)
                    .collect();
                serving == [owner]
            })
    })
}

/// A manual failover of the master serving `slot`: `CLUSTER FAILOVER` on one of its replicas,
/// which waits for the replica to catch up, so no acknowledged write is lost, and then swaps
/// the roles. Returns `(old master, new master)` once every node agrees on the new owner.
pub fn manual_failover(cluster: &RedisCluster, slot: u16) -> std::io::Result<(u16, u16)> {
    let old = cluster
        .master_of(slot)
        .ok_or_else(|| std::io::Error::other(format!("no master serves slot {slot}")))?;
    let replica = *cluster
        .replicas_of(old)
        .first()
        .ok_or_else(|| std::io::Error::other(format!("master {old} has no replica")))?;
    let out = cli(replica, &["CLUSTER", "FAILOVER"])?;
    if out.trim() != "OK" {
        return Err(std::io::Error::other(format!(
            "CLUSTER FAILOVER on {replica}: {out}"
        )));
    }
    wait_for(
        Duration::from_secs(20),
        "the replica promoted by CLUSTER FAILOVER",
        || {
            cli(replica, &["ROLE"]).is_ok_and(|s| s.starts_with("master"))
                && cli(old, &["ROLE"]).is_ok_and(|s| s.starts_with("slave"))
                && settled(cluster, slot, replica)
                // The demoted master is listed as the new one's replica, so a crash of the new
                // master right after has a replica to promote.
                && cluster.replicas_of(replica).contains(&old)
        },
    )?;
    Ok((old, replica))
}

/// What a slot migration did.
#[derive(Debug, Clone)]
pub struct Migration {
    pub slot: u16,
    pub from: u16,
    pub to: u16,
    /// Keys moved by `MIGRATE`.
    pub keys_moved: usize,
    /// From `SETSLOT … MIGRATING` to the last `SETSLOT … NODE`.
    pub took: Duration,
}

/// Moves `slot` from its master to the master on `to` as `redis-cli --cluster reshard` does,
/// one key per `MIGRATE` with `pace` between keys, so that clients meet the slot half moved
/// for a while. `during(keys_moved)` runs after each key. Returns once every node agrees that
/// `to` serves the slot.
pub fn migrate_slot(
    cluster: &RedisCluster,
    slot: u16,
    to: u16,
    pace: Duration,
    mut during: impl FnMut(usize),
) -> std::io::Result<Migration> {
    let from = cluster
        .master_of(slot)
        .ok_or_else(|| std::io::Error::other(format!("no master serves slot {slot}")))?;
    if from == to {
        return Err(std::io::Error::other(format!(
            "slot {slot} is already on {to}"
        )));
    }
    let (from_id, to_id) = (node_id(from)?, node_id(to)?);
    let slot_arg = slot.to_string();
    let ok = |port: u16, args: &[&str]| -> std::io::Result<()> {
        let out = cli(port, args)?;
        if out.trim() == "OK" {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("{args:?} on {port}: {out}")))
        }
    };
    let started = Instant::now();
    ok(
        to,
        &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id],
    )?;
    ok(
        from,
        &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id],
    )?;
    let to_port = to.to_string();
    let mut moved = 0usize;
    // Bounded: an install has a few hundred keys at most; new ones written meanwhile go to
    // the target (`ASK`), so the source empties.
    for _ in 0..10_000 {
        let keys = cli(from, &["CLUSTER", "GETKEYSINSLOT", &slot_arg, "1"])?;
        let Some(key) = keys.lines().map(str::trim).find(|k| !k.is_empty()) else {
            break;
        };
        let out = cli(from, &["MIGRATE", "127.0.0.1", &to_port, key, "0", "5000"])?;
        match out.trim() {
            "OK" => moved += 1,
            // Expired or deleted between the listing and the move.
            "NOKEY" => {}
            other => {
                return Err(std::io::Error::other(format!(
                    "MIGRATE {key} from {from} to {to}: {other}"
                )));
            }
        }
        during(moved);
        std::thread::sleep(pace);
    }
    // The target first, then the source, then every other master (as reshard does), so the
    // source never answers MOVED towards a node that does not yet accept the slot.
    ok(to, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id])?;
    ok(from, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id])?;
    for view in nodes_seen_by(to)? {
        if view.master && !view.failed && view.port != to && view.port != from {
            ok(
                view.port,
                &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id],
            )?;
        }
    }
    let took = started.elapsed();
    wait_for(
        Duration::from_secs(20),
        "every node names the slot's new owner",
        || settled(cluster, slot, to),
    )?;
    Ok(Migration {
        slot,
        from,
        to,
        keys_moved: moved,
        took,
    })
}

/// Keys of `slot` held by the node on `port`.
pub fn keys_in_slot(port: u16, slot: u16) -> usize {
    cli(port, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A master other than the one on `port`.
pub fn other_master(cluster: &RedisCluster, port: u16) -> Option<u16> {
    let first = *cluster.live_ports().first()?;
    nodes_seen_by(first)
        .ok()?
        .into_iter()
        .find(|n| n.master && !n.failed && n.port != port && !n.slots.is_empty())
        .map(|n| n.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_are_parsed_with_migration_markers_skipped() {
        let text = "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461->-b2]\n\
                    b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922 [5461-<-a1]\n\
                    c3 127.0.0.1:7002@17002 slave a1 0 0 1 connected\n\
                    d4 127.0.0.1:7003@17003 master,fail - 0 0 3 disconnected 10923-16383\n";
        let nodes = parse_nodes(text);
        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[0].slots, [(0, 5460)]);
        assert!(nodes[0].master && nodes[0].serves(5460) && !nodes[0].serves(5461));
        assert_eq!(nodes[1].slots, [(5461, 10922)]);
        assert!(!nodes[2].master);
        assert_eq!(nodes[2].master_id, "a1");
        assert!(nodes[3].failed);
        assert!(parse_nodes("").is_empty());
    }
}
