//! The learned records in a resync: a connection's usage-wall deadlines and a provider model's
//! tool limit, made equal to what Redis holds after this node may have missed their events.
//!
//! Why: these records are announced by events, and a node whose subscriber was gone (or that
//! was paused) would otherwise learn them only at its own next wall 429 or "too many tools"
//! 400, and would keep a lane another node ended, or a limit a success proved wrong. Their
//! writes append to the change log (`store::learned`), so an incremental resync reads only the
//! records the log names; a full scan reads every opted-in connection's usage wall and every
//! tool limit in the index. A record is adopted when its version is newer than the one this
//! node adopted and no write of this node to it is under way ([`crate::cluster::learned_versions`]).
//!
//! Equal, as far as these records can say: deadlines are raised to the record's, a lane the
//! record says ended ends here (the same lane; a newer one stays), a tool limit is set to the
//! record's (lower or higher), and a dropped limit is dropped here when it is below the tools
//! of the success that dropped it. A record that is missing (never written, expired, or lost
//! with Redis) changes nothing: its deadlines have passed, or Redis forgot what this node knows.

use switchyard_store::{LearnedKey, StoreError, ToolLimitRecord, ToolLimitState, WallRecord};

use crate::cluster::Cluster;
use crate::cluster::learned::{end_reason, shared_from};
use crate::runtime::Runtime;

/// Reads and adopts the records the change log named (with their versions), and the ones an
/// earlier resync held back; returns how many were adopted.
pub(super) async fn adopt_named(
    cluster: &Cluster,
    rt: &Runtime,
    named: Vec<(LearnedKey, u64)>,
) -> Result<usize, StoreError> {
    let versions = &cluster.learned_versions;
    let mut keys: Vec<LearnedKey> = Vec::new();
    for (key, version) in named {
        if version > versions.adopted_version(&key) && !keys.contains(&key) {
            keys.push(key);
        }
    }
    for key in versions.take_recheck() {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    adopt(cluster, rt, keys).await
}

/// Reads and adopts every learned record this node can use: the usage walls of the
/// connections that opted in, and the tool limits of its providers in the index.
pub(super) async fn full(cluster: &Cluster, rt: &Runtime) -> Result<usize, StoreError> {
    let versions = &cluster.learned_versions;
    versions.begin_full(std::ptr::from_ref(rt) as usize);
    let mut keys: Vec<LearnedKey> = rt
        .table
        .connections
        .iter()
        .filter(|c| c.config.low_priority_mode || c.config.auto_limit_reset)
        .map(|c| LearnedKey::Wall(c.id.to_string()))
        .collect();
    for key in cluster.store.tool_limit_members().await? {
        if let LearnedKey::ToolLimit { provider, .. } = &key
            && rt.table.provider(provider).is_some()
        {
            keys.push(key);
        }
    }
    for key in versions.take_recheck() {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    adopt(cluster, rt, keys).await
}

async fn adopt(
    cluster: &Cluster,
    rt: &Runtime,
    keys: Vec<LearnedKey>,
) -> Result<usize, StoreError> {
    let mut walls: Vec<&str> = Vec::new();
    let mut tools: Vec<(&str, &str)> = Vec::new();
    for key in &keys {
        match key {
            LearnedKey::Wall(conn) if rt.table.connection(conn).is_some() => walls.push(conn),
            LearnedKey::ToolLimit { provider, model } if rt.table.provider(provider).is_some() => {
                tools.push((provider.as_str(), model.as_str()));
            }
            _ => {}
        }
    }
    let versions = &cluster.learned_versions;
    let mut adopted = 0usize;
    if !walls.is_empty() {
        let records = cluster.store.read_usage_walls(&walls).await?;
        for (conn, record) in walls.iter().zip(records) {
            let key = LearnedKey::Wall((*conn).to_owned());
            if versions.should_adopt(&key, record.version) {
                apply_wall(rt, conn, &record);
                versions.adopted(&key, record.version);
                adopted += 1;
            }
        }
    }
    if !tools.is_empty() {
        let records = cluster.store.read_tool_limits(&tools).await?;
        for ((provider, model), record) in tools.iter().zip(records) {
            let key = LearnedKey::ToolLimit {
                provider: (*provider).to_owned(),
                model: (*model).to_owned(),
            };
            if versions.should_adopt(&key, record.version) {
                apply_tool_limit(rt, provider, model, record);
                versions.adopted(&key, record.version);
                adopted += 1;
            }
        }
    }
    if adopted > 0 {
        tracing::debug!(adopted, "learned records adopted from Redis");
    }
    Ok(adopted)
}

/// Makes connection `conn`'s usage-wall state equal to `record`.
fn apply_wall(rt: &Runtime, conn: &str, record: &WallRecord) {
    let Some(handle) = rt.table.connection(conn) else {
        return;
    };
    let now = rt.table.clock.epoch_ms();
    let shared = shared_from(&record.deadlines);
    let ended = record
        .ended
        .as_ref()
        .map(|e| (end_reason(&e.reason), e.reset_ms));
    let changed = rt
        .table
        .usage_wall
        .with(handle.idx, |s| s.adopt_record(&shared, ended, now));
    if changed == Some(true) {
        tracing::info!(
            connection = conn,
            lane_ms = shared.lane_ms,
            ended = ended.map(|(r, _)| r.label()),
            "usage wall adopted from Redis"
        );
    }
}

/// Makes `provider`'s tool limit of `model` equal to `record`.
fn apply_tool_limit(rt: &Runtime, provider: &str, model: &str, record: ToolLimitRecord) {
    let Some(p) = rt.table.provider(provider) else {
        return;
    };
    let now = rt.table.clock.now();
    match record.state {
        ToolLimitState::Live {
            limit,
            remaining_ms,
        } => {
            // A different local limit gives way to the record's (the merge keeps the lower).
            if p.tool_limit(model, now).is_some_and(|l| l != limit) {
                p.tool_limit_success(model, usize::MAX);
            }
            p.record_tool_limit(model, limit, now.saturating_add(remaining_ms), now);
        }
        ToolLimitState::Dropped { tools } => {
            if let Some(limit) = p.tool_limit_success(model, tools as usize) {
                tracing::info!(provider, model, limit, "tool limit dropped through Redis");
            }
        }
        ToolLimitState::None => {}
    }
}
