//! Python virtualenvs for tests that drive real Python tools (the official SDKs, the OpenAPI
//! validator).
//!
//! A virtualenv lives under the cargo target directory, next to `target/debug`, named by the
//! test, and is rebuilt only when its requirements file changes (the file's content is kept
//! as a marker inside the env), so only the first run pays for `pip install`. A missing
//! `python3` or `venv` module is a failure with a clear message, not a skip: CI installs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::workspace_bin;

/// How long `pip install` may take on a cold cache.
pub const PIP_LIMIT: Duration = Duration::from_secs(300);

/// `target/<name>` (next to `target/debug`).
pub fn venv_dir(name: &str) -> PathBuf {
    let bin = workspace_bin("switchyard-node");
    let profile_dir = bin.parent().map(Path::to_path_buf).unwrap_or_default();
    profile_dir.parent().unwrap_or(&profile_dir).join(name)
}

/// Runs a command to completion within `limit`, returning (success, combined output). A
/// command that cannot start is `(false, why)`.
pub fn run(cmd: &mut Command, limit: Duration, what: &str) -> (bool, String) {
    let out_dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return (false, format!("{what}: no temporary directory: {e}")),
    };
    let log_path = out_dir.path().join("out.log");
    let spawned = std::fs::File::create(&log_path).and_then(|log| {
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return (false, format!("{what}: cannot start {cmd:?}: {e}")),
    };
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => return (false, format!("{what}: wait failed: {e}")),
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    match status {
        Some(s) => (s.success(), output),
        None => (false, format!("{what} timed out after {limit:?}\n{output}")),
    }
}

/// The python of virtualenv `target/<name>` with `requirements` installed, creating or
/// rebuilding the env when needed. The error says what to install.
pub fn ensure_venv(name: &str, requirements: &Path) -> Result<PathBuf, String> {
    let (ok, out) = run(
        Command::new("python3").arg("--version"),
        Duration::from_secs(30),
        "python3",
    );
    if !ok {
        return Err(format!(
            "python3 is required (install python3 and python3-venv): {out}"
        ));
    }
    let venv = venv_dir(name);
    let python = venv.join("bin").join("python");
    let wanted = std::fs::read_to_string(requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let marker = venv.join(".switchyard-requirements");
    let ready =
        || python.exists() && std::fs::read_to_string(&marker).ok().as_deref() == Some(&wanted);
    if ready() {
        return Ok(python);
    }
    // nextest runs tests in parallel processes: two of them building the same env would
    // delete each other's half-made files. The second waits for the first, then finds it ready.
    let _lock = VenvLock::acquire(&venv)?;
    if ready() {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&venv);
    let (ok, out) = run(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        Duration::from_secs(120),
        "python3 -m venv",
    );
    if !ok {
        return Err(format!(
            "`python3 -m venv {}` failed; install python3-venv (CI does): {out}",
            venv.display()
        ));
    }
    let (ok, out) = run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                "-r",
            ])
            .arg(requirements),
        PIP_LIMIT,
        "pip install",
    );
    if !ok {
        return Err(format!(
            "pip install -r {} failed: {out}",
            requirements.display()
        ));
    }
    std::fs::write(&marker, &wanted).map_err(|e| format!("venv marker: {e}"))?;
    Ok(python)
}

/// A lock file next to a virtualenv, held while the env is built; removed on drop. A lock older
/// than [`VenvLock::STALE`] was left by a killed process and is taken over.
struct VenvLock(PathBuf);

impl VenvLock {
    const STALE: Duration = Duration::from_secs(600);

    fn acquire(venv: &Path) -> Result<Self, String> {
        let path = venv.with_extension("lock");
        let deadline = Instant::now() + PIP_LIMIT + Duration::from_secs(180);
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Self::STALE);
                    if stale {
                        let _ = std::fs::remove_file(&path);
                        continue;
                    }
                    if Instant::now() >= deadline {
                        return Err(format!(
                            "another test has held {} for too long",
                            path.display()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
    }
}

impl Drop for VenvLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
