//! Operator actions in redis mode: Redis first, and the answer says whether Redis took it.
//!
//! Why: an operator clear, lockout clear, reinstatement or breaker reset changes state every
//! node shares. It used to be applied on this node and handed to the writer after a `PING`;
//! but a `PING` passes while Redis refuses writes (`OOM` at `maxmemory` with `noeviction`,
//! `READONLY` on a demoted master), and the writer drops an operator change that fails (or
//! that waits behind failing writes) rather than replay it over newer state. The operator was
//! told "cleared" while Redis kept the cooldown, and the node adopted it again on its next
//! resync. So the admin handler writes the action to Redis itself, before this node changes
//! anything ([`write`]): when Redis refuses, the answer is 503 `cluster_store_unavailable`
//! naming Redis's reply, nothing changes here and nothing is queued to replay. When Redis takes
//! it, the change is announced to the peers at once and only then applied here (the actor hands
//! the same change to the writer too, which repeats the idempotent write and announcement).

use std::sync::Arc;

use switchyard_shared::wire::WireEvent;
use switchyard_store::StoreError;

use super::remote::ALL_MODELS;
use super::writer::publish;
use crate::cluster::{Cluster, wall_ms};
use crate::runtime::Runtime;

/// One operator change of shared state, as Redis stores it.
#[derive(Debug, Clone, Copy)]
pub enum OperatorWrite<'a> {
    /// Cooldown, backoff level and lockouts of a connection (never a terminal status).
    ClearCooldown { conn: &'a str },
    /// A terminal connection starts afresh.
    Reinstate { conn: &'a str },
    /// The lockouts of one model on a connection, or all of them (`model: None`).
    ClearLockouts {
        provider: &'a str,
        conn: &'a str,
        model: Option<&'a str>,
    },
    /// The provider's shared breaker back to CLOSED.
    ResetBreaker { provider: &'a str },
}

/// Writes `action` to Redis and announces it; `Ok` at once in embedded mode. An error means
/// Redis does not have it: the caller must leave this node's state alone and answer 503.
pub async fn write(rt: &Runtime, action: OperatorWrite<'_>) -> Result<(), StoreError> {
    match &rt.table.cluster {
        Some(cluster) => write_to(cluster, action).await,
        None => Ok(()),
    }
}

async fn write_to(cluster: &Arc<Cluster>, action: OperatorWrite<'_>) -> Result<(), StoreError> {
    let store = &cluster.store;
    let at = wall_ms();
    let event = match action {
        OperatorWrite::ClearCooldown { conn } => {
            let not_terminal = store.cooldown_clear(conn).await?;
            store.lockout_clear_connection(conn).await?;
            // A terminal connection is not cleared anywhere: nothing to announce.
            not_terminal.then(|| WireEvent::CooldownCleared {
                connection: conn.to_owned(),
            })
        }
        OperatorWrite::Reinstate { conn } => {
            store.terminal_clear(conn).await?;
            Some(WireEvent::TerminalReinstated {
                connection: conn.to_owned(),
            })
        }
        OperatorWrite::ClearLockouts {
            provider,
            conn,
            model,
        } => {
            match model {
                Some(model) => {
                    store.lockout_clear(provider, conn, model).await?;
                }
                None => {
                    store.lockout_clear_connection(conn).await?;
                }
            }
            Some(WireEvent::LockoutCleared {
                provider: provider.to_owned(),
                connection: conn.to_owned(),
                model: model.unwrap_or(ALL_MODELS).to_owned(),
            })
        }
        OperatorWrite::ResetBreaker { provider } => {
            let change = store.breaker_reset(provider).await?;
            cluster.set_probe_denied(&Arc::from(provider), None);
            let after = change.after;
            Some(WireEvent::BreakerTransition {
                provider: after.provider,
                from: change.before,
                to: after.phase,
                generation: after.generation,
                retry_after_ms: after.retry_after_ms,
            })
        }
    };
    // Peers learn it now, not on their next resync: this node's writer may hold the same
    // change behind writes that keep failing, and drop it.
    if let Some(event) = event {
        publish(cluster, at, event).await;
    }
    Ok(())
}
