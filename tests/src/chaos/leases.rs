//! Exclusive session leases under chaos: a few owners compete for a lease on connection a2
//! (reserved for leases), then use, renew and release it through random nodes while the faults run, and a checker proves
//! the fencing held (one owner per connection generation, no success under a generation after
//! a newer one was granted, every lease operation answered definitely). A lease may move to
//! another connection with its generation; the checker follows it there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::load::Load;

/// The client key allowed to take leases (scope `lease:exclusive`).
pub const AGENT_KEY: &str = "sk-chaos-agents-47c1d0";
/// Lease time-to-live: short, so pauses in the owners' loops outlive some leases.
pub const TTL_MS: u64 = 2_000;
/// Concurrent lease owners.
pub const OWNERS: usize = 4;

/// One lease operation or leased request as the owner saw it.
#[derive(Debug, Clone)]
pub struct LeaseOp {
    pub owner: usize,
    /// One acquire and everything done under it.
    pub episode: usize,
    pub kind: &'static str,
    pub node: usize,
    pub generation: u64,
    /// The connection that served a successful leased request.
    pub connection: Option<String>,
    /// 0 for a transport failure.
    pub status: u16,
    pub code: String,
    /// Usage tokens of a served leased request.
    pub tokens: u64,
    /// Offsets from the run's start.
    pub start: Duration,
    pub end: Duration,
}

/// A well-formed owner token for owner `i` (`vlo_` + 43 URL-safe characters).
pub fn owner_token(i: usize) -> String {
    let body: String = format!("chaos{i:03}x").repeat(6);
    format!("vlo_{}", &body[..43])
}

/// Runs owner `i` until `until` (offset from the run's start); bounded by `max_ops`.
pub async fn owner_loop(
    load: Arc<Load>,
    i: usize,
    until: Duration,
    max_ops: usize,
) -> Vec<LeaseOp> {
    let mut ops = Vec::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ (i as u64 + 1);
    let mut next = move |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound.max(1)
    };
    let mut episode = 0;
    while load.started.elapsed() < until && ops.len() < max_ops {
        episode += 1;
        let op = call(
            &load,
            i,
            episode,
            "acquire",
            next(3) as usize,
            None,
            json!({"action": "acquire", "model": "pa/m"}),
        )
        .await;
        let (status, generation) = (op.status, op.generation);
        ops.push(op);
        if status != 200 {
            tokio::time::sleep(Duration::from_millis(100 + next(300))).await;
            continue;
        }
        for _ in 0..(1 + next(3)) {
            // Some pauses outlive the TTL: the next use must then be refused as stale.
            tokio::time::sleep(Duration::from_millis(next(TTL_MS + 600))).await;
            let body =
                json!({"model": "pa/m", "messages": [{"role": "user", "content": "leased"}]});
            let op = call(
                &load,
                i,
                episode,
                "chat",
                next(3) as usize,
                Some(generation),
                body,
            )
            .await;
            let stop = op.status != 200;
            ops.push(op);
            if stop {
                break;
            }
            let renew = json!({"action": "renew", "generation": generation});
            let op = call(&load, i, episode, "renew", next(3) as usize, None, renew).await;
            let stop = op.status != 200;
            ops.push(op);
            if stop {
                break;
            }
        }
        let release =
            json!({"action": "release", "generation": generation, "reason": "OWNER_EXIT"});
        ops.push(
            call(
                &load,
                i,
                episode,
                "release",
                next(3) as usize,
                None,
                release,
            )
            .await,
        );
    }
    ops
}

async fn call(
    load: &Load,
    owner: usize,
    episode: usize,
    kind: &'static str,
    pick: usize,
    generation: Option<u64>,
    body: Value,
) -> LeaseOp {
    let nodes = load.nodes.read().map(|n| n.clone()).unwrap_or_default();
    let up: Vec<(usize, String)> = nodes
        .into_iter()
        .enumerate()
        .filter_map(|(i, n)| n.map(|u| (i, u)))
        .collect();
    let start = load.started.elapsed();
    let Some((node, base)) = up.get(pick % up.len().max(1)).cloned() else {
        return LeaseOp {
            owner,
            episode,
            kind,
            node: 0,
            generation: 0,
            connection: None,
            status: 0,
            code: "no node up".to_owned(),
            tokens: 0,
            start,
            end: start,
        };
    };
    let path = if kind == "chat" {
        "/v1/chat/completions"
    } else {
        "/api/v1/session-leases"
    };
    let mut req = load
        .http
        .post(format!("{base}{path}"))
        .bearer_auth(AGENT_KEY)
        .header("x-switchyard-lease-owner", owner_token(owner))
        .json(&body);
    if let Some(g) = generation {
        req = req.header("x-switchyard-lease-generation", g.to_string());
    }
    let result = tokio::time::timeout(load.deadline, async {
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let conn = resp
            .headers()
            .get("x-switchyard-connection")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let json = resp.json::<Value>().await.unwrap_or(Value::Null);
        Ok::<_, reqwest::Error>((status, conn, json))
    })
    .await;
    let (status, connection, json) = match result {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => (
            0,
            None,
            json!({"error": {"code": format!("transport: {e}")}}),
        ),
        Err(_) => (0, None, json!({"error": {"code": "TIMEOUT"}})),
    };
    LeaseOp {
        owner,
        episode,
        kind,
        node,
        generation: generation
            .or_else(|| json["generation"].as_u64())
            .unwrap_or(0),
        connection: if status == 200 { connection } else { None },
        status,
        code: json["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        tokens: if status == 200 {
            json["usage"]["prompt_tokens"].as_u64().unwrap_or(0)
                + json["usage"]["completion_tokens"].as_u64().unwrap_or(0)
        } else {
            0
        },
        start,
        end: load.started.elapsed(),
    }
}

/// Lease errors a client may get; anything else (or a missing code) is a violation.
const LEASE_CODES: [&str; 4] = [
    "LEASE_FENCE_STALE",
    "LEASE_CAPACITY_UNAVAILABLE",
    "LEASE_SERVICE_UNAVAILABLE",
    "LEASE_NO_ELIGIBLE_CONNECTION",
];

/// The fencing invariants over every owner's operations; `killed(node, start, end)` says
/// whether a node was killed while an operation ran (its transport failures are excused).
/// Returns the violations and how many ordering comparisons were made.
pub fn check(
    ops: &[LeaseOp],
    killed: impl Fn(usize, Duration, Duration) -> bool,
) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    // Every answer is definite: a success, a lease error, or an ordinary well-formed error
    // of the leased request itself (its upstream failed).
    for o in ops {
        let ok = match o.status {
            200 => true,
            0 => killed(o.node, o.start, o.end),
            _ => {
                !o.code.is_empty()
                    && (o.kind == "chat"
                        || LEASE_CODES.contains(&o.code.as_str())
                        || o.status >= 500)
            }
        };
        if !ok {
            out.push(format!(
                "owner {} {} on node-{}: {} {:?}",
                o.owner, o.kind, o.node, o.status, o.code
            ));
        }
    }
    // Where each episode's lease was, from its served requests in order. A lease may move
    // to another connection with its generation (its connection became ineligible), so an
    // episode can be served on several connections; each stay on one connection starts
    // either with the acquire or with the served request that moved it there.
    let mut served: HashMap<(usize, usize), Vec<&LeaseOp>> = HashMap::new();
    let mut holder: HashMap<(String, u64), usize> = HashMap::new();
    for o in ops.iter().filter(|o| o.kind == "chat" && o.status == 200) {
        let Some(conn) = o.connection.clone() else {
            out.push(format!(
                "owner {} got a leased answer without its connection",
                o.owner
            ));
            continue;
        };
        served.entry((o.owner, o.episode)).or_default().push(o);
        let h = *holder
            .entry((conn.clone(), o.generation))
            .or_insert(o.owner);
        if h != o.owner {
            out.push(format!(
                "owners {h} and {} both held generation {} of {conn}",
                o.owner, o.generation
            ));
        }
    }
    for list in served.values_mut() {
        list.sort_by_key(|o| o.start);
    }
    // The acquire's connection: where the episode was first served (the checker's view of
    // an acquire, whose answer names no connection).
    let grants: Vec<(&LeaseOp, &String)> = ops
        .iter()
        .filter(|o| o.kind == "acquire" && o.status == 200)
        .filter_map(|o| {
            let first = served.get(&(o.owner, o.episode))?.first()?;
            Some((o, first.connection.as_ref()?))
        })
        .collect();
    // No success under a generation once a newer generation of the same connection was
    // granted (the grant ended the older lease), and for a lease that moved there, once a
    // newer one was granted there after the move.
    let mut compared = 0;
    for s in ops
        .iter()
        .filter(|o| (o.kind == "chat" || o.kind == "renew") && o.status == 200)
    {
        let Some(stay) = stay_of(&served, s) else {
            continue;
        };
        for (g, g_conn) in &grants {
            if **g_conn == stay.connection && g.generation > s.generation {
                compared += 1;
                let after_arrival = stay.moved_in_by.is_none_or(|m| g.start >= m.end);
                if s.start >= g.end && after_arrival {
                    out.push(format!(
                        "owner {} used generation {} of {} after generation {} was granted",
                        s.owner, s.generation, stay.connection, g.generation
                    ));
                }
            }
        }
    }
    (out, compared)
}

/// Where a successful use of a lease ran, and how the lease got there.
struct Stay<'a> {
    connection: String,
    /// The served request that moved the lease to `connection`; `None` when the lease was
    /// there since its acquire.
    moved_in_by: Option<&'a LeaseOp>,
}

/// The stay a success `s` belongs to: a served request's own connection, or for a renew the
/// connection of the latest request served before it. The stay began at the first of the
/// run of served requests on that connection that ends at `s`.
fn stay_of<'a>(
    served: &HashMap<(usize, usize), Vec<&'a LeaseOp>>,
    s: &LeaseOp,
) -> Option<Stay<'a>> {
    let list = served.get(&(s.owner, s.episode))?;
    let upto = list.iter().take_while(|o| o.start <= s.start).count();
    let last = list.get(upto.checked_sub(1)?)?;
    let connection = last.connection.clone()?;
    let run_start = list[..upto]
        .iter()
        .rposition(|o| o.connection.as_deref() != Some(connection.as_str()))
        .map_or(0, |i| i + 1);
    Some(Stay {
        connection,
        moved_in_by: (run_start > 0).then(|| list[run_start]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(
        owner: usize,
        episode: usize,
        kind: &'static str,
        generation: u64,
        conn: Option<&str>,
        ms: (u64, u64),
    ) -> LeaseOp {
        LeaseOp {
            owner,
            episode,
            kind,
            node: 0,
            generation,
            connection: conn.map(str::to_owned),
            status: 200,
            code: String::new(),
            tokens: 0,
            start: Duration::from_millis(ms.0),
            end: Duration::from_millis(ms.1),
        }
    }

    #[test]
    fn owner_tokens_have_the_documented_shape() {
        let t = owner_token(7);
        assert_eq!(t.len(), 47);
        assert!(t.starts_with("vlo_") && t[4..].chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(owner_token(1), owner_token(2));
    }

    #[test]
    fn a_use_after_a_newer_grant_and_a_shared_generation_are_caught() {
        let ops = vec![
            op(0, 1, "acquire", 5, None, (0, 10)),
            op(0, 1, "chat", 5, Some("a0"), (20, 30)),
            op(1, 1, "acquire", 6, None, (100, 110)),
            op(1, 1, "chat", 6, Some("a0"), (120, 130)),
            op(0, 1, "chat", 5, Some("a0"), (200, 210)),
        ];
        let (v, compared) = check(&ops, |_, _, _| false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("after generation 6"));
        assert!(compared >= 2);
        let shared = vec![
            op(0, 1, "chat", 5, Some("a0"), (0, 1)),
            op(1, 1, "chat", 5, Some("a0"), (2, 3)),
        ];
        assert!(check(&shared, |_, _, _| false).0[0].contains("both held"));
    }

    #[test]
    fn a_moved_lease_is_judged_from_its_arrival() {
        // Owner 0 is moved from a0 to a1 by its second request; a1 had granted a higher
        // generation to owner 1 before, which was released. Not a violation…
        let moved = vec![
            op(0, 1, "acquire", 5, None, (0, 10)),
            op(0, 1, "chat", 5, Some("a0"), (20, 30)),
            op(1, 1, "acquire", 9, None, (40, 50)),
            op(1, 1, "chat", 9, Some("a1"), (60, 70)),
            op(0, 1, "chat", 5, Some("a1"), (100, 110)),
            op(0, 1, "renew", 5, None, (120, 130)),
        ];
        let (v, compared) = check(&moved, |_, _, _| false);
        assert!(v.is_empty(), "{v:?}");
        assert!(compared >= 2);
        // …but a grant on a1 after the lease arrived there ends it: a later use is caught.
        let mut late = moved.clone();
        late.push(op(2, 1, "acquire", 12, None, (140, 150)));
        late.push(op(2, 1, "chat", 12, Some("a1"), (160, 170)));
        late.push(op(0, 1, "chat", 5, Some("a1"), (200, 210)));
        let (v, _) = check(&late, |_, _, _| false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("generation 5 of a1 after generation 12"),
            "{v:?}"
        );
    }

    #[test]
    fn lease_errors_must_carry_a_known_code() {
        let mut bad = op(0, 1, "acquire", 0, None, (0, 1));
        bad.status = 400;
        assert_eq!(check(&[bad.clone()], |_, _, _| false).0.len(), 1);
        bad.status = 429;
        bad.code = "LEASE_CAPACITY_UNAVAILABLE".to_owned();
        assert!(check(&[bad.clone()], |_, _, _| false).0.is_empty());
        bad.status = 0;
        assert_eq!(check(&[bad.clone()], |_, _, _| false).0.len(), 1);
        assert!(check(&[bad], |_, _, _| true).0.is_empty());
    }
}
