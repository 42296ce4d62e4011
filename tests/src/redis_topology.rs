//! Production Redis topologies for failover tests: a local Redis Cluster (masters, optionally
//! with replicas) and a Sentinel setup (one master, one replica, one sentinel), all real
//! `redis-server` processes on free loopback ports, killed by the PIDs started here when
//! dropped.
//!
//! Why: Kubernetes deployments run Redis behind Sentinel or as a Redis Cluster, and a failover
//! is a fault the cluster state must survive. Nothing here uses a Redis that happens to run on
//! the machine.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fault_proxy::FaultProxy;
use crate::redis_server::RedisServer;

/// Name the sentinel monitors the master under.
pub const SENTINEL_MASTER: &str = "switchyard";
/// How long the test sentinel waits before it declares an unanswering master down.
const SENTINEL_DOWN_AFTER_MS: u64 = 1_000;

fn redis_server_binary() -> PathBuf {
    std::env::var_os("REDIS_SERVER").map_or_else(|| PathBuf::from("redis-server"), PathBuf::from)
}

fn redis_cli_binary() -> PathBuf {
    std::env::var_os("REDIS_CLI").map_or_else(|| PathBuf::from("redis-cli"), PathBuf::from)
}

fn timed_out(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what)
}

/// A free port whose cluster bus port (`port + 10000`) is free too.
fn free_cluster_port() -> std::io::Result<u16> {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::other(
        "no port pair free for a cluster node",
    ))
}

fn wait_listening(port: u16) -> std::io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(timed_out(format!("nothing listened on {port} within 10 s")))
}

/// `redis-cli -p PORT ARGS…`, its stdout.
pub fn cli(port: u16, args: &[&str]) -> std::io::Result<String> {
    let out = Command::new(redis_cli_binary())
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Polls `check` every 50 ms until it is true or `within` passed.
fn wait_for(within: Duration, what: &str, mut check: impl FnMut() -> bool) -> std::io::Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(timed_out(format!("{what} within {within:?}")))
}

/// A process started here, killed (SIGKILL) by its PID on drop.
struct Owned(Option<Child>);

impl Owned {
    fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Redis Cluster, slots spread by `redis-cli --cluster create`.
pub struct RedisCluster {
    nodes: Vec<Owned>,
    pub ports: Vec<u16>,
    _dirs: Vec<tempfile::TempDir>,
}

/// One line of `CLUSTER NODES`: a node's port, role, health and slots.
#[derive(Debug, Clone)]
struct NodeLine {
    id: String,
    port: u16,
    master: bool,
    failed: bool,
    master_id: String,
    slots: Vec<(u16, u16)>,
}

fn parse_cluster_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let addr = f.get(1)?;
            let port = addr
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
            Some(NodeLine {
                id: (*f.first()?).to_owned(),
                port,
                master: flags.contains("master"),
                failed: flags.contains("fail"),
                master_id: (*f.get(3)?).to_owned(),
                slots,
            })
        })
        .collect()
}

impl RedisCluster {
    /// Starts `masters` (at least 3) cluster-enabled servers without replicas and joins them;
    /// returns once every node reports `cluster_state:ok`.
    pub fn start(masters: usize) -> std::io::Result<Self> {
        Self::start_with(masters.max(3), 0, 2000)
    }

    /// Starts 3 masters with one replica each (6 servers; a node is failed after 1 s without
    /// an answer, so a replica is promoted within a few seconds of its master's death).
    pub fn start_with_replicas() -> std::io::Result<Self> {
        Self::start_with(3, 1, 1000)
    }

    fn start_with(masters: usize, replicas: usize, node_timeout_ms: u64) -> std::io::Result<Self> {
        let mut cluster = Self {
            nodes: Vec::new(),
            ports: Vec::new(),
            _dirs: Vec::new(),
        };
        for _ in 0..masters * (1 + replicas) {
            let port = free_cluster_port()?;
            let dir = tempfile::tempdir()?;
            let child = Command::new(redis_server_binary())
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                .args(["--cluster-node-timeout", &node_timeout_ms.to_string()])
                .args(["--save", "", "--appendonly", "no"])
                // Replicas sync at once, not after Redis 7's 5 s wait for more of them.
                .args(["--repl-diskless-sync-delay", "0"])
                .arg("--dir")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            cluster.nodes.push(Owned(Some(child)));
            cluster.ports.push(port);
            cluster._dirs.push(dir);
            wait_listening(port)?;
        }
        let addrs: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let status = Command::new(redis_cli_binary())
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli --cluster create failed: {status}"
            )));
        }
        for &port in &cluster.ports {
            wait_for(Duration::from_secs(20), "cluster_state:ok", || {
                cli(port, &["CLUSTER", "INFO"]).is_ok_and(|s| s.contains("cluster_state:ok"))
            })?;
        }
        if replicas > 0 {
            let expected = masters * replicas;
            let first = cluster.ports[0];
            wait_for(Duration::from_secs(20), "every replica linked", || {
                let linked = cluster
                    .ports
                    .iter()
                    .filter(|&&p| {
                        cli(p, &["INFO", "replication"]).is_ok_and(|s| {
                            s.contains("role:slave") && s.contains("master_link_status:up")
                        })
                    })
                    .count();
                linked == expected
                    && cli(first, &["CLUSTER", "NODES"])
                        .is_ok_and(|s| parse_cluster_nodes(&s).iter().all(|n| !n.failed))
            })?;
        }
        Ok(cluster)
    }

    /// `redis+cluster://127.0.0.1:P1,…/` with every node as a seed.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// [`RedisCluster::url`] with the node on `first` as the first seed (a node's subscriber
    /// starts there).
    pub fn url_from(&self, first: u16) -> String {
        let mut ports = self.ports.clone();
        ports.sort_by_key(|&p| p != first);
        let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// `CLUSTER NODES` as seen by the first live node.
    fn nodes_view(&self) -> Vec<NodeLine> {
        self.live_ports()
            .into_iter()
            .find_map(|p| {
                cli(p, &["CLUSTER", "NODES"])
                    .ok()
                    .filter(|s| !s.trim().is_empty())
            })
            .map(|s| parse_cluster_nodes(&s))
            .unwrap_or_default()
    }

    /// Ports of the nodes not killed here.
    pub fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .zip(&self.ports)
            .filter(|(n, _)| n.0.is_some())
            .map(|(_, p)| *p)
            .collect()
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> Option<u16> {
        let port = *self.live_ports().first()?;
        cli(port, &["CLUSTER", "KEYSLOT", key])
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The port of the live master serving `slot`.
    pub fn master_of(&self, slot: u16) -> Option<u16> {
        self.nodes_view()
            .into_iter()
            .find(|n| n.master && !n.failed && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            .map(|n| n.port)
    }

    /// The ports of the replicas of the master on `port`.
    pub fn replicas_of(&self, port: u16) -> Vec<u16> {
        let view = self.nodes_view();
        let Some(id) = view.iter().find(|n| n.port == port).map(|n| n.id.clone()) else {
            return Vec::new();
        };
        view.iter()
            .filter(|n| n.master_id == id)
            .map(|n| n.port)
            .collect()
    }

    /// Kills (SIGKILL) the master serving `slot` and waits until one of its replicas serves
    /// the slot as master and every live node reports `cluster_state:ok`. Returns the killed
    /// port and the promoted one.
    pub fn fail_over_slot(&mut self, slot: u16) -> std::io::Result<(u16, u16)> {
        let old = self
            .master_of(slot)
            .ok_or_else(|| std::io::Error::other(format!("no master serves slot {slot}")))?;
        let replicas = self.replicas_of(old);
        if replicas.is_empty() {
            return Err(std::io::Error::other(format!(
                "master {old} has no replica"
            )));
        }
        if let Some(i) = self.ports.iter().position(|&p| p == old) {
            self.kill(i);
        }
        let mut promoted = None;
        wait_for(Duration::from_secs(30), "a replica promoted", || {
            promoted = self.master_of(slot).filter(|p| replicas.contains(p));
            promoted.is_some_and(|p| cli(p, &["ROLE"]).is_ok_and(|s| s.starts_with("master")))
                && self.live_ports().iter().all(|&p| {
                    cli(p, &["CLUSTER", "INFO"]).is_ok_and(|s| s.contains("cluster_state:ok"))
                })
        })?;
        promoted
            .map(|p| (old, p))
            .ok_or_else(|| std::io::Error::other("no replica promoted"))
    }

    /// `redis://127.0.0.1:PORT` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// Kills node `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        if let Some(node) = self.nodes.get_mut(i) {
            node.kill();
        }
    }
}

/// One master, one replica and one sentinel watching them (quorum 1, down after 1 s).
pub struct RedisSentinel {
    pub master: RedisServer,
    pub replica: RedisServer,
    sentinel: Owned,
    pub sentinel_port: u16,
    _dir: tempfile::TempDir,
}

impl RedisSentinel {
    /// Starts the three processes and returns once the replica is in sync and the sentinel
    /// knows it.
    pub fn start() -> std::io::Result<Self> {
        Ok(Self::start_with(SENTINEL_DOWN_AFTER_MS, false)?.0)
    }

    /// As [`RedisSentinel::start`], with the replica fed through a [`FaultProxy`], so a test
    /// can stall replication (`Mode::Blackhole`) and make the sentinel promote a replica that
    /// lacks the master's last writes, as asynchronous replication can; and the sentinel
    /// declaring the master down after `down_after_ms`.
    pub fn start_stallable(down_after_ms: u64) -> std::io::Result<(Self, FaultProxy)> {
        let (topo, proxy) = Self::start_with(down_after_ms, true)?;
        let proxy = proxy.ok_or_else(|| std::io::Error::other("no replication proxy"))?;
        Ok((topo, proxy))
    }

    fn start_with(
        down_after_ms: u64,
        proxied: bool,
    ) -> std::io::Result<(Self, Option<FaultProxy>)> {
        let master = RedisServer::start()?;
        let master_port = master.port.to_string();
        let proxy = if proxied {
            let addr = format!("127.0.0.1:{master_port}")
                .parse()
                .map_err(std::io::Error::other)?;
            Some(FaultProxy::start(addr)?)
        } else {
            None
        };
        let upstream_port = proxy
            .as_ref()
            .map_or(master_port.clone(), |p| p.addr().port().to_string());
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &upstream_port])?;
        wait_for(Duration::from_secs(20), "replica in sync", || {
            cli(replica.port, &["INFO", "replication"])
                .is_ok_and(|s| s.contains("master_link_status:up"))
        })?;
        let sentinel_port = crate::harness::free_port()?;
        let dir = tempfile::tempdir()?;
        // A sentinel rewrites its config file, so it gets its own in a temporary directory.
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {sentinel_port}\nbind 127.0.0.1\ndir {dir}\n\
                 sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {SENTINEL_MASTER} {down_after_ms}\n\
                 sentinel failover-timeout {SENTINEL_MASTER} 10000\n\
                 sentinel parallel-syncs {SENTINEL_MASTER} 1\n",
                dir = dir.path().display()
            ),
        )?;
        let child = Command::new(redis_server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let sentinel = Owned(Some(child));
        wait_listening(sentinel_port)?;
        let replica_port = replica.port.to_string();
        wait_for(Duration::from_secs(20), "sentinel sees the replica", || {
            cli(sentinel_port, &["SENTINEL", "replicas", SENTINEL_MASTER])
                .is_ok_and(|s| s.contains(&replica_port))
        })?;
        Ok((
            Self {
                master,
                replica,
                sentinel,
                sentinel_port,
                _dir: dir,
            },
            proxy,
        ))
    }

    /// `redis+sentinel://127.0.0.1:SENTINEL/switchyard`.
    pub fn url(&self) -> String {
        format!(
            "redis+sentinel://127.0.0.1:{}/{SENTINEL_MASTER}",
            self.sentinel_port
        )
    }

    /// The port of the master as the sentinel currently reports it.
    pub fn master_port(&self) -> Option<u16> {
        let out = cli(
            self.sentinel_port,
            &["SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER],
        )
        .ok()?;
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// Kills the master (SIGKILL) and waits until the sentinel has promoted the replica.
    pub fn fail_over(&mut self) -> std::io::Result<()> {
        self.master.kill();
        let replica = self.replica.port;
        wait_for(Duration::from_secs(30), "the replica promoted", || {
            self.master_port() == Some(replica)
                && cli(replica, &["ROLE"]).is_ok_and(|s| s.starts_with("master"))
        })
    }

    /// Stops the sentinel early (it is also stopped on drop).
    pub fn stop_sentinel(&mut self) {
        self.sentinel.kill();
    }
}
