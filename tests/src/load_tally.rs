//! What a test's steady load saw through a fault (a failover, a rolling upgrade): every chat
//! sent is counted once, as served, as a definite error (a status with `error.type` and
//! `error.code`) or as lost (anything else, or no answer). "Nothing lost" is the contract the
//! fault tests hold the node to.

#![allow(clippy::panic)]

use serde_json::{Value, json};

/// The counts of one load run (or of several, [`Tally::merge`]d).
#[derive(Debug, Default)]
pub struct Tally {
    pub sent: usize,
    pub ok: usize,
    /// Errors with a status, `error.type` and `error.code`.
    pub definite: Vec<(u16, String)>,
    /// Errors without them, or no answer within the client's timeout.
    pub lost: Vec<String>,
}

impl Tally {
    /// Sends one chat for `p/m` to the node at `url` and counts its answer.
    pub async fn chat_once(&mut self, http: &reqwest::Client, url: &str) {
        self.sent += 1;
        let sent = http
            .post(format!("{url}/v1/chat/completions"))
            .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let body: Value = resp.json().await.unwrap_or(Value::Null);
                let error = &body["error"];
                if status == 200 && body["choices"][0]["message"]["content"].is_string() {
                    self.ok += 1;
                } else if let (true, Some(code), true) = (
                    status >= 400,
                    error["code"].as_str(),
                    error["type"].is_string(),
                ) {
                    self.definite.push((status, code.to_owned()));
                } else {
                    self.lost.push(format!("{url}: {status} {body}"));
                }
            }
            Err(e) => self.lost.push(format!("{url}: {e}")),
        }
    }

    /// Adds another run's counts.
    pub fn merge(&mut self, other: Tally) {
        self.sent += other.sent;
        self.ok += other.ok;
        self.definite.extend(other.definite);
        self.lost.extend(other.lost);
    }

    /// Prints the counts and fails when a request was lost, counted twice, or when fewer than
    /// `min_ok` were served (too little load to mean anything).
    pub fn assert_none_lost(&self, what: &str, min_ok: usize) {
        eprintln!(
            "{what}: {} sent, {} ok, {} definite errors {:?}, {} lost",
            self.sent,
            self.ok,
            self.definite.len(),
            self.definite.iter().take(5).collect::<Vec<_>>(),
            self.lost.len()
        );
        assert_eq!(
            self.sent,
            self.ok + self.definite.len() + self.lost.len(),
            "{what}: every request is counted once"
        );
        assert!(
            self.lost.is_empty(),
            "{what}: requests without a definite answer: {:?}",
            self.lost
        );
        assert!(
            self.ok > min_ok,
            "{what}: too few requests served: {self:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "requests without a definite answer")]
    fn a_lost_request_fails_the_check() {
        let t = Tally {
            sent: 3,
            ok: 2,
            definite: Vec::new(),
            lost: vec!["n: 502 null".into()],
        };
        t.assert_none_lost("load", 1);
    }

    #[test]
    fn merged_runs_add_up() {
        let mut a = Tally {
            sent: 2,
            ok: 1,
            definite: vec![(429, "connection_cooldown".into())],
            lost: Vec::new(),
        };
        a.merge(Tally {
            sent: 1,
            ok: 1,
            ..Tally::default()
        });
        a.assert_none_lost("load", 1);
        assert_eq!((a.sent, a.ok, a.definite.len()), (3, 2, 1));
    }
}
