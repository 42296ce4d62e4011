//! The server-side scan behind the health snapshot.
//!
//! Why a script: reading 10,000 connections with pipelines means parsing tens of thousands of
//! replies per snapshot; the scan runs in Redis and returns only the connections with any
//! state (a cooldown hash, a lockout, a lease), in chunks so other clients run in between.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use redis::{Script, Value};
use switchyard_store::{ConnRecord, RedisStore, StoreError};

static SCAN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/scan_connections_v1.lua")));

/// What [`scan_connections`] found.
#[derive(Debug, Default)]
pub struct Scan {
    /// One record per requested connection, in order (clean ones read as clean).
    pub records: Vec<ConnRecord>,
    /// Connections with at least one lockout index member.
    pub locked: Vec<String>,
    /// Connections with a lease key.
    pub leased: Vec<String>,
}

/// The (head, tail) of a key name around the connection id.
fn split_key(key: String) -> (String, String) {
    match key.split_once(ID_MARK) {
        Some((h, t)) => (h.to_owned(), t.to_owned()),
        None => (key, String::new()),
    }
}

const ID_MARK: &str = "\u{1}";

/// One server-side pass over every connection ([`SCAN`]): 10,000 connections cost one round
/// trip and a reply the size of the interesting ones, where a pipeline would parse tens of
/// thousands of replies. Read-only.
pub async fn scan_connections(store: &RedisStore, conns: &[&str]) -> Result<Scan, StoreError> {
    let chunks = conns.chunks(SCAN_CHUNK).map(|c| scan_chunk(store, c));
    let parts = futures_util::future::try_join_all(chunks).await?;
    let mut scan = Scan::default();
    for part in parts {
        scan.records.extend(part.records);
        scan.locked.extend(part.locked);
        scan.leased.extend(part.leased);
    }
    Ok(scan)
}

/// Connections per scan script call: each call holds Redis for a few milliseconds at most,
/// and other clients' commands run between the calls.
const SCAN_CHUNK: usize = 1000;

async fn scan_chunk(store: &RedisStore, conns: &[&str]) -> Result<Scan, StoreError> {
    const CMD: &str = "coordinator_scan";
    if conns.is_empty() {
        return Ok(Scan::default());
    }
    let k = store.keys();
    let (ch, ct) = split_key(k.connection(ID_MARK));
    let (lh, lt) = split_key(k.lockout_index(ID_MARK));
    let (sh, st) = split_key(k.lease(ID_MARK));
    let reply: Value = store
        .run(CMD, |mut con| async move {
            let mut inv = SCAN.prepare_invoke();
            inv.arg(ch).arg(ct).arg(lh).arg(lt).arg(sh).arg(st);
            for c in conns {
                inv.arg(*c);
            }
            inv.invoke_async(&mut con).await
        })
        .await?;
    let Value::Array(items) = reply else {
        return Err(protocol(CMD, "scan reply is not an array"));
    };
    let mut items = items.into_iter();
    let now = match items.next() {
        Some(Value::Int(n)) => u64::try_from(n).unwrap_or(0),
        _ => return Err(protocol(CMD, "scan reply without a time")),
    };
    let mut found = HashMap::new();
    let mut scan = Scan::default();
    for item in items {
        let Value::Array(f) = item else {
            return Err(protocol(CMD, "scan row is not an array"));
        };
        let [id, until, level, reason, terminal, locks, leased] = f.as_slice() else {
            return Err(protocol(CMD, "scan row of the wrong length"));
        };
        let id = text(id);
        let until: u64 = text(until).parse().unwrap_or(0);
        let record = ConnRecord {
            conn: id.clone(),
            remaining_ms: until.saturating_sub(now),
            backoff_level: text(level).parse().unwrap_or(0),
            reason: enum_of(&text(reason)),
            terminal: enum_of(&text(terminal)),
        };
        if matches!(locks, Value::Int(n) if *n > 0) {
            scan.locked.push(id.clone());
        }
        if matches!(leased, Value::Int(n) if *n > 0) {
            scan.leased.push(id.clone());
        }
        found.insert(id, record);
    }
    let mut seen = HashSet::new();
    scan.records = conns
        .iter()
        .filter(|c| seen.insert(**c))
        .map(|c| found.remove(*c).unwrap_or_else(|| ConnRecord::clean(c)))
        .collect();
    Ok(scan)
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        _ => String::new(),
    }
}

/// A stored snake_case enum; an unknown value (a newer release) reads as `None`.
fn enum_of<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    if s.is_empty() {
        return None;
    }
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}

fn protocol(command: &'static str, message: &str) -> StoreError {
    StoreError::Protocol {
        command,
        message: message.to_owned(),
    }
}
