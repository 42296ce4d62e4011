//! A minimal W3C WebDriver client over chromedriver, for the dashboard's real-browser test.
//!
//! Why not a browser-automation crate: the test needs six commands (new session, navigate,
//! find, type, click, run a script, screenshot), which are plain JSON over HTTP; Debian ships
//! `chromium` and a matching `chromium-driver`, so nothing is downloaded at test time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::free_port;

/// A chromedriver process and one headless Chromium session.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver (`CHROMEDRIVER`, default `chromedriver`) and a headless session of
    /// Chromium (`CHROMIUM`, default `/usr/bin/chromium`).
    pub async fn start() -> Self {
        let driver_bin = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        assert!(
            Path::new(&chromium).exists(),
            "{chromium} not found: install Debian's `chromium` and `chromium-driver`"
        );
        let port = free_port().unwrap();
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {driver_bin}: {e}"));
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let up = super::eventually(Duration::from_secs(20), || async {
            http.get(format!("{base}/status"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        assert!(up, "chromedriver did not start");
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,1000",
                         "--no-first-run", "--no-default-browser-check",
                         format!("--user-data-dir={}", profile.path().display())],
            }
        }}});
        let mut browser = Self {
            driver,
            base,
            session: String::new(),
            http,
            _profile: profile,
        };
        let v = browser.cmd("POST", "/session", caps).await;
        browser.session = v["sessionId"].as_str().expect("session id").to_owned();
        browser
    }

    async fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method.clone(), &url);
        if method != reqwest::Method::GET {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let v: Value = resp.json().await.unwrap();
        assert!(status.is_success(), "webdriver {path}: {status} {v}");
        v["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", json!({"url": url})).await;
    }

    async fn find(&self, css: &str) -> String {
        let v = self
            .cmd(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        match v
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
        {
            Some(id) => id.to_owned(),
            None => panic!("no element for {css}: {v}"),
        }
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            json!({"text": text}),
        )
        .await;
    }

    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.cmd("POST", &format!("/element/{id}/click"), json!({}))
            .await;
    }

    /// Runs `script` (a function body that `return`s) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// Polls `script` until it returns `want`, for at most `timeout`; the last value otherwise.
    pub async fn wait_for(&self, script: &str, want: &Value, timeout: Duration) -> Value {
        let found = super::eventually(timeout, || async {
            let v = self.eval(script).await;
            (&v == want).then_some(v)
        })
        .await;
        match found {
            Some(v) => v,
            None => self.eval(script).await,
        }
    }

    /// Saves a PNG screenshot of the page to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let v = self.cmd("GET", "/screenshot", Value::Null).await;
        let png = base64_decode(v.as_str().expect("base64 screenshot"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Killing chromedriver alone orphans the session's Chromium (it kept running, and
        // using CPU, after the test): end the session first, which quits the browser. Drop
        // cannot await, so this is one blocking HTTP/1.1 request with short timeouts.
        if !self.session.is_empty() {
            let _ = delete_session(&self.base, &self.session);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `DELETE /session/{id}`; returns once chromedriver answers (it quits the browser first).
fn delete_session(base: &str, session: &str) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    write!(
        conn,
        "DELETE /session/{session} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = Vec::new();
    conn.read_to_end(&mut reply)?;
    Ok(())
}

/// Where test artifacts go: `target/browser-artifacts/`.
pub fn artifact_dir() -> PathBuf {
    let bin = switchyard_tests::harness::workspace_bin("x");
    let target = bin
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    target.join("browser-artifacts")
}

fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter_map(value) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
