//! `switchyard-node demo`, as the README tells a new user to try it, and the line between the
//! demo and the production binary:
//!
//! - the demo starts, prints a banner with a `curl`, and what the banner promises holds when
//!   that request is sent, and sent again (the connection that answers, the number of
//!   attempts, the failing connection's cooldown and the metric that counts it);
//! - the node built without default features (as the release image is) has neither the mock
//!   nor the test crate nor hyper's server in its dependency tree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_tests::harness::{free_ports, http_get_status, workspace_bin};

/// Kills the demo (by the PID this test owns) when the test ends, whatever the outcome.
struct Demo {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// The thread copying the demo's stderr; joined when the demo exits early, so the panic
    /// shows what it said (it ends when the pipe closes).
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    fn start(port: u16, admin_port: u16) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-test-node"))
            .args(["demo", "--port", &port.to_string()])
            .args(["--admin-port", &admin_port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Self {
            child,
            stderr,
            reader: Some(reader),
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the banner's last line; the banner is printed once both listeners serve.
    fn wait_for_banner(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.stderr();
            if text.contains("Switchyard demo is up") && text.contains("/metrics |") {
                return text;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                // What it wrote last may still be in the pipe: read it to the end first.
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                panic!(
                    "the demo exited ({status}) before its banner:\n{}",
                    self.stderr()
                );
            }
            assert!(Instant::now() < deadline, "no banner in time:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// What the banner tells the user to run and to look for.
#[derive(Debug)]
struct Banner {
    /// The client request's URL and body (`curl … URL … -d 'BODY'`).
    url: String,
    body: String,
    /// `x-switchyard-connection (…)` and `x-switchyard-attempts (…)`, in the order the banner
    /// names them: the first request, then the same request again.
    connections: Vec<String>,
    attempts: Vec<u32>,
    /// How long the failing connection cools, in seconds (`… for N s`).
    cooldown_s: u64,
    /// The metrics URL of the admin listener and the family to look for.
    metrics_url: String,
    metric: String,
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(&text[from..from + len])
}

/// Every `start…end` in `text`, in order.
fn all_between(text: &str, start: &str, end: &str) -> Vec<String> {
    text.split(start)
        .skip(1)
        .filter_map(|rest| rest.split_once(end).map(|(v, _)| v.to_owned()))
        .collect()
}

fn parse_banner(text: &str) -> Banner {
    let curl = &text[text.find("curl -s -i ").expect("a curl line")..];
    let url = curl
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL in the curl line")
        .to_owned();
    let metrics_curl = &text[text.find("curl -s http").expect("a metrics curl")..];
    Banner {
        url,
        body: between(curl, "-d '", "'").expect("a -d body").to_owned(),
        connections: all_between(text, "x-switchyard-connection (", ")"),
        attempts: all_between(text, "x-switchyard-attempts (", ")")
            .iter()
            .map(|n| n.parse().unwrap())
            .collect(),
        cooldown_s: between(text, "` for ", " s")
            .expect("the cooldown's length")
            .parse()
            .unwrap(),
        metrics_url: metrics_curl
            .split_whitespace()
            .nth(2)
            .expect("the metrics URL")
            .to_owned(),
        metric: between(metrics_curl, "grep '^", "'")
            .expect("the metric to grep")
            .to_owned(),
    }
}

#[test]
fn the_banner_parser_reads_every_promise() {
    let text = "up\n  curl -s -i http://127.0.0.1:1/v1/x -H 'a: b' \\\n    -d '{\"k\":1}'\n\
                Look at x-switchyard-connection (c-1) and x-switchyard-attempts (2): cools `c` for 60 s,\n\
                again x-switchyard-connection (c-2), x-switchyard-attempts (1). Counted:\n\n  \
                curl -s http://127.0.0.1:2/metrics | grep '^m_total'\n";
    let b = parse_banner(text);
    assert_eq!(b.url, "http://127.0.0.1:1/v1/x");
    assert_eq!(b.body, "{\"k\":1}");
    assert_eq!(b.connections, ["c-1", "c-2"]);
    assert_eq!(b.attempts, [2, 1]);
    assert_eq!(b.cooldown_s, 60);
    assert_eq!(b.metrics_url, "http://127.0.0.1:2/metrics");
    assert_eq!(b.metric, "m_total");
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_does_what_its_banner_says() {
    let [port, admin_port] = free_ports().unwrap();
    let mut demo = Demo::start(port, admin_port);
    let (demo, text) = tokio::task::spawn_blocking(move || {
        let text = demo.wait_for_banner(Duration::from_secs(60));
        (demo, text)
    })
    .await
    .unwrap();
    let admin: std::net::SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
    assert_eq!(http_get_status(admin, "/readyz"), Some(200), "{text}");
    let banner = parse_banner(&text);
    assert!(
        banner.url.starts_with(&format!("http://127.0.0.1:{port}/"))
            && banner.metrics_url == format!("http://127.0.0.1:{admin_port}/metrics"),
        "the banner must use the ports asked for: {banner:?}"
    );
    assert_eq!(
        (banner.connections.len(), banner.attempts.len()),
        (2, 2),
        "the banner promises two requests' headers: {banner:?}"
    );

    let client = reqwest::Client::new();
    let send = || {
        client
            .post(&banner.url)
            .header("content-type", "application/json")
            .body(banner.body.clone())
            .send()
    };

    // The first request: `flaky` answers 503, `healthy` answers.
    let first = send().await.unwrap();
    let first_done = Instant::now();
    assert_eq!(first.status(), 200, "{}", demo.stderr());
    assert_eq!(
        (
            header(&first, "x-switchyard-connection"),
            header(&first, "x-switchyard-attempts")
        ),
        (
            banner.connections[0].clone(),
            banner.attempts[0].to_string()
        ),
        "first request"
    );

    // The same request again, within the cooldown: `flaky` is skipped without an attempt.
    let again = send().await.unwrap();
    assert_eq!(again.status(), 200, "{}", demo.stderr());
    let got = (
        header(&again, "x-switchyard-connection"),
        header(&again, "x-switchyard-attempts"),
    );
    // The promise is "within that time"; on a machine so slow that the cooldown has already
    // run out, it does not apply (the bound is the feature, and it is 60 s).
    if first_done.elapsed() < Duration::from_secs(banner.cooldown_s) {
        assert_eq!(
            got,
            (
                banner.connections[1].clone(),
                banner.attempts[1].to_string()
            ),
            "the same request again within the cooldown"
        );
    } else {
        eprintln!("SKIPPED the repeat check: the cooldown ran out between the two requests");
    }

    // The admin listener counts the one cooldown of `flaky`.
    let metrics = client
        .get(&banner.metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let flaky_cooldowns: f64 = metrics
        .lines()
        .filter(|l| l.starts_with(&banner.metric) && l.contains("provider=\"flaky\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(
        flaky_cooldowns, 1.0,
        "one failure, one cooldown of flaky in {}:\n{metrics}",
        banner.metric
    );
    drop(demo);
}

#[test]
fn the_harness_starts_the_binaries_built_for_this_test_run() {
    for (shipped, built) in [
        (
            "switchyard-node",
            env!("CARGO_BIN_EXE_switchyard-test-node"),
        ),
        (
            "switchyard-coordinator",
            env!("CARGO_BIN_EXE_switchyard-test-coordinator"),
        ),
        (
            "switchyard-mock-upstream",
            env!("CARGO_BIN_EXE_switchyard-test-mock-upstream"),
        ),
    ] {
        assert_eq!(
            workspace_bin(shipped),
            std::path::PathBuf::from(built),
            "{shipped}"
        );
    }
}

/// `cargo tree` lines (`--prefix depth`, `{p} {f}`) as (depth, package name, features).
fn tree(args: &[&str]) -> Option<Vec<(u32, String, Vec<String>)>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(["tree", "-p", "switchyard-node", "-e", "normal"])
        .args(["--prefix", "depth", "-f", "{p} {f}"])
        .args(args)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = text
        .lines()
        .map(|line| {
            let digits: String = line.chars().take_while(char::is_ascii_digit).collect();
            let rest = &line[digits.len()..];
            // `name vVERSION [(path)] [features] [(*)]`
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = words.first().copied().unwrap_or_default().to_owned();
            let features = words
                .iter()
                .skip(2)
                .filter(|w| !w.starts_with('('))
                .flat_map(|w| w.split(','))
                .map(str::to_owned)
                .collect();
            (digits.parse().unwrap_or(0), name, features)
        })
        .collect();
    Some(rows)
}

/// What must not be in the production node: the mock and the test crate, hyper's server,
/// `tempfile`, and `socket2` as a dependency of the node's own (it still arrives through
/// actix-web's and tokio's listeners, which the node needs).
fn test_code_in(rows: &[(u32, String, Vec<String>)]) -> Vec<String> {
    rows.iter()
        .filter(|(depth, name, features)| {
            matches!(
                name.as_str(),
                "switchyard-mock" | "switchyard-tests" | "tempfile"
            ) || (name == "hyper" && features.iter().any(|f| f == "server"))
                || (name == "socket2" && *depth == 1)
        })
        .map(|(depth, name, features)| format!("{depth} {name} {}", features.join(",")))
        .collect()
}

#[test]
fn the_node_without_default_features_carries_no_test_code() {
    let Some(production) = tree(&["--no-default-features"]) else {
        // Fails here under CI; elsewhere a loud skip.
        switchyard_tests::prerequisite::require(
            "the_node_without_default_features_carries_no_test_code",
            Some("`cargo` (to run `cargo tree`)"),
            "rustup (https://rustup.rs), or set CARGO to the cargo binary",
        );
        return;
    };
    assert!(
        production.iter().any(|(_, n, _)| n == "actix-web"),
        "cargo tree printed too little: {production:?}"
    );
    assert_eq!(
        test_code_in(&production),
        Vec::<String>::new(),
        "switchyard-node --no-default-features pulls test code"
    );
    // The check itself can fail: with its default features (the demo) the node does have the
    // mock and hyper's server.
    let with_demo = tree(&[]).expect("cargo ran a moment ago");
    let found = test_code_in(&with_demo);
    assert!(
        found.iter().any(|r| r.contains("switchyard-mock"))
            && found.iter().any(|r| r.contains("hyper")),
        "the demo build should show the mock and hyper's server: {found:?}"
    );
}
