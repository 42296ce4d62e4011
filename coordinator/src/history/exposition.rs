//! The per-provider counters a chart needs, read from a node's Prometheus text exposition.

use std::collections::BTreeMap;

/// Attempts of the upstream duration histogram.
const DURATION: &str = "switchyard_upstream_request_duration_seconds";
/// Failed upstream attempts, by provider and kind.
const FAILURES: &str = "switchyard_upstream_attempt_failures_total";
/// Connection cooldowns set, by provider and reason: the error count of a node too old to
/// export [`FAILURES`] (a rolling upgrade).
const COOLDOWNS: &str = "switchyard_cooldowns_total";

/// One provider's cumulative counters on one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    pub requests: f64,
    pub errors: f64,
    /// Cumulative histogram buckets `(upper bound in seconds, count)`, ascending, `+Inf` last.
    pub buckets: Vec<(f64, f64)>,
}

/// Provider id → counters.
pub type NodeCounters = BTreeMap<String, Counters>;

/// Reads the families the history uses; every other line is ignored, and so is a malformed
/// one (a scrape is a best effort, never an error).
pub fn parse(text: &str) -> NodeCounters {
    let mut out = NodeCounters::new();
    let mut cooldowns: BTreeMap<String, f64> = BTreeMap::new();
    let mut has_failures = false;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((name, labels, value)) = split_sample(line) else {
            continue;
        };
        let Some(provider) = label(labels, "provider") else {
            continue;
        };
        if name == COOLDOWNS {
            *cooldowns.entry(provider.to_owned()).or_default() += value;
            continue;
        }
        let suffix = name.strip_prefix(DURATION);
        if name != FAILURES && !matches!(suffix, Some("_count" | "_bucket")) {
            continue;
        }
        let entry = out.entry(provider.to_owned()).or_default();
        match suffix {
            None => {
                has_failures = true;
                entry.errors += value;
            }
            Some("_count") => entry.requests = value,
            _ => {
                if let Some(le) = label(labels, "le").and_then(parse_value) {
                    entry.buckets.push((le, value));
                }
            }
        }
    }
    if !has_failures {
        for (provider, n) in cooldowns {
            out.entry(provider).or_default().errors = n;
        }
    }
    for c in out.values_mut() {
        c.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// `name{labels} value` → (name, labels, value); labels without braces.
fn split_sample(line: &str) -> Option<(&str, &str, f64)> {
    let open = line.find('{')?;
    let close = line.rfind('}')?;
    let name = line.get(..open)?;
    let labels = line.get(open + 1..close)?;
    let value = line.get(close + 1..)?.split_whitespace().next()?;
    Some((name, labels, parse_value(value)?))
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        _ => v.parse().ok(),
    }
}

/// The value of `key="…"` in a label list (label values here never hold quotes or commas:
/// they are config ids and fixed enums).
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

/// The increase from `prev` to `cur`; a counter that went down was reset (the node
/// restarted), so its increase is its current value, as Prometheus' `increase` treats it.
pub fn increase(prev: &Counters, cur: &Counters) -> Counters {
    let inc = |p: f64, c: f64| if c >= p { c - p } else { c };
    let buckets = cur
        .buckets
        .iter()
        .map(|(le, c)| {
            let p = prev
                .buckets
                .iter()
                .find(|(ple, _)| ple == le)
                .map_or(0.0, |(_, p)| *p);
            (*le, inc(p, *c))
        })
        .collect();
    Counters {
        requests: inc(prev.requests, cur.requests),
        errors: inc(prev.errors, cur.errors),
        buckets,
    }
}

/// Adds `b`'s counts into `a` (bucket bounds matched by value).
pub fn add(a: &mut Counters, b: &Counters) {
    a.requests += b.requests;
    a.errors += b.errors;
    for (le, c) in &b.buckets {
        match a.buckets.iter_mut().find(|(ale, _)| ale == le) {
            Some(slot) => slot.1 += c,
            None => a.buckets.push((*le, *c)),
        }
    }
    a.buckets.sort_by(|x, y| x.0.total_cmp(&y.0));
}

/// The `q` quantile in seconds of cumulative buckets, interpolating linearly inside the
/// bucket as `histogram_quantile` does; `None` without observations. A quantile in the
/// `+Inf` bucket is the highest finite bound.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = 0.0;
    let mut below = 0.0;
    for (le, count) in buckets {
        if *count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let in_bucket = count - below;
            let frac = if in_bucket > 0.0 {
                (rank - below) / in_bucket
            } else {
                1.0
            };
            return Some(lower + (le - lower) * frac);
        }
        lower = *le;
        below = *count;
    }
    Some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP switchyard_upstream_request_duration_seconds Upstream attempt duration.
# TYPE switchyard_upstream_request_duration_seconds histogram
switchyard_upstream_request_duration_seconds_bucket{provider="p0",le="0.1"} 3
switchyard_upstream_request_duration_seconds_bucket{provider="p0",le="1"} 9
switchyard_upstream_request_duration_seconds_bucket{provider="p0",le="+Inf"} 10
switchyard_upstream_request_duration_seconds_sum{provider="p0"} 4.2
switchyard_upstream_request_duration_seconds_count{provider="p0"} 10
switchyard_cooldowns_total{provider="p0",reason="server_error"} 2
switchyard_cooldowns_total{provider="p0",reason="rate_limit_exceeded"} 1
switchyard_cooldowns_total{provider="p1",reason="server_error"} 4
switchyard_requests_total{route="/v1/chat/completions",status_class="2xx"} 10
garbage line {
"#;

    #[test]
    fn failed_attempts_are_the_errors_when_a_node_exports_them() {
        let text = format!(
            "{TEXT}\
             switchyard_upstream_attempt_failures_total{{provider=\"p0\",kind=\"http_5xx\"}} 5\n\
             switchyard_upstream_attempt_failures_total{{provider=\"p0\",kind=\"rate_limited\"}} 2\n\
             switchyard_upstream_attempt_failures_total{{provider=\"p1\",kind=\"http_5xx\"}} 0\n"
        );
        let parsed = parse(&text);
        assert_eq!(parsed["p0"].errors, 7.0);
        // Cooldowns no longer count once the node has the failure family.
        assert_eq!(parsed["p1"].errors, 0.0);
    }

    #[test]
    fn reads_requests_errors_and_buckets_per_provider() {
        let parsed = parse(TEXT);
        let p0 = &parsed["p0"];
        assert_eq!(p0.requests, 10.0);
        assert_eq!(p0.errors, 3.0);
        assert_eq!(
            p0.buckets,
            vec![(0.1, 3.0), (1.0, 9.0), (f64::INFINITY, 10.0)]
        );
        assert_eq!(parsed["p1"].errors, 4.0);
        assert_eq!(parsed["p1"].requests, 0.0);
        assert_eq!(parsed.len(), 2);
    }

    #[test]
    fn increases_survive_a_counter_reset() {
        let prev = Counters {
            requests: 10.0,
            errors: 3.0,
            buckets: vec![(1.0, 8.0), (f64::INFINITY, 10.0)],
        };
        let cur = Counters {
            requests: 15.0,
            errors: 1.0,
            buckets: vec![(1.0, 12.0), (f64::INFINITY, 15.0)],
        };
        let inc = increase(&prev, &cur);
        assert_eq!(inc.requests, 5.0);
        assert_eq!(inc.errors, 1.0, "a counter that went down restarted");
        assert_eq!(inc.buckets, vec![(1.0, 4.0), (f64::INFINITY, 5.0)]);
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let b = [
            (0.1, 50.0),
            (0.5, 90.0),
            (1.0, 100.0),
            (f64::INFINITY, 100.0),
        ];
        // rank 95 lies halfway through the (0.5, 1] bucket.
        let p95 = quantile(0.95, &b).unwrap();
        assert!((p95 - 0.75).abs() < 1e-9, "{p95}");
        let p50 = quantile(0.5, &b).unwrap();
        assert!((p50 - 0.1).abs() < 1e-9, "{p50}");
        assert_eq!(quantile(0.95, &[(1.0, 0.0), (f64::INFINITY, 0.0)]), None);
        assert_eq!(quantile(0.95, &[]), None);
        // Everything slower than the last bound: the last finite bound.
        assert_eq!(
            quantile(0.95, &[(1.0, 0.0), (f64::INFINITY, 4.0)]),
            Some(1.0)
        );
    }

    #[test]
    fn adding_merges_buckets_by_bound() {
        let mut a = Counters {
            requests: 1.0,
            errors: 0.0,
            buckets: vec![(1.0, 1.0), (f64::INFINITY, 1.0)],
        };
        add(
            &mut a,
            &Counters {
                requests: 2.0,
                errors: 1.0,
                buckets: vec![(0.5, 2.0), (1.0, 2.0), (f64::INFINITY, 2.0)],
            },
        );
        assert_eq!((a.requests, a.errors), (3.0, 1.0));
        assert_eq!(
            a.buckets,
            vec![(0.5, 2.0), (1.0, 3.0), (f64::INFINITY, 3.0)]
        );
    }
}
