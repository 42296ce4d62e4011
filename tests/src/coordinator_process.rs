//! A real `switchyard-coordinator` process on a free loopback port, for black-box tests and
//! the chaos runner: started from a config text with extra environment, waited for until
//! `/healthz` answers, killed (SIGKILL) when dropped.

use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{free_port, http_get_status, workspace_bin};

/// A running coordinator.
pub struct CoordinatorProcess {
    child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub log_path: PathBuf,
}

impl CoordinatorProcess {
    /// Writes `config` to a temporary file and starts the coordinator on it with `env`
    /// (`RUST_LOG=info`; any inherited listen address is removed). Waits up to 20 s for
    /// `/healthz`.
    pub fn start(config: &str, env: &[(&str, &str)]) -> io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let cfg = dir.path().join("switchyard.toml");
        std::fs::File::create(&cfg)?.write_all(config.as_bytes())?;
        let log_path = dir.path().join("coordinator.log");
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = Command::new(workspace_bin("switchyard-coordinator"));
        cmd.arg("--config")
            .arg(&cfg)
            .arg("--listen")
            .arg(addr.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .env_remove("SWITCHYARD_COORDINATOR_LISTEN")
            .env_remove("SWITCHYARD_REDIS_URL")
            .env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "coordinator exited early ({status}): {}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                )));
            }
            if http_get_status(addr, "/healthz") == Some(200) {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "coordinator not up within 20 s: {}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self {
            child,
            addr,
            dir,
            log_path,
        })
    }

    /// Everything the coordinator logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for CoordinatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
