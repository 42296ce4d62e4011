//! `switchyard-coordinator status`: the cluster health as a compact terminal table.
//!
//! It asks a running coordinator (`--url`, default from the config's listen address or
//! `http://127.0.0.1:9100`) for `/api/cluster/health` with the management key from the
//! environment, and prints the table, or the raw document with `--json`. The exit code says
//! the status: 0 ok, 1 degraded, 2 down, 3 the coordinator could not be asked.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

/// Fetches the document. Errors are one line for the terminal.
pub async fn fetch(url: &str, key: Option<&str>) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let endpoint = format!("{}/api/cluster/health", url.trim_end_matches('/'));
    let mut req = client.get(&endpoint);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("cannot reach {endpoint}: {e}"))?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .await
        .map_err(|e| format!("{endpoint} answered {status} without JSON: {e}"))?;
    if !status.is_success() {
        let msg = body["error"]["message"].as_str().unwrap_or("error");
        return Err(format!("{endpoint} answered {status}: {msg}"));
    }
    Ok(body)
}

/// Runs the command and maps the status to the exit code.
pub fn run(url: &str, key: Option<&str>, json: bool) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard-coordinator status: {e}");
            return ExitCode::from(3);
        }
    };
    let doc = match runtime.block_on(fetch(url, key)) {
        Ok(doc) => doc,
        Err(e) => {
            eprintln!("switchyard-coordinator status: {e}");
            return ExitCode::from(3);
        }
    };
    let out = if json {
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    } else {
        render(&doc)
    };
    // The command's output is its purpose; stdout is where it belongs.
    #[allow(clippy::print_stdout)]
    {
        println!("{out}");
    }
    match doc["status"].as_str() {
        Some("ok") => ExitCode::SUCCESS,
        Some("degraded") => ExitCode::from(1),
        _ => ExitCode::from(2),
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `1234` ms as `1.2s`, `0` as `-`.
fn dur(v: &Value) -> String {
    match v.as_u64() {
        None | Some(0) => "-".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms}ms"),
        Some(ms) if ms < 120_000 => format!("{:.1}s", ms as f64 / 1000.0),
        Some(ms) => format!("{}m", ms / 60_000),
    }
}

/// Left-aligned columns, two spaces apart.
fn table(out: &mut String, title: &str, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "{title}");
    if rows.is_empty() {
        let _ = writeln!(out, "  (none)");
        return;
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("  {}", parts.join("  ").trim_end())
    };
    let _ = writeln!(
        out,
        "{}",
        line(header.iter().map(|h| (*h).to_owned()).collect())
    );
    for row in rows {
        let _ = writeln!(out, "{}", line(row.clone()));
    }
}

fn rows(doc: &Value, key: &str, f: impl Fn(&Value) -> Vec<String>) -> Vec<Vec<String>> {
    doc[key]
        .as_array()
        .map(|a| a.iter().map(f).collect())
        .unwrap_or_default()
}

/// The table. Pure, for tests.
pub fn render(doc: &Value) -> String {
    let mut out = String::new();
    let co = &doc["coordinator"];
    let leader = match co["leaderId"].as_str() {
        Some(id) => format!("leader {id} gen {}", s(&co["leaderGeneration"])),
        None => "no leader".to_owned(),
    };
    let _ = writeln!(
        out,
        "CLUSTER {}   redis {} {}   {}",
        s(&doc["status"]).to_uppercase(),
        s(&doc["redis"]["state"]),
        match doc["redis"]["latencyMs"].as_u64() {
            Some(ms) => format!("{ms}ms"),
            None => String::new(),
        },
        leader
    );
    for r in doc["reasons"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  ! {}: {}", s(&r["code"]), s(&r["message"]));
    }
    out.push('\n');
    let nodes = rows(doc, "nodes", |n| {
        vec![
            s(&n["id"]),
            s(&n["state"]),
            s(&n["version"]),
            dur(&n["lastHeartbeatAgeMs"]),
            s(&n["inflight"]),
            s(&n["address"]),
        ]
    });
    table(
        &mut out,
        "NODES",
        &["ID", "STATE", "VERSION", "AGE", "INFLIGHT", "ADDRESS"],
        &nodes,
    );
    let providers = rows(doc, "providers", |p| {
        vec![
            s(&p["id"]),
            s(&p["breaker"]["state"]).to_uppercase(),
            dur(&p["breaker"]["retryAfterMs"]),
            s(&p["breaker"]["generation"]),
            s(&p["connections"]["total"]),
            s(&p["connections"]["cooling"]),
            s(&p["connections"]["terminal"]),
        ]
    });
    table(
        &mut out,
        "PROVIDERS",
        &[
            "ID", "BREAKER", "RETRY", "GEN", "CONNS", "COOLING", "TERMINAL",
        ],
        &providers,
    );
    let conns = rows(doc, "connections", |c| {
        let locks: Vec<String> = c["lockouts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| format!("{} {}", s(&l["model"]), dur(&l["remainingMs"])))
            .collect();
        vec![
            s(&c["id"]),
            s(&c["provider"]),
            match c["terminal"].as_str() {
                Some(t) => format!("terminal:{t}"),
                None => s(&c["status"]),
            },
            dur(&c["remainingMs"]),
            s(&c["backoffLevel"]),
            if locks.is_empty() {
                "-".to_owned()
            } else {
                locks.join(", ")
            },
        ]
    });
    table(
        &mut out,
        "CONNECTIONS (not plainly active)",
        &["ID", "PROVIDER", "STATUS", "REMAINING", "LEVEL", "LOCKOUTS"],
        &conns,
    );
    let leases = rows(doc, "leases", |l| {
        vec![
            s(&l["connection"]),
            s(&l["ownerHashPrefix"]),
            s(&l["apiKeyId"]),
            s(&l["generation"]),
            dur(&l["remainingMs"]),
        ]
    });
    table(
        &mut out,
        "LEASES",
        &["CONNECTION", "OWNER", "API KEY", "GEN", "EXPIRES IN"],
        &leases,
    );
    if doc["versions"]["skew"] == true {
        let _ = writeln!(out, "VERSION SKEW: {}", doc["versions"]["byVersion"]);
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_shows_what_matters() {
        let doc = json!({
            "status": "degraded",
            "reasons": [{"code": "breakers_open", "message": "Breaker not closed for: p"}],
            "redis": {"state": "up", "latencyMs": 1},
            "coordinator": {"leaderId": "coord-a", "leaderGeneration": 4},
            "nodes": [{"id": "n1", "state": "up", "version": "0.1.0", "lastHeartbeatAgeMs": 300,
                       "inflight": 2, "address": "127.0.0.1:8080"}],
            "providers": [{"id": "p", "breaker": {"state": "open", "retryAfterMs": 2500, "generation": 3},
                           "connections": {"total": 2, "cooling": 1, "terminal": 0}}],
            "connections": [{"id": "c1", "provider": "p", "status": "cooling", "remainingMs": 9000,
                             "backoffLevel": 2, "lockouts": [{"model": "m", "remainingMs": 500}]}],
            "leases": [],
            "versions": {"skew": false},
        });
        let out = render(&doc);
        assert!(out.starts_with("CLUSTER DEGRADED"), "{out}");
        assert!(out.contains("leader coord-a gen 4"));
        assert!(out.contains("! breakers_open"));
        assert!(out.contains("OPEN     2.5s"), "{out}");
        assert!(out.contains("m 500ms"));
        assert!(out.contains("LEASES\n  (none)"));
    }
}
