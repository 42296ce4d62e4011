//! The leader's housekeeping: what no node cleans up after itself.
//!
//! - **Dead nodes.** A node that dies without deregistering leaves its id in the node set and
//!   its cluster permits in every connection's permit table until they expire. Once a node's
//!   heartbeat key has been gone for `node_ttl_ms` (so the dashboard shows it `down` for a
//!   while first), the janitor removes the id and frees its permits.
//! - **Lockout indexes.** Index members whose lockout expired are removed (compaction), so
//!   the index never outgrows the live lockouts.
//! - **Event streams.** Events travel on pub/sub, which stores nothing, so there is no stream
//!   to trim; leases (probe and session) carry their own TTL and expire in Redis by themselves.
//!
//! Every write is a fenced script ([`JANITOR_PASS`], [`LOCKOUT_COMPACT`]): it first checks that
//! the leader lease still carries this replica's generation. Each successful pass also appends
//! a line to the janitor log (`{prefix}janitor:{coordinator}`, last 50), which operators (and
//! the fencing test) read to see who did what.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::{Script, Value};
use switchyard_store::{RedisStore, StoreError};

use crate::read;

static JANITOR_PASS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/janitor_pass_v1.lua")));
static LOCKOUT_COMPACT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lockout_compact_v1.lua")));

/// Separates provider and model in lockout index members (as the store writes them).
const MEMBER_SEP: char = '\u{1f}';

/// The janitor log key; same hash tag as the leader lease, so the pass script is single-slot
/// as far as these two are concerned.
pub fn log_key(store: &RedisStore) -> String {
    format!("{}janitor:{{coordinator}}", store.keys().prefix())
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    /// The lease no longer carries our generation: nothing was written.
    pub fenced: bool,
    pub nodes_pruned: u64,
    pub permits_freed: u64,
    pub index_pruned: u64,
}

/// What a pass works on: the store, how long a node may be gone before it is pruned, the
/// catalogue's connection ids (whose permit tables and lockout indexes it cleans) and the id it
/// signs the janitor log with. Narrow on purpose: the janitor needs nothing else of the
/// replica.
pub struct Scope<'a> {
    pub store: &'a RedisStore,
    pub grace: Duration,
    pub connections: Vec<&'a str>,
    pub coordinator_id: &'a str,
}

/// The janitor's memory between passes: since when each gone node has been gone.
#[derive(Debug, Default)]
pub struct Janitor {
    missing_since: HashMap<String, Instant>,
}

impl Janitor {
    /// One pass under `generation`.
    pub async fn pass(
        &mut self,
        scope: &Scope<'_>,
        generation: u64,
    ) -> Result<PassReport, StoreError> {
        let nodes = read::read_nodes(scope.store).await?;
        let now = Instant::now();
        let grace = scope.grace;
        self.missing_since
            .retain(|id, _| nodes.iter().any(|n| &n.id == id && n.heartbeat.is_none()));
        let mut victims = Vec::new();
        for n in nodes.iter().filter(|n| n.heartbeat.is_none()) {
            let since = *self.missing_since.entry(n.id.clone()).or_insert(now);
            if now.duration_since(since) >= grace {
                victims.push(n.id.clone());
            }
        }
        let mut report = self.prune(scope, generation, &victims).await?;
        if report.fenced {
            return Ok(report);
        }
        for id in &victims {
            self.missing_since.remove(id);
        }
        match compact_lockouts(scope, generation).await? {
            None => report.fenced = true,
            Some(n) => report.index_pruned = n,
        }
        Ok(report)
    }

    async fn prune(
        &self,
        scope: &Scope<'_>,
        generation: u64,
        victims: &[String],
    ) -> Result<PassReport, StoreError> {
        const CMD: &str = "janitor_pass";
        let store = scope.store;
        let keys = store.keys();
        let mut script_keys = vec![keys.leader_lease(), keys.nodes(), log_key(store)];
        script_keys.extend(victims.iter().map(|id| keys.node(id)));
        if !victims.is_empty() {
            for conn in &scope.connections {
                script_keys.push(keys.permit_expiry(conn));
                script_keys.push(keys.permit_grants(conn));
            }
        }
        let mut args = vec![
            generation.to_string(),
            scope.coordinator_id.to_owned(),
            victims.len().to_string(),
        ];
        args.extend(victims.iter().cloned());
        let reply: Value = store
            .run(CMD, |mut con| async move {
                let mut inv = JANITOR_PASS.prepare_invoke();
                for k in &script_keys {
                    inv.key(k);
                }
                for a in &args {
                    inv.arg(a);
                }
                inv.invoke_async(&mut con).await
            })
            .await?;
        match reply {
            Value::Int(-1) => Ok(PassReport {
                fenced: true,
                ..PassReport::default()
            }),
            Value::Array(v) => match v.as_slice() {
                [Value::Int(p), Value::Int(f)] => Ok(PassReport {
                    fenced: false,
                    nodes_pruned: u64::try_from(*p).unwrap_or(0),
                    permits_freed: u64::try_from(*f).unwrap_or(0),
                    index_pruned: 0,
                }),
                _ => Err(protocol(CMD, "pass reply of the wrong shape")),
            },
            other => Err(protocol(CMD, format!("unexpected reply {other:?}"))),
        }
    }
}

fn protocol(command: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::Protocol {
        command,
        message: message.into(),
    }
}

/// Compacts every non-empty lockout index. `None` when fenced.
async fn compact_lockouts(scope: &Scope<'_>, generation: u64) -> Result<Option<u64>, StoreError> {
    const CMD: &str = "lockout_compact";
    let store = scope.store;
    let conns = &scope.connections;
    if conns.is_empty() {
        return Ok(Some(0));
    }
    let mut pipe = redis::pipe();
    for conn in conns {
        pipe.cmd("SMEMBERS").arg(store.keys().lockout_index(conn));
    }
    let members: Vec<Vec<String>> = store
        .run("lockout_indexes", |mut con| async move {
            pipe.query_async(&mut con).await
        })
        .await?;
    let mut removed = 0;
    for (conn, members) in conns.iter().zip(members) {
        if members.is_empty() {
            continue;
        }
        let mut keys = vec![
            store.keys().leader_lease(),
            store.keys().lockout_index(conn),
        ];
        let mut args = vec![generation.to_string()];
        for m in members {
            if let Some((provider, model)) = m.split_once(MEMBER_SEP) {
                keys.push(store.keys().lockout(provider, conn, model));
                args.push(m);
            }
        }
        let reply: i64 = store
            .run(CMD, |mut con| async move {
                let mut inv = LOCKOUT_COMPACT.prepare_invoke();
                for k in &keys {
                    inv.key(k);
                }
                for a in &args {
                    inv.arg(a);
                }
                inv.invoke_async(&mut con).await
            })
            .await?;
        if reply < 0 {
            return Ok(None);
        }
        removed += u64::try_from(reply).unwrap_or(0);
    }
    Ok(Some(removed))
}
