//! The processes of a chaos run and the operations faults perform on them: one
//! `redis-server` (with an append-only file, as production runs it, so a restart keeps the
//! shared state), three router nodes in redis mode, one coordinator, and one in-process mock
//! upstream per node (so every upstream request can be attributed to the node that sent it).
//! A replica of Redis runs next to it, and every client reaches Redis through a front
//! [`FaultProxy`] (the stand-in for a Sentinel-managed address or a Kubernetes service), so a
//! failover can promote the replica and move every client to it by retargeting that proxy.
//! Node 2 reaches the front proxy through a second [`FaultProxy`], so it alone can be
//! partitioned.

use std::io;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{MGMT_KEY, node_config, start_node};
use crate::coordinator_process::CoordinatorProcess;
use crate::fault_proxy::{FaultProxy, Mode};
use crate::harness::NodeProcess;
use crate::mock_upstream::{MockConfig, MockHandle, MockUpstream};
use crate::redis_server::RedisServer;
use crate::redis_topology::cli;

use super::scenario::{self, MODEL};

/// Nodes in the cluster.
pub const NODES: usize = 3;
/// The node that reaches Redis through the fault proxy.
pub const PARTITIONED_NODE: usize = 2;
/// Arrivals each mock remembers (enough for a 10-minute soak at a few hundred req/s).
const ARRIVAL_LOG: usize = 400_000;

/// Starts the coordinator on the cluster's Redis, with the nodes' catalogue.
fn start_coordinator(redis_url: &str, body: &str) -> io::Result<CoordinatorProcess> {
    let env = scenario::node_env();
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    all.push(("SWITCHYARD_REDIS_URL", redis_url));
    all.push(("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY));
    CoordinatorProcess::start(&node_config("coordinator", body), &all)
}

/// Redis's persistence in a chaos run: an append-only file synced on every write.
const REDIS_ARGS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// Every process and in-process server of one run.
pub struct Topology {
    /// The current master.
    pub redis: RedisServer,
    /// A replica of [`Topology::redis`], promoted by [`Topology::fail_over`].
    pub replica: Option<RedisServer>,
    /// Every client's path to the current master.
    pub front: FaultProxy,
    /// Node [`PARTITIONED_NODE`]'s path to the front proxy.
    pub redis_proxy: FaultProxy,
    /// Shared with the cap sampler, which reads them while faults run.
    pub mocks: Vec<Arc<MockHandle>>,
    /// `None` while a node is down (killed and not yet restarted).
    pub nodes: Vec<Option<NodeProcess>>,
    pub coordinator: Option<CoordinatorProcess>,
    /// Logs of processes that were killed, kept for the secret scan.
    pub dead_logs: Vec<String>,
}

impl Topology {
    /// Starts Redis, the mocks, the nodes (each waits for `/readyz`) and the coordinator.
    pub async fn start() -> io::Result<Self> {
        let mut mocks = Vec::with_capacity(NODES);
        for _ in 0..NODES {
            mocks.push(Arc::new(
                MockUpstream::start(MockConfig {
                    models: vec![MODEL.to_owned()],
                    arrival_log: ARRIVAL_LOG,
                    // Enough recent requests per key for the upstream secret scan.
                    header_history: 64,
                    body_history: 256,
                    max_stall: Duration::from_secs(20),
                    ..MockConfig::default()
                })
                .await?,
            ));
        }
        let bases: Vec<String> = mocks.iter().map(|m| m.base_url()).collect();
        let started = tokio::task::spawn_blocking(move || -> io::Result<_> {
            let redis = RedisServer::start_with(&REDIS_ARGS)?;
            let replica = RedisServer::start_replica_of(redis.port, &REDIS_ARGS)?;
            let front = FaultProxy::start(local(redis.port))?;
            let redis_proxy = FaultProxy::start(front.addr())?;
            let url = proxy_url(front.addr());
            let mut nodes = Vec::with_capacity(NODES);
            for (i, base) in bases.iter().enumerate() {
                nodes.push(Some(node_process(i, &url, redis_proxy.addr(), base)?));
            }
            let coordinator = start_coordinator(&url, &scenario::node_body(&bases[0]))?;
            Ok((redis, replica, front, redis_proxy, nodes, coordinator))
        })
        .await
        .map_err(io::Error::other)??;
        let (redis, replica, front, redis_proxy, nodes, coordinator) = started;
        Ok(Self {
            redis,
            replica: Some(replica),
            front,
            redis_proxy,
            mocks,
            nodes,
            coordinator: Some(coordinator),
            dead_logs: Vec::new(),
        })
    }

    /// The Redis URL clients use: the front proxy, which follows a failover.
    pub fn redis_url(&self) -> String {
        proxy_url(self.front.addr())
    }

    /// Client base URLs of the nodes that are up, by node index.
    pub fn client_urls(&self) -> Vec<Option<String>> {
        self.nodes
            .iter()
            .map(|n| n.as_ref().map(NodeProcess::client_url))
            .collect()
    }

    /// Admin listener addresses of the nodes that are up.
    pub fn admins(&self) -> Vec<(usize, SocketAddr)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n.admin)))
            .collect()
    }

    /// PIDs of the nodes that are up.
    pub fn node_pids(&self) -> Vec<(usize, u32)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n.pid())))
            .collect()
    }

    /// SIGKILLs node `i` (by its own PID) and keeps its log.
    pub fn kill_node(&mut self, i: usize) {
        if let Some(node) = self.nodes.get_mut(i).and_then(Option::take) {
            let _ = Command::new("kill")
                .args(["-9", &node.pid().to_string()])
                .status();
            self.dead_logs.push(node.log());
            drop(node);
        }
    }

    /// Starts node `i` again (new listener ports, same id and mock); waits for `/readyz`.
    pub async fn restart_node(&mut self, i: usize) -> io::Result<()> {
        let base = self.mocks[i].base_url();
        let url = self.redis_url();
        let proxy = self.redis_proxy.addr();
        let node = tokio::task::spawn_blocking(move || node_process(i, &url, proxy, &base))
            .await
            .map_err(io::Error::other)??;
        self.nodes[i] = Some(node);
        Ok(())
    }

    /// SIGKILLs Redis.
    pub fn kill_redis(&mut self) {
        self.redis.kill();
    }

    /// Starts Redis again on its port, from its append-only file.
    pub async fn restart_redis(&mut self) -> io::Result<()> {
        tokio::task::block_in_place(|| self.redis.restart())
    }

    /// Freezes Redis (SIGSTOP): connections stay open and nothing answers.
    pub fn pause_redis(&self) {
        self.redis.pause();
    }

    /// Resumes Redis after [`Topology::pause_redis`].
    pub fn resume_redis(&self) {
        self.redis.resume();
    }

    /// A failover that may lose the last writes (replication is asynchronous): the replica is
    /// promoted, the front proxy sends new connections to it, the old master is SIGKILLed (so
    /// every client's connection drops and reconnects to the new master), and a fresh replica
    /// of the new master is started for the next failover.
    pub async fn fail_over(&mut self) -> io::Result<()> {
        tokio::task::block_in_place(|| {
            let mut promoted = self
                .replica
                .take()
                .ok_or_else(|| io::Error::other("no replica to promote"))?;
            promoted.promote()?;
            self.front.retarget(local(promoted.port));
            let mut old = std::mem::replace(&mut self.redis, promoted);
            old.kill();
            self.front.cut();
            drop(old);
            self.replica = Some(RedisServer::start_replica_of(self.redis.port, &REDIS_ARGS)?);
            Ok(())
        })
    }

    /// Puts the master out of memory (`maxmemory` of 1 byte, `noeviction`: every write answers
    /// `-OOM`, reads and `PING` still work), or gives its memory back (no limit, and
    /// `noeviction`, the default policy it runs with).
    pub async fn set_oom(&self, oom: bool) -> io::Result<()> {
        let port = self.redis.port;
        tokio::task::spawn_blocking(move || -> io::Result<()> {
            let settings: [(&str, &str); 2] = if oom {
                [("maxmemory-policy", "noeviction"), ("maxmemory", "1")]
            } else {
                [("maxmemory", "0"), ("maxmemory-policy", "noeviction")]
            };
            for (name, value) in settings {
                let out = cli(port, &["CONFIG", "SET", name, value])?;
                if out.trim() != "OK" {
                    return Err(io::Error::other(format!(
                        "CONFIG SET {name} {value} on {port}: {out}"
                    )));
                }
            }
            Ok(())
        })
        .await
        .map_err(io::Error::other)?
    }

    /// Kills every client of Redis that has subscribed to a channel (`sub=` above 0 in
    /// `CLIENT LIST`): the nodes' event subscribers, not the checker's observer (which
    /// pattern-subscribes). Returns how many were killed.
    pub async fn kill_subscribers(&self) -> io::Result<usize> {
        let port = self.redis.port;
        tokio::task::spawn_blocking(move || -> io::Result<usize> {
            let list = cli(port, &["CLIENT", "LIST", "TYPE", "pubsub"])?;
            let mut killed = 0;
            for id in channel_subscribers(&list) {
                let out = cli(port, &["CLIENT", "KILL", "ID", &id.to_string()])?;
                killed += out.trim().parse::<usize>().unwrap_or(0);
            }
            Ok(killed)
        })
        .await
        .map_err(io::Error::other)?
    }

    /// Cuts node [`PARTITIONED_NODE`] off from Redis, or heals the cut.
    pub fn partition(&self, cut: bool) {
        if cut {
            // Silence, not refusal: a real partition times out rather than failing fast.
            self.redis_proxy.set_mode(Mode::Blackhole);
            self.redis_proxy.cut();
        } else {
            self.redis_proxy.set_mode(Mode::Pass);
        }
    }

    /// SIGKILLs the coordinator.
    pub fn kill_coordinator(&mut self) {
        if let Some(c) = self.coordinator.take() {
            self.dead_logs.push(c.log());
            drop(c);
        }
    }

    /// Starts the coordinator again.
    pub async fn restart_coordinator(&mut self) -> io::Result<()> {
        let url = self.redis_url();
        let base = self.mocks[0].base_url();
        let c = tokio::task::spawn_blocking(move || {
            start_coordinator(&url, &scenario::node_body(&base))
        })
        .await
        .map_err(io::Error::other)??;
        self.coordinator = Some(c);
        Ok(())
    }

    /// Every log written so far: live nodes, the coordinator and killed processes.
    pub fn all_logs(&self) -> Vec<String> {
        let mut logs = self.dead_logs.clone();
        logs.extend(self.nodes.iter().flatten().map(NodeProcess::log));
        logs.extend(self.coordinator.iter().map(CoordinatorProcess::log));
        logs
    }
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn proxy_url(addr: SocketAddr) -> String {
    format!("redis://{addr}/0")
}

/// Client ids of the `CLIENT LIST` lines whose `sub=` count is above 0.
fn channel_subscribers(list: &str) -> Vec<u64> {
    list.lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            (field("sub=")? > 0).then_some(field("id=")?)
        })
        .collect()
}

fn node_process(
    i: usize,
    redis_url: &str,
    proxy: SocketAddr,
    mock_base: &str,
) -> io::Result<NodeProcess> {
    let url = if i == PARTITIONED_NODE {
        proxy_url(proxy)
    } else {
        redis_url.to_owned()
    };
    let env = scenario::node_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    start_node(
        &format!("node-{i}"),
        &url,
        &scenario::node_body(mock_base),
        &env,
    )
}

#[cfg(test)]
mod tests {
    use super::channel_subscribers;

    #[test]
    fn only_channel_subscribers_are_picked() {
        let list = "id=3 addr=127.0.0.1:5000 name= db=0 sub=1 psub=0 cmd=subscribe\n\
                    id=7 addr=127.0.0.1:5001 name= db=0 sub=0 psub=1 cmd=psubscribe\n\
                    id=9 addr=127.0.0.1:5002 name= db=0 sub=2 psub=0 cmd=subscribe\n";
        assert_eq!(channel_subscribers(list), [3, 9]);
        assert!(channel_subscribers("").is_empty());
    }
}
