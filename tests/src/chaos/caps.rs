//! The cluster-wide `max_concurrent` caps under chaos: a sampler reads every node's mock
//! upstream (requests in flight per connection key) every 100 ms, and an invariant judges the
//! sums against the caps.
//!
//! Why: the caps are enforced with permits in Redis, and a failover that loses writes can lose
//! permits; a node that then grants new ones exceeds the cap while the old holders still run.
//! Upstream in-flight counts are the truth of what ran at once, whatever the nodes believe.
//!
//! The three mocks are read one after the other, not at one instant: a permit handed from one
//! node to another between two reads would count twice. A real excess (permits lost with a
//! master) lasts as long as the requests that hold them, so only an excess seen in two
//! samples in a row counts; a one-sample blip is reported, not failed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::mock_upstream::MockHandle;

use super::invariants::Violation;
use super::observe::epoch_ms;
use super::scenario;

/// Upstream requests in flight per capped connection, summed over every node's mock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapSample {
    pub at: u64,
    pub in_flight: BTreeMap<String, u64>,
}

/// The invariant: no capped connection ran more than its cap in two samples in a row.
/// Returns the violations and the peak seen per connection.
pub fn caps_held(
    samples: &[CapSample],
    caps: &[(&str, u64)],
) -> (Vec<Violation>, BTreeMap<String, u64>) {
    let mut out = Vec::new();
    let mut peaks = BTreeMap::new();
    for (conn, cap) in caps {
        let count = |s: &CapSample| s.in_flight.get(*conn).copied().unwrap_or(0);
        let mut previous_over = false;
        let peak = peaks.entry((*conn).to_owned()).or_insert(0);
        for s in samples {
            let n = count(s);
            *peak = (*peak).max(n);
            let over = n > *cap;
            if over && previous_over {
                out.push(Violation {
                    at: s.at,
                    detail: format!(
                        "{conn}: {n} upstream requests in flight at {} ms (cap {cap}), over the cap in two samples in a row",
                        s.at
                    ),
                });
            }
            previous_over = over;
        }
    }
    (out, peaks)
}

/// Samples `mocks` every 100 ms for `duration` into `into`.
pub(super) fn spawn_sampler(
    mocks: Vec<Arc<MockHandle>>,
    into: Arc<Mutex<Vec<CapSample>>>,
    duration: Duration,
) -> tokio::task::JoinHandle<()> {
    let keys: Vec<(&'static str, &'static str)> = scenario::CAPPED
        .iter()
        .filter_map(|c| scenario::key_of(c).map(|k| (*c, k)))
        .collect();
    tokio::spawn(async move {
        let rounds = duration.as_millis() / 100 + 1;
        for _ in 0..rounds {
            let at = epoch_ms();
            let stats: Vec<_> = mocks.iter().map(|m| m.stats()).collect();
            let in_flight = keys
                .iter()
                .map(|(conn, key)| {
                    let sum = stats
                        .iter()
                        .map(|s| s.in_flight_by_key.get(*key).copied().unwrap_or(0))
                        .sum();
                    ((*conn).to_owned(), sum)
                })
                .collect();
            if let Ok(mut list) = into.lock() {
                list.push(CapSample { at, in_flight });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: u64, a2: u64) -> CapSample {
        CapSample {
            at,
            in_flight: BTreeMap::from([("a2".to_owned(), a2)]),
        }
    }

    #[test]
    fn an_excess_in_two_samples_in_a_row_breaks_the_cap_and_a_blip_does_not() {
        let blip = [sample(1, 12), sample(2, 13), sample(3, 12), sample(4, 13)];
        let (v, peaks) = caps_held(&blip, &[("a2", 12)]);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(peaks["a2"], 13);
        let held = [sample(1, 12), sample(2, 14), sample(3, 15), sample(4, 2)];
        let (v, _) = caps_held(&held, &[("a2", 12)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("15") && v[0].detail.contains("cap 12"));
        let (v, peaks) = caps_held(&[], &[("b0", 12)]);
        assert!(v.is_empty());
        assert_eq!(peaks["b0"], 0);
    }
}
