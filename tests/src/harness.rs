//! Starting real Switchyard processes for black-box tests.
//!
//! Tests talk to the real `switchyard-node` binary over real sockets. [`NodeProcess`] writes a
//! config file into a temporary directory, starts the binary on free loopback ports, waits for
//! `/readyz`, and kills the process (by its PID, which it owns) when dropped.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound and released; good enough for tests on one machine).
pub fn free_port() -> std::io::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// `n` distinct free TCP ports on 127.0.0.1: all are bound at once before any is released, so
/// two calls in a row cannot hand out the same port (which made a node refuse to start with
/// `admin_listen` equal to `listen`).
pub fn free_ports<const N: usize>() -> std::io::Result<[u16; N]> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0u16; N];
    for port in &mut ports {
        let l = TcpListener::bind("127.0.0.1:0")?;
        *port = l.local_addr()?.port();
        listeners.push(l);
    }
    Ok(ports)
}

/// The programs this package builds again under its own names (see the crate docs): the
/// shipped name, and the name of this package's binary that runs the same entry point.
const BUILT_FOR_TESTS: [(&str, &str); 3] = [
    ("switchyard-node", "switchyard-test-node"),
    ("switchyard-coordinator", "switchyard-test-coordinator"),
    ("switchyard-mock-upstream", "switchyard-test-mock-upstream"),
];

/// Environment variable naming a directory that holds the shipped binaries, for runs outside
/// `cargo test` that should use a particular build (for example `switchyard-chaos` against a
/// release build: `SWITCHYARD_BIN_DIR=target/release`).
pub const BIN_DIR_ENV: &str = "SWITCHYARD_BIN_DIR";

/// Path of a Switchyard program for a black-box test, by its shipped name
/// (`switchyard-node`, `switchyard-coordinator`, `switchyard-mock-upstream`).
///
/// In this order:
/// 1. the binary Cargo built for this test run: `CARGO_BIN_EXE_switchyard-test-…`, which
///    `cargo test` and `cargo nextest` set for this package's integration tests (test code
///    can also name it at compile time with `env!`);
/// 2. the shipped binary in [`BIN_DIR_ENV`], when set;
/// 3. this package's binary next to the running executable (`switchyard-chaos` and the
///    benchmarks are built by this package, so it is from the same build), and for any other
///    name the file of that name there.
pub fn workspace_bin(name: &str) -> PathBuf {
    let built = BUILT_FOR_TESTS
        .iter()
        .find(|(shipped, _)| *shipped == name)
        .map(|(_, built)| *built);
    if let Some(built) = built {
        for var in [
            format!("CARGO_BIN_EXE_{built}"),
            format!("NEXTEST_BIN_EXE_{built}"),
        ] {
            if let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) {
                return PathBuf::from(path);
            }
        }
        if let Some(dir) = std::env::var_os(BIN_DIR_ENV).filter(|d| !d.is_empty()) {
            return PathBuf::from(dir).join(name);
        }
    }
    beside_current_exe(built.unwrap_or(name))
}

/// `name` in the directory of the running executable (one level up from a test's `deps/`).
fn beside_current_exe(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join(name)
}

/// A running `switchyard-node`.
pub struct NodeProcess {
    child: Child,
    pub client: SocketAddr,
    pub admin: SocketAddr,
    pub dir: tempfile::TempDir,
    pub log_path: PathBuf,
}

impl NodeProcess {
    /// Starts a node with `config` (TOML, without `[server]` listen addresses: they are added
    /// here on free ports) and extra environment variables; waits up to 15 s for `/readyz`.
    ///
    /// A port handed out by [`free_ports`] can be taken by a parallel test before the node
    /// binds it; such a start ("Address already in use") is retried on fresh ports, up to
    /// three times.
    pub fn start(config: &str, env: &[(&str, &str)]) -> std::io::Result<Self> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(config, env) {
                Err(e) if attempt < 3 && e.to_string().contains("Address already in use") => {
                    continue;
                }
                other => return other,
            }
        }
    }

    fn start_once(config: &str, env: &[(&str, &str)]) -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let [client_port, admin_port] = free_ports()?;
        let client: SocketAddr = format!("127.0.0.1:{client_port}").parse().map_err(io_err)?;
        let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().map_err(io_err)?;
        let full = with_listeners(config, client, admin);
        let cfg_path = dir.path().join("switchyard.toml");
        std::fs::File::create(&cfg_path)?.write_all(full.as_bytes())?;
        let log_path = dir.path().join("node.log");
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = Command::new(workspace_bin("switchyard-node"));
        cmd.arg("--config")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn()?;
        let mut node = Self {
            child,
            client,
            admin,
            dir,
            log_path,
        };
        node.wait_ready(Duration::from_secs(15))?;
        Ok(node)
    }

    fn wait_ready(&mut self, timeout: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Err(std::io::Error::other(format!(
                    "switchyard-node exited early ({status}); log:\n{}",
                    self.log()
                )));
            }
            if http_get_status(self.admin, "/readyz") == Some(200) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(std::io::Error::other(format!(
            "node not ready in time; log:\n{}",
            self.log()
        )))
    }

    /// `http://127.0.0.1:PORT` of the client listener.
    pub fn client_url(&self) -> String {
        format!("http://{}", self.client)
    }

    /// `http://127.0.0.1:PORT` of the admin listener.
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
    }

    /// Everything the node wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The log once `ready` accepts it, or as it is after `timeout`. The node writes log lines
    /// from a background thread, so a line may land a moment after the response it describes.
    pub fn wait_for_log(&self, timeout: Duration, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log();
            if ready(&log) || Instant::now() >= deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The child's PID (for signals in lifecycle tests).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit, up to `timeout`; returns its exit code if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Inserts `listen` / `admin_listen` into the config's `[server]` table (creating it).
fn with_listeners(config: &str, client: SocketAddr, admin: SocketAddr) -> String {
    let lines = format!("listen = \"{client}\"\nadmin_listen = \"{admin}\"\n");
    if let Some(pos) = config.find("[server]\n") {
        let at = pos + "[server]\n".len();
        format!("{}{}{}", &config[..at], lines, &config[at..])
    } else {
        format!("[server]\n{lines}\n{config}")
    }
}

/// A minimal blocking HTTP/1.1 GET returning the status code (no client library needed).
pub fn http_get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    use std::io::Read as _;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = std::str::from_utf8(&buf[..n]).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_are_inserted_into_server_table() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let out = with_listeners("[server]\nmax_body_bytes = 10\n", a, b);
        assert!(out.starts_with("[server]\nlisten = \"127.0.0.1:1\"\nadmin_listen"));
        let out = with_listeners("[auth]\n", a, b);
        assert!(out.starts_with("[server]\nlisten"));
        assert!(free_port().unwrap() > 0);
        let [a, b] = free_ports().unwrap();
        assert_ne!(a, b);
    }
}
