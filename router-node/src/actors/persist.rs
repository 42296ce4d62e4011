//! Connection state that survives a restart in embedded mode.
//!
//! Why: without it a restart forgets every cooldown and, worse, every terminal state, so a
//! `banned` or `credits_exhausted` key comes back to life and is dispatched to again. In
//! redis mode the cluster hash holds this state; in embedded mode it goes to a single-file
//! embedded database (`redb`) in `SWITCHYARD_STATE_DIR`.
//!
//! Interface: [`open`] once at startup (it restores the stored states into the connection
//! handles before their actors are seeded from them), then [`record`], called by
//! [`super::ConnHandle::publish`] whenever an actor publishes a new snapshot. Writes stay off
//! the request path: `record` only `try_send`s the state to one writer task, which drains what
//! has queued up and writes it in one transaction. A full channel drops the write (the next
//! change of that connection writes its whole state again).
//!
//! Times are stored as wall-clock epoch ms (the node's monotonic clock restarts at zero) and
//! turned back into node time when restored. A missing store starts empty; a store that
//! cannot be opened or read is set aside (renamed `*.corrupt`) and the node starts empty with
//! a warning, never refusing to start.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use redb::{Database, ReadableDatabase, ReadableTableMetadata, TableDefinition};
use switchyard_shared::Millis;
use switchyard_shared::cooldown::ConnState;
use tokio::sync::mpsc;

use super::{ConnHandle, ConnSnapshot};
use crate::clock::Clock;

/// The file in `SWITCHYARD_STATE_DIR`.
pub const STATE_FILE: &str = "state.redb";
/// Connection id → JSON of [`ConnState`] with epoch-ms times.
const CONNECTIONS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("connections");
/// Pending writes before `record` starts dropping them.
const CHANNEL_CAPACITY: usize = 4096;
/// At most this many states per transaction.
const BATCH: usize = 256;

/// The writer's inbox, set once per process by [`open`].
static SINK: OnceLock<Sink> = OnceLock::new();

struct Sink {
    tx: mpsc::Sender<(Arc<str>, ConnState)>,
    clock: Clock,
}

/// Hands a connection's newly published state to the writer (never blocks; a no-op when no
/// store is open).
pub fn record(id: &Arc<str>, snapshot: &ConnSnapshot) {
    if let Some(sink) = SINK.get() {
        let state = to_epoch(&snapshot.state, &sink.clock);
        if sink.tx.try_send((id.clone(), state)).is_err() {
            tracing::debug!(connection = %id, "state store writer busy; write dropped");
        }
    }
}

/// Opens (or creates) the store in `dir`, restores the stored states into `connections`, and
/// starts the writer on the current tokio runtime. Call once, before the actors start.
pub fn open(dir: &Path, connections: &[Arc<ConnHandle>], clock: Clock) {
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
                    return;
                }
            }
        }
    };
    match restore(&db, connections, &clock) {
        Ok(n) => tracing::info!(path = %path.display(), restored = n, "connection state restored"),
        Err(e) => tracing::warn!(error = %e, "cannot read the state store; starting empty"),
    }
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    if SINK.set(Sink { tx, clock }).is_ok() {
        tokio::spawn(write_loop(db, rx));
    }
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

/// Publishes every stored state whose connection still exists; returns how many.
fn restore(db: &Database, connections: &[Arc<ConnHandle>], clock: &Clock) -> Result<usize, String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let table = match txn.open_table(CONNECTIONS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.to_string()),
    };
    let mut restored = 0;
    for conn in connections {
        let Some(value) = table.get(&*conn.id).map_err(|e| e.to_string())? else {
            continue;
        };
        match serde_json::from_slice::<ConnState>(value.value()) {
            Ok(stored) => {
                let current = conn.load_full();
                conn.snapshot.store(Arc::new(ConnSnapshot {
                    epoch: current.epoch.wrapping_add(1),
                    state: from_epoch(&stored, clock),
                    lockouts: current.lockouts.clone(),
                    rate_limit_protection: current.rate_limit_protection,
                }));
                restored += 1;
            }
            Err(e) => {
                tracing::warn!(connection = %conn.id, error = %e, "stored state unreadable; ignored")
            }
        }
    }
    Ok(restored)
}

/// Drains what has queued up and writes it in one transaction, until every sender is gone.
async fn write_loop(db: Database, mut rx: mpsc::Receiver<(Arc<str>, ConnState)>) {
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

/// Writes one batch in one transaction; returns the connections written.
fn write_batch(db: &Database, writes: &[(Arc<str>, ConnState)]) -> Result<Vec<Arc<str>>, String> {
    let txn = db.begin_write().map_err(|e| e.to_string())?;
    {
        let mut table = txn.open_table(CONNECTIONS).map_err(|e| e.to_string())?;
        // Later entries of the same connection overwrite earlier ones in order.
        for (id, state) in writes {
            let json = serde_json::to_vec(state).map_err(|e| e.to_string())?;
            table
                .insert(&**id, json.as_slice())
                .map_err(|e| e.to_string())?;
        }
    }
    txn.commit().map_err(|e| e.to_string())?;
    Ok(writes.iter().map(|(id, _)| id.clone()).collect())
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
            (Arc::from("a"), to_epoch(&banned(), &clock)),
            (Arc::from("b"), to_epoch(&cooling, &clock)),
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
}
