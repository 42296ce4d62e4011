//! Resilience state that survives a restart in embedded mode: connection cooldowns and
//! terminal states, model lockouts, and open provider breakers.
//!
//! Why: without it a restart forgets every cooldown and, worse, every terminal state, so a
//! `banned` or `credits_exhausted` key comes back to life and is dispatched to again; a model
//! locked for a spent quota and a provider whose breaker is open would be hammered again the
//! same way. In redis mode the cluster hash holds this state; in embedded mode it goes to a
//! single-file embedded database (`redb`) in `SWITCHYARD_STATE_DIR`.
//!
//! Interface: [`open`] once at startup (it restores the stored states and lockouts into the
//! connection handles before their actors are seeded from them, and returns the breakers to
//! seed the provider actors with), then [`record`], called by [`super::ConnHandle::publish`]
//! whenever a connection actor publishes a new snapshot, and [`record_breaker`], called when a
//! breaker actor publishes a new view. Writes stay off the request path: both only
//! `try_send` to one writer task, which drains what has queued up and writes it in one
//! transaction. A full channel drops the write (the next change writes the whole state again).
//!
//! A restored breaker is OPEN until the stored end of its open period (a half-open one is due
//! for its probe at once); its failure count and escalation history start afresh. A restored
//! lockout lasts until its stored end; its escalation memory starts afresh.
//!
//! Times are stored as wall-clock epoch ms (the node's monotonic clock restarts at zero) and
//! turned back into node time when restored. A missing store starts empty; a store that
//! cannot be opened or read is set aside (renamed `*.corrupt`) and the node starts empty with
//! a warning, never refusing to start.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use std::collections::HashMap;

use redb::{Database, ReadableDatabase, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};
use switchyard_shared::Millis;
use switchyard_shared::breaker::{Breaker, BreakerProfile, BreakerState, BreakerView};
use switchyard_shared::cooldown::ConnState;
use switchyard_shared::lockout::{LockKey, LockReason};
use tokio::sync::mpsc;

use super::{BreakerSnapshot, ConnHandle, ConnSnapshot, ProviderHandle};
use crate::clock::Clock;

/// The file in `SWITCHYARD_STATE_DIR`.
pub const STATE_FILE: &str = "state.redb";
/// Connection id → JSON of [`ConnState`] with epoch-ms times.
const CONNECTIONS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("connections");
/// Connection id → JSON list of [`StoredLock`] (the active lockouts).
const LOCKOUTS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("lockouts");
/// Provider id → JSON of [`StoredBreaker`]; absent while the breaker is closed.
const BREAKERS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("breakers");
/// Pending writes before `record` starts dropping them.
const CHANNEL_CAPACITY: usize = 4096;
/// At most this many states per transaction.
const BATCH: usize = 256;

/// The writer's inbox, set once per process by [`open`].
static SINK: OnceLock<Sink> = OnceLock::new();

struct Sink {
    tx: mpsc::Sender<Write>,
    clock: Clock,
}

/// One pending write.
enum Write {
    /// A connection's state and its active lockouts.
    Conn {
        id: Arc<str>,
        state: ConnState,
        locks: Vec<StoredLock>,
    },
    /// A provider's breaker (`None`: closed, the row goes).
    Breaker {
        id: Arc<str>,
        stored: Option<StoredBreaker>,
    },
}

/// A model lockout with its end as epoch ms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredLock {
    key: LockKey,
    reason: LockReason,
    until_epoch_ms: u64,
}

/// An open (or half-open) breaker: when its open period ends, as epoch ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct StoredBreaker {
    open_until_epoch_ms: u64,
}

/// Hands a connection's newly published state to the writer (never blocks; a no-op when no
/// store is open).
pub fn record(id: &Arc<str>, snapshot: &ConnSnapshot) {
    if let Some(sink) = SINK.get() {
        let now = sink.clock.now();
        let epoch = sink.clock.epoch_ms();
        let locks = snapshot
            .lockouts
            .active(now)
            .into_iter()
            .map(|(key, entry)| StoredLock {
                key: key.clone(),
                reason: entry.reason,
                until_epoch_ms: epoch.saturating_add(entry.until.saturating_sub(now)),
            })
            .collect();
        let write = Write::Conn {
            id: id.clone(),
            state: to_epoch(&snapshot.state, &sink.clock),
            locks,
        };
        if sink.tx.try_send(write).is_err() {
            tracing::debug!(connection = %id, "state store writer busy; write dropped");
        }
    }
}

/// Hands a provider's newly published breaker view to the writer (never blocks; a no-op when
/// no store is open).
pub fn record_breaker(id: &Arc<str>, snapshot: &BreakerSnapshot) {
    if let Some(sink) = SINK.get() {
        let now = sink.clock.now();
        let epoch = sink.clock.epoch_ms();
        let stored = match snapshot.view {
            BreakerView::Open { until } => Some(StoredBreaker {
                open_until_epoch_ms: epoch.saturating_add(until.saturating_sub(now)),
            }),
            BreakerView::HalfOpen => Some(StoredBreaker {
                open_until_epoch_ms: epoch,
            }),
            BreakerView::Closed | BreakerView::Degraded => None,
        };
        let write = Write::Breaker {
            id: id.clone(),
            stored,
        };
        if sink.tx.try_send(write).is_err() {
            tracing::debug!(provider = %id, "state store writer busy; write dropped");
        }
    }
}

/// Opens (or creates) the store in `dir`, restores the stored states and lockouts into
/// `connections`, and starts the writer on the current tokio runtime; returns the breakers of
/// `providers` to seed their actors with (by provider id). Call once, before the actors start.
pub fn open(
    dir: &Path,
    connections: &[Arc<ConnHandle>],
    providers: &[Arc<ProviderHandle>],
    clock: Clock,
) -> HashMap<String, Breaker> {
    let path = dir.join(STATE_FILE);
    let db = match open_db(&path) {
        Ok(db) => db,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "state store unreadable; set aside, starting empty");
            let aside = PathBuf::from(format!("{}.corrupt", path.display()));
            if let Err(e) = std::fs::rename(&path, &aside) {
                tracing::warn!(error = %e, "cannot set the unreadable state store aside");
            }
            match Database::create(&path) {
                Ok(db) => db,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot create the state store; state is not persisted");
                    return HashMap::new();
                }
            }
        }
    };
    match restore(&db, connections, &clock) {
        Ok(n) => tracing::info!(path = %path.display(), restored = n, "connection state restored"),
        Err(e) => tracing::warn!(error = %e, "cannot read the state store; starting empty"),
    }
    let breakers = match restore_breakers(&db, providers, &clock) {
        Ok(b) => {
            if !b.is_empty() {
                tracing::info!(restored = b.len(), "open breakers restored");
            }
            b
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the stored breakers; starting closed");
            HashMap::new()
        }
    };
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    if SINK.set(Sink { tx, clock }).is_ok() {
        tokio::spawn(write_loop(db, rx));
    }
    breakers
}

fn open_db(path: &Path) -> Result<Database, String> {
    let db = Database::create(path).map_err(|e| e.to_string())?;
    // A file that opens but whose table cannot be read is as unusable as one that does not.
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    match txn.open_table(CONNECTIONS) {
        Ok(table) => {
            table.len().map_err(|e| e.to_string())?;
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(e.to_string()),
    }
    drop(txn);
    Ok(db)
}

/// The JSON stored under `key` in `table`, `None` when the table or the row is absent or
/// the row does not parse (a warning names it).
fn read_row<T: serde::de::DeserializeOwned>(
    txn: &redb::ReadTransaction,
    table: TableDefinition<'_, &str, &[u8]>,
    key: &str,
) -> Result<Option<T>, String> {
    let table = match txn.open_table(table) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let Some(value) = table.get(key).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    match serde_json::from_slice::<T>(value.value()) {
        Ok(v) => Ok(Some(v)),
        Err(e) => {
            tracing::warn!(key, error = %e, "stored state unreadable; ignored");
            Ok(None)
        }
    }
}

/// Publishes every stored state and live lockout whose connection still exists; returns how
/// many connections got something back.
fn restore(db: &Database, connections: &[Arc<ConnHandle>], clock: &Clock) -> Result<usize, String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let now = clock.now();
    let epoch = clock.epoch_ms();
    let mut restored = 0;
    for conn in connections {
        let state = read_row::<ConnState>(&txn, CONNECTIONS, &conn.id)?;
        let locks = read_row::<Vec<StoredLock>>(&txn, LOCKOUTS, &conn.id)?.unwrap_or_default();
        let live: Vec<StoredLock> = locks
            .into_iter()
            .filter(|l| l.until_epoch_ms > epoch)
            .collect();
        if state.is_none() && live.is_empty() {
            continue;
        }
        let current = conn.load_full();
        let mut lockouts = current.lockouts.clone();
        for lock in live {
            lockouts.lock(lock.key, lock.reason, lock.until_epoch_ms - epoch, now);
        }
        conn.snapshot.store(Arc::new(ConnSnapshot {
            epoch: current.epoch.wrapping_add(1),
            state: state.map_or_else(|| current.state.clone(), |s| from_epoch(&s, clock)),
            lockouts,
            rate_limit_protection: current.rate_limit_protection,
        }));
        restored += 1;
    }
    Ok(restored)
}

/// The stored breakers still open, as OPEN breakers for their providers' actors (the actor
/// sets its profile).
fn restore_breakers(
    db: &Database,
    providers: &[Arc<ProviderHandle>],
    clock: &Clock,
) -> Result<HashMap<String, Breaker>, String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let now = clock.now();
    let epoch = clock.epoch_ms();
    let mut out = HashMap::new();
    for provider in providers {
        let Some(stored) = read_row::<StoredBreaker>(&txn, BREAKERS, &provider.id)? else {
            continue;
        };
        let remaining = stored.open_until_epoch_ms.saturating_sub(epoch);
        let mut breaker = Breaker::new(BreakerProfile::default());
        breaker.apply_remote(BreakerState::Open, remaining, now);
        // Readers see it at once, before the actor's first publish.
        provider.breaker.store(Arc::new(BreakerSnapshot {
            view: breaker.view(now),
            failure_count: breaker.failure_count(),
        }));
        out.insert(provider.id.to_string(), breaker);
    }
    Ok(out)
}

/// Drains what has queued up and writes it in one transaction, until every sender is gone.
async fn write_loop(db: Database, mut rx: mpsc::Receiver<Write>) {
    let db = Arc::new(db);
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let writes = std::mem::take(&mut batch);
        let db = db.clone();
        // redb commits with an fsync: off the async threads.
        let written = tokio::task::spawn_blocking(move || write_batch(&db, &writes)).await;
        match written {
            Ok(Ok(ids)) => tracing::debug!(connections = ?ids, "connection state stored"),
            Ok(Err(e)) => tracing::warn!(error = %e, "state store write failed"),
            Err(e) => tracing::warn!(error = %e, "state store writer task failed"),
        }
    }
}

/// Writes one batch in one transaction; returns the connections and providers written.
fn write_batch(db: &Database, writes: &[Write]) -> Result<Vec<Arc<str>>, String> {
    let txn = db.begin_write().map_err(|e| e.to_string())?;
    {
        let mut states = txn.open_table(CONNECTIONS).map_err(|e| e.to_string())?;
        let mut locks = txn.open_table(LOCKOUTS).map_err(|e| e.to_string())?;
        let mut breakers = txn.open_table(BREAKERS).map_err(|e| e.to_string())?;
        // Later entries of the same key overwrite earlier ones in order.
        for write in writes {
            match write {
                Write::Conn {
                    id,
                    state,
                    locks: active,
                } => {
                    states
                        .insert(&**id, json(state)?.as_slice())
                        .map_err(|e| e.to_string())?;
                    if active.is_empty() {
                        locks.remove(&**id).map_err(|e| e.to_string())?;
                    } else {
                        locks
                            .insert(&**id, json(active)?.as_slice())
                            .map_err(|e| e.to_string())?;
                    }
                }
                Write::Breaker { id, stored } => match stored {
                    Some(b) => {
                        breakers
                            .insert(&**id, json(b)?.as_slice())
                            .map_err(|e| e.to_string())?;
                    }
                    None => {
                        breakers.remove(&**id).map_err(|e| e.to_string())?;
                    }
                },
            }
        }
    }
    txn.commit().map_err(|e| e.to_string())?;
    Ok(writes
        .iter()
        .map(|w| match w {
            Write::Conn { id, .. } | Write::Breaker { id, .. } => id.clone(),
        })
        .collect())
}

/// The JSON bytes of a stored value.
fn json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, String> {
    serde_json::to_vec(value).map_err(|e| e.to_string())
}

/// The state with its node times as epoch ms.
fn to_epoch(state: &ConnState, clock: &Clock) -> ConnState {
    let now = clock.now();
    let epoch = clock.epoch_ms();
    let conv = |at: Millis| {
        if at >= now {
            epoch.saturating_add(at - now)
        } else {
            epoch.saturating_sub(now - at)
        }
    };
    ConnState {
        rate_limited_until: state.rate_limited_until.map(conv),
        last_error_at: state.last_error_at.map(conv),
        ..state.clone()
    }
}

/// The inverse of [`to_epoch`] on this node's clock (a past instant before the clock's zero
/// reads as zero).
fn from_epoch(state: &ConnState, clock: &Clock) -> ConnState {
    let now = clock.now();
    let epoch = clock.epoch_ms();
    let conv = |at: u64| {
        if at >= epoch {
            now.saturating_add(at - epoch)
        } else {
            now.saturating_sub(epoch - at)
        }
    };
    ConnState {
        rate_limited_until: state.rate_limited_until.map(conv),
        last_error_at: state.last_error_at.map(conv),
        ..state.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::cooldown::ConnStatus;
    use switchyard_shared::outcome::TerminalStatus;

    fn banned() -> ConnState {
        ConnState {
            status: ConnStatus::Terminal(TerminalStatus::Banned),
            rate_limited_until: None,
            ..ConnState::default()
        }
    }

    #[test]
    fn a_written_state_is_read_back_and_times_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_db(&dir.path().join(STATE_FILE)).unwrap();
        let clock = Clock::new();
        let cooling = ConnState {
            rate_limited_until: Some(clock.now() + 60_000),
            ..ConnState::default()
        };
        let writes = vec![
            Write::Conn {
                id: Arc::from("a"),
                state: to_epoch(&banned(), &clock),
                locks: Vec::new(),
            },
            Write::Conn {
                id: Arc::from("b"),
                state: to_epoch(&cooling, &clock),
                locks: Vec::new(),
            },
        ];
        write_batch(&db, &writes).unwrap();
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(CONNECTIONS).unwrap();
        let a: ConnState =
            serde_json::from_slice(table.get("a").unwrap().unwrap().value()).unwrap();
        assert_eq!(from_epoch(&a, &clock).status, banned().status);
        let b: ConnState =
            serde_json::from_slice(table.get("b").unwrap().unwrap().value()).unwrap();
        let until = from_epoch(&b, &clock).rate_limited_until.unwrap();
        // Within the milliseconds that passed between the two conversions.
        assert!(until.abs_diff(clock.now() + 60_000) < 1_000, "{until}");
    }

    #[test]
    fn a_garbage_file_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        std::fs::write(&path, b"this is not a redb file, just bytes").unwrap();
        assert!(open_db(&path).is_err());
    }

    #[test]
    fn lockouts_and_breakers_round_trip_and_closed_rows_go() {
        use switchyard_shared::lockout::LockTarget;
        let dir = tempfile::tempdir().unwrap();
        let db = open_db(&dir.path().join(STATE_FILE)).unwrap();
        let clock = Clock::new();
        let epoch = clock.epoch_ms();
        let lock = StoredLock {
            key: LockKey {
                provider: "p".into(),
                connection: "c".into(),
                model: LockTarget::Family("gpt".into()),
            },
            reason: LockReason::QuotaExhausted,
            until_epoch_ms: epoch + 3_600_000,
        };
        let open = StoredBreaker {
            open_until_epoch_ms: epoch + 30_000,
        };
        let writes = vec![
            Write::Conn {
                id: Arc::from("c"),
                state: ConnState::default(),
                locks: vec![lock.clone()],
            },
            Write::Breaker {
                id: Arc::from("p"),
                stored: Some(open),
            },
            Write::Breaker {
                id: Arc::from("q"),
                stored: Some(open),
            },
            // A later write of the same provider wins: q closed again.
            Write::Breaker {
                id: Arc::from("q"),
                stored: None,
            },
        ];
        write_batch(&db, &writes).unwrap();
        let txn = db.begin_read().unwrap();
        assert_eq!(
            read_row::<Vec<StoredLock>>(&txn, LOCKOUTS, "c").unwrap(),
            Some(vec![lock])
        );
        assert_eq!(
            read_row::<StoredBreaker>(&txn, BREAKERS, "p").unwrap(),
            Some(open)
        );
        assert_eq!(
            read_row::<StoredBreaker>(&txn, BREAKERS, "q").unwrap(),
            None
        );
        drop(txn);
        // Lockouts that ended go with the next write of their connection.
        let cleared = vec![Write::Conn {
            id: Arc::from("c"),
            state: ConnState::default(),
            locks: Vec::new(),
        }];
        write_batch(&db, &cleared).unwrap();
        let txn = db.begin_read().unwrap();
        assert_eq!(
            read_row::<Vec<StoredLock>>(&txn, LOCKOUTS, "c").unwrap(),
            None
        );
    }
}
