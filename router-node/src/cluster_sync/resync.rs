//! The resync: what makes a node's view equal to Redis's after it may have missed events.
//!
//! Incremental when it can be: every version bump is also appended to the change log
//! (`store::changelog`), and the node reads the log from its last offset and only the records
//! it names. It reads every record (a full scan) only when the log cannot say what it missed —
//! no offset yet, the log trimmed past its offset, the log missing — and, as a safety net,
//! every few minutes ([`switchyard_store::changelog::SAFETY_SCAN_INTERVAL_MS`]). Either
//! way, records are read in chunks with peers' events applied between them ([`Inbox`]), and a
//! connection with a local change still on its way to Redis is not adopted yet
//! ([`crate::cluster::versions`]). The learned records (usage walls, tool limits) ride along:
//! the ones the log names, or all of them in a full scan ([`learned_resync`]).

use std::sync::Arc;

use rand::Rng as _;
use switchyard_shared::Millis;
use switchyard_shared::wire::BreakerPhase;
use switchyard_store::changelog::{self, CHANGELOG_MAXLEN, CHANGELOG_PAGE};
use switchyard_store::connections::RESYNC_CHUNK;
use switchyard_store::{FullReason, LogPage, ResyncPlan, StoreError, StreamId};

use super::sync::Inbox;
use super::{adopt, learned_resync, remote, settings};
use crate::actors::{ConnHandle, ConnSnapshot};
use crate::cluster::{Cluster, wall_ms};
use crate::metrics::cluster::ResyncKind;
use crate::runtime::Runtime;

/// Log pages one incremental resync reads at most: more than the stream holds, so a node that
/// cannot reach the end is behind writers faster than it reads, and scans instead.
const MAX_LOG_PAGES: usize = (CHANGELOG_MAXLEN as usize / CHANGELOG_PAGE) + 2;

/// Where this node stands in the change log.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    /// The last log entry whose changes this node has read (`None`: it has to scan).
    offset: Option<StreamId>,
    /// The runtime the offset was reached with: a reload builds new actors, which adopt afresh.
    runtime: usize,
    /// When the safety-net full scan is due (node wall clock, epoch ms).
    next_full_ms: Millis,
    /// Connections a resync could not adopt yet because a local change of theirs was still on
    /// its way to Redis: the log named them already, so the next resync reads them again.
    deferred: Vec<Arc<str>>,
}

/// One resync, its failure logged (the next trigger retries).
pub(super) async fn resync_logged(
    cluster: &Cluster,
    rt: &Runtime,
    inbox: &mut Inbox<'_>,
    cursor: &mut Cursor,
) {
    match reconcile(cluster, rt, inbox, cursor).await {
        Ok(()) => {}
        Err(e) => tracing::warn!(error = %e, "cluster resync failed; retrying later"),
    }
}

/// One resync: incremental through the change log when the log covers what this node missed,
/// a full scan otherwise ([`changelog::plan`]); then the breakers (one read per provider, few)
/// and the settings.
async fn reconcile(
    cluster: &Cluster,
    rt: &Runtime,
    inbox: &mut Inbox<'_>,
    cursor: &mut Cursor,
) -> Result<(), StoreError> {
    let runtime_id = std::ptr::from_ref(rt) as usize;
    if cursor.runtime != runtime_id {
        cursor.offset = None;
    }
    let safety_due = wall_ms() >= cursor.next_full_ms;
    // The log is read only when it can decide anything; its first page is used below.
    let mut page = None;
    if let Some(after) = cursor.offset
        && !safety_due
    {
        page = Some(cluster.store.changelog_read(after, CHANGELOG_PAGE).await?);
    }
    let first = page.as_ref().and_then(|p| p.first);
    let mut full = match changelog::plan(cursor.offset, first, safety_due) {
        ResyncPlan::Full(reason) => Some(reason),
        ResyncPlan::Incremental { .. } => None,
    };
    if full.is_none()
        && let (Some(after), Some(page)) = (cursor.offset, page)
    {
        match incremental(cluster, rt, inbox, cursor, after, page).await? {
            Some(offset) => {
                cursor.offset = Some(offset);
                cluster.metrics.resynced(ResyncKind::Incremental);
            }
            None => full = Some(FullReason::Trimmed),
        }
    }
    if let Some(reason) = full {
        tracing::debug!(reason = reason.as_str(), "full cluster resync");
        // The marker goes first: a write after it has a later log entry, one before it is
        // seen by the scan.
        let mark = cluster.store.changelog_mark(&cluster.node_id).await?;
        cluster.versions.take_forgotten();
        cursor.deferred.clear();
        full_scan(cluster, rt, inbox, &mut cursor.deferred).await?;
        learned_resync::full(cluster, rt).await?;
        cursor.offset = Some(mark);
        cursor.runtime = runtime_id;
        let jitter = rand::rng().random_range(0..changelog::SAFETY_SCAN_JITTER_MS);
        cursor.next_full_ms = changelog::next_safety_scan(wall_ms(), jitter);
        cluster.metrics.resynced(ResyncKind::Full);
    }
    let store = &cluster.store;
    let providers: Vec<&str> = rt.table.providers.iter().map(|p| &*p.id).collect();
    for b in store.read_breakers(&providers).await? {
        if b.phase != BreakerPhase::Closed || b.generation > 0 {
            remote::to_breaker(
                rt,
                &b.provider,
                b.phase,
                b.generation,
                b.retry_after_ms,
                true,
            );
        }
    }
    settings::pull(cluster, rt, None).await?;
    cluster
        .sync
        .last_resync_ms
        .store(wall_ms(), std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Reads the change log after `after` (its first page already read) and adopts the records it
/// names, page by page, with the events that arrived meanwhile applied between pages; also the
/// connections deferred or forgotten since the last resync. Returns the new offset, or `None`
/// when the log has more after the offset than this node should page through (or was trimmed
/// while it paged): then it scans instead.
async fn incremental(
    cluster: &Cluster,
    rt: &Runtime,
    inbox: &mut Inbox<'_>,
    cursor: &mut Cursor,
    after: StreamId,
    mut page: LogPage,
) -> Result<Option<StreamId>, StoreError> {
    let versions = &cluster.versions;
    let mut offset = after;
    let mut deferred = Vec::new();
    let mut adopted = 0usize;
    let mut learned = Vec::new();
    for _ in 0..MAX_LOG_PAGES {
        learned.append(&mut page.learned);
        let more = page.entries >= CHANGELOG_PAGE;
        if let Some(last) = page.last {
            offset = last;
        }
        let handles: Vec<Arc<ConnHandle>> = changelog::changed_connections(&page.changes)
            .into_iter()
            // Cheap filter first: this node's own writes and versions it holds already.
            .filter(|(conn, version)| *version > versions.adopted_version(conn))
            .filter_map(|(conn, _)| rt.table.connection(conn).cloned())
            .collect();
        for chunk in handles.chunks(RESYNC_CHUNK) {
            adopted += adopt_chunk(cluster, rt, chunk, &mut deferred).await?;
            inbox.drain(cluster).await;
        }
        if !more {
            // What the log cannot name: deferred earlier, or forgotten after a dropped write.
            let mut again: Vec<Arc<ConnHandle>> = Vec::new();
            for conn in std::mem::take(&mut cursor.deferred)
                .into_iter()
                .chain(versions.take_forgotten())
            {
                if let Some(h) = rt.table.connection(&conn)
                    && !again.iter().any(|a| a.id == h.id)
                {
                    again.push(h.clone());
                }
            }
            for chunk in again.chunks(RESYNC_CHUNK) {
                adopted += adopt_chunk(cluster, rt, chunk, &mut deferred).await?;
            }
            cursor.deferred = deferred;
            adopted += learned_resync::adopt_named(cluster, rt, learned).await?;
            if adopted > 0 {
                tracing::debug!(adopted, "connection records adopted from the change log");
            }
            return Ok(Some(offset));
        }
        page = cluster.store.changelog_read(offset, CHANGELOG_PAGE).await?;
        if let ResyncPlan::Full(_) = changelog::plan(Some(offset), page.first, false) {
            return Ok(None);
        }
    }
    Ok(None)
}

/// Reads every configured connection record and adopts those whose version is newer than the
/// one this node adopted: made equal to Redis's record, lowering as well as raising
/// ([`adopt`]); only those connections' lockouts are read, pipelined.
///
/// The connections go in chunks of [`RESYNC_CHUNK`]: each chunk is read, adopted, and then the
/// events that arrived meanwhile are applied before the next chunk is read. So an event is
/// held back by one chunk at most, and it is still applied after any read of its connection
/// that could predate it (an event is published after its write, so a later chunk's read
/// includes it) — the order a resync that blocks events would give.
async fn full_scan(
    cluster: &Cluster,
    rt: &Runtime,
    inbox: &mut Inbox<'_>,
    deferred: &mut Vec<Arc<str>>,
) -> Result<(), StoreError> {
    cluster
        .versions
        .begin_resync(std::ptr::from_ref(rt) as usize);
    let mut adopted = 0usize;
    for chunk in rt.table.connections.chunks(RESYNC_CHUNK) {
        adopted += adopt_chunk(cluster, rt, chunk, deferred).await?;
        inbox.drain(cluster).await;
    }
    if adopted > 0 {
        tracing::debug!(adopted, "connection records adopted from Redis");
    }
    Ok(())
}

/// Reads one chunk of connection records and adopts those whose version moved; returns how
/// many were adopted. A newer record held back by a local change still on its way to Redis
/// goes to `deferred`.
async fn adopt_chunk(
    cluster: &Cluster,
    rt: &Runtime,
    chunk: &[Arc<ConnHandle>],
    deferred: &mut Vec<Arc<str>>,
) -> Result<usize, StoreError> {
    let store = &cluster.store;
    let versions = &cluster.versions;
    let conns: Vec<&str> = chunk.iter().map(|c| &*c.id).collect();
    let states = store.read_connection_states(&conns).await?;
    // The lockouts of every connection to adopt, pipelined, not one round trip each.
    let mut moved: Vec<(&Arc<ConnHandle>, _)> = Vec::new();
    for (handle, state) in chunk.iter().zip(states) {
        if versions.should_adopt(&handle.id, state.version) {
            moved.push((handle, state));
        } else if state.version > versions.adopted_version(&handle.id)
            && versions.pending(&handle.id) > 0
        {
            deferred.push(handle.id.clone());
        }
    }
    let ids: Vec<&str> = moved.iter().map(|(h, _)| &*h.id).collect();
    let lockouts = store.read_lockouts_many(&ids).await?;
    let mut adopted = 0usize;
    for ((handle, state), lockouts) in moved.into_iter().zip(lockouts) {
        // Checked again after the await: a local change may have been made meanwhile.
        if !versions.should_adopt(&handle.id, state.version) {
            deferred.push(handle.id.clone());
            continue;
        }
        let now = rt.table.clock.now();
        let local = local_view(&handle.load(), now);
        let reinstated = state.reinstated > versions.adopted_version(&handle.id);
        for change in adopt::plan(&local, &state.record, &lockouts, reinstated, now) {
            remote::to_connection(rt, &handle.id, change);
        }
        versions.adopted(&handle.id, state.version);
        adopted += 1;
    }
    Ok(adopted)
}

/// The part of a connection's snapshot that the shared record covers.
fn local_view(snapshot: &ConnSnapshot, now: Millis) -> adopt::LocalView {
    adopt::LocalView {
        terminal: snapshot.terminal().is_some(),
        cooldown_remaining_ms: snapshot.cooldown_remaining(now),
        backoff_level: snapshot.state.backoff_level,
        lockouts: snapshot
            .lockouts
            .active(now)
            .into_iter()
            .map(|(key, entry)| (key.clone(), entry.remaining_ms(now)))
            .collect(),
    }
}
