//! Hearing a Sentinel failover as the sentinels announce it (`+switch-master`).
//!
//! Why: a node learned of a failover only when a command to the old master failed, and its
//! events subscriber was rebuilt on the next reconcile tick (5 s): for that long a 429 one node
//! met reached no other node. Every sentinel publishes `+switch-master <name> <old ip> <old
//! port> <new ip> <new port>` on its own pub/sub the moment it has promoted the new master.
//! [`MasterSwitches`] listens on every sentinel of the URL (any one may be down) and reports
//! each switch of the monitored master, so the owner re-resolves the master and resubscribes at
//! once; the tick stays as the fallback. The subscription is a pattern one (`PSUBSCRIBE`), so
//! the sentinel lists it apart from channel subscribers (an events subscriber that landed on
//! the sentinel by mistake is a channel subscriber).

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The sentinels' event of a completed failover.
pub const SWITCH_MASTER: &str = "+switch-master";
/// The longest wait before connecting to a sentinel again.
const RETRY_MAX: Duration = Duration::from_secs(2);
const RETRY_MIN: Duration = Duration::from_millis(100);

/// One failover of the monitored master, as announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterSwitch {
    /// `ip:port` of the master before.
    pub old: String,
    /// `ip:port` of the master now.
    pub new: String,
}

impl MasterSwitch {
    /// Parses a `+switch-master` payload; `None` for another master's switch or a payload in
    /// another shape.
    pub fn parse(master: &str, payload: &str) -> Option<Self> {
        let parts: Vec<&str> = payload.split_whitespace().collect();
        match parts.as_slice() {
            [name, old_ip, old_port, new_ip, new_port] if *name == master => Some(Self {
                old: format!("{old_ip}:{old_port}"),
                new: format!("{new_ip}:{new_port}"),
            }),
            _ => None,
        }
    }
}

/// The switches every sentinel announces, until dropped. The same switch comes once per
/// sentinel that saw it: the owner treats a switch as "look again", which is idempotent.
pub struct MasterSwitches {
    rx: mpsc::Receiver<MasterSwitch>,
    tasks: Vec<JoinHandle<()>>,
}

impl MasterSwitches {
    /// Starts one listener per sentinel (`redis://host:port`) for `master`'s switches.
    pub fn spawn(sentinels: &[String], master: &str, timeout: Duration) -> Self {
        let (tx, rx) = mpsc::channel(16);
        let tasks = sentinels
            .iter()
            .map(|url| tokio::spawn(listen(url.clone(), master.to_owned(), timeout, tx.clone())))
            .collect();
        Self { rx, tasks }
    }

    /// The next switch (pending forever once every listener is gone, which happens only when
    /// the URLs cannot be used at all).
    pub async fn next(&mut self) -> Option<MasterSwitch> {
        self.rx.recv().await
    }

    /// A switch already waiting, without waiting (to fold one sentinel's repeat of a switch
    /// into the one being handled).
    pub fn try_next(&mut self) -> Option<MasterSwitch> {
        self.rx.try_recv().ok()
    }
}

impl Drop for MasterSwitches {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Listens on one sentinel, reconnecting with a doubling backoff while it is unreachable.
async fn listen(url: String, master: String, timeout: Duration, tx: mpsc::Sender<MasterSwitch>) {
    // A sentinel address the URL parser accepted but the client does not: nothing to watch
    // there (the master is still found through the others, and the tick remains).
    let Ok(client) = redis::Client::open(url.as_str()) else {
        return;
    };
    let mut wait = RETRY_MIN;
    loop {
        let connected = tokio::time::timeout(timeout, async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(SWITCH_MASTER).await?;
            Ok::<_, redis::RedisError>(pubsub)
        })
        .await;
        if let Ok(Ok(pubsub)) = connected {
            wait = RETRY_MIN;
            let mut messages = pubsub.into_on_message();
            while let Some(msg) = messages.next().await {
                let Ok(payload) = msg.get_payload::<String>() else {
                    continue;
                };
                if let Some(switch) = MasterSwitch::parse(&master, &payload)
                    && tx.send(switch).await.is_err()
                {
                    return;
                }
            }
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_of_the_monitored_master_is_parsed_and_others_ignored() {
        assert_eq!(
            MasterSwitch::parse("switchyard", "switchyard 10.0.0.1 6379 10.0.0.2 6380"),
            Some(MasterSwitch {
                old: "10.0.0.1:6379".into(),
                new: "10.0.0.2:6380".into(),
            })
        );
        assert_eq!(
            MasterSwitch::parse("switchyard", "other 10.0.0.1 6379 10.0.0.2 6380"),
            None
        );
        assert_eq!(
            MasterSwitch::parse("switchyard", "switchyard 10.0.0.1"),
            None
        );
        assert_eq!(MasterSwitch::parse("switchyard", ""), None);
    }
}
