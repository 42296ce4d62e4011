//! A real `redis-server` per test, on a free loopback port, that the test can kill, restart,
//! pause (SIGSTOP) and resume, optionally as a replica of another one that it can take over
//! from (`promote`).
//!
//! Tests never use a Redis that happens to be running on the machine: they start their own so
//! they can cut it off. The server runs without persistence (`--save ''`, `--appendonly no`)
//! from a temporary directory; it is killed (by the PID we started) when dropped.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::free_port;
use crate::redis_topology::cli;

/// A `redis-server` child process.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    extra_args: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it accepts connections.
    pub fn start() -> std::io::Result<Self> {
        Self::start_with(&[])
    }

    /// Starts a server with extra command-line arguments (e.g. `--requirepass x`).
    pub fn start_with(extra_args: &[&str]) -> std::io::Result<Self> {
        let mut server = Self {
            child: None,
            port: free_port()?,
            dir: tempfile::tempdir()?,
            extra_args: extra_args.iter().map(|s| (*s).to_owned()).collect(),
        };
        server.spawn()?;
        Ok(server)
    }

    /// Starts a replica of the server on `master_port` (`--replicaof`), with extra arguments,
    /// and waits until its first sync with the master is done.
    pub fn start_replica_of(master_port: u16, extra_args: &[&str]) -> std::io::Result<Self> {
        let master = master_port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", master.as_str()];
        args.extend_from_slice(extra_args);
        let server = Self::start_with(&args)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let info = cli(server.port, &["INFO", "replication"])?;
            if info.contains("master_link_status:up") {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "replica on {} did not sync with {master_port} within 10 s",
                server.port
            ),
        ))
    }

    /// Promotes a replica to master (`REPLICAOF NO ONE`); a later [`RedisServer::restart`]
    /// starts it as a master too.
    pub fn promote(&mut self) -> std::io::Result<()> {
        let out = cli(self.port, &["REPLICAOF", "NO", "ONE"])?;
        if !out.trim().eq_ignore_ascii_case("OK") {
            return Err(std::io::Error::other(format!(
                "REPLICAOF NO ONE on {}: {out}",
                self.port
            )));
        }
        if let Some(i) = self.extra_args.iter().position(|a| a == "--replicaof") {
            let end = (i + 3).min(self.extra_args.len());
            self.extra_args.drain(i..end);
        }
        Ok(())
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL) and waits for it to exit. Data is lost (no persistence).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port after [`RedisServer::kill`].
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.spawn()
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Resumes a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
        }
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let binary = std::env::var_os("REDIS_SERVER")
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
        let mut cmd = Command::new(binary);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            // A replica's first sync starts at once: Redis 7 otherwise waits 5 s for more
            // replicas to share a diskless transfer, which every replicated topology paid.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(cmd.spawn()?);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("redis-server did not listen on {} within 10 s", self.port),
        ))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL ends a paused (SIGSTOP) server too.
        self.kill();
    }
}
