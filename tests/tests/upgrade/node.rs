//! A node process of either version: the harness's `NodeProcess` always runs this build's
//! binary, and a rolling upgrade needs the previous release's too. Same config as the cluster
//! tests (`switchyard_tests::cluster::node_config`), listeners on free ports, SIGTERM by PID,
//! SIGKILL on drop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchyard_tests::cluster::{MGMT_KEY, cluster_degraded_async, node_config};
use switchyard_tests::harness::{free_ports, http_get_status};

pub struct Node {
    pub id: String,
    /// `old` or `new`.
    pub version: &'static str,
    child: Child,
    pub client: SocketAddr,
    pub admin: SocketAddr,
    _dir: tempfile::TempDir,
    log_path: PathBuf,
}

impl Node {
    /// Starts `binary` as node `id` in redis mode on `redis_url`; waits up to 20 s for
    /// `/readyz`.
    pub fn start(
        version: &'static str,
        binary: &Path,
        id: &str,
        redis_url: &str,
        body: &str,
        env: &[(String, String)],
    ) -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let [client_port, admin_port] = free_ports()?;
        let client = SocketAddr::from(([127, 0, 0, 1], client_port));
        let admin = SocketAddr::from(([127, 0, 0, 1], admin_port));
        let config = node_config(id, body).replacen(
            "[server]\n",
            &format!("[server]\nlisten = \"{client}\"\nadmin_listen = \"{admin}\"\n"),
            1,
        );
        let cfg_path = dir.path().join("switchyard.toml");
        std::fs::write(&cfg_path, config)?;
        let log_path = dir.path().join("node.log");
        let log = std::fs::File::create(&log_path)?;
        let child = Command::new(binary)
            .arg("--config")
            .arg(&cfg_path)
            .env("RUST_LOG", "info")
            .env("SWITCHYARD_REDIS_URL", redis_url)
            .env("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut node = Self {
            id: id.to_owned(),
            version,
            child,
            client,
            admin,
            _dir: dir,
            log_path,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = node.child.try_wait()? {
                return Err(std::io::Error::other(format!(
                    "exited early ({status}); log:\n{}",
                    node.log()
                )));
            }
            if http_get_status(admin, "/readyz") == Some(200) {
                return Ok(node);
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "not ready within 20 s; log:\n{}",
                    node.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn client_url(&self) -> String {
        format!("http://{}", self.client)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Whether the node is subscribed and not degraded.
    pub async fn synced(&self) -> bool {
        !cluster_degraded_async(self.admin).await
    }

    /// Whether `/readyz` stopped answering 200.
    pub async fn unready(&self) -> bool {
        let admin = self.admin;
        tokio::task::spawn_blocking(move || http_get_status(admin, "/readyz") != Some(200))
            .await
            .unwrap_or(false)
    }

    /// SIGTERM, as the kubelet sends it to a pod being replaced.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
    }

    /// Waits up to `timeout` for the process to exit; its exit code if it did.
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

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
