//! Reading Redis's own counters: `INFO commandstats` (commands executed) and `INFO cpu`.
//!
//! Why: the simulator's load figures must be what Redis did, not what the clients think they
//! sent. Parsing is pure so it is unit-tested; the only I/O is one `INFO` call per sample.

use std::collections::BTreeMap;

/// One sample of Redis's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Calls per command name (`cmdstat_<name>:calls=…`), scripts' inner calls included.
    pub calls: BTreeMap<String, u64>,
    /// `used_cpu_sys + used_cpu_user`, seconds.
    pub cpu_secs: f64,
}

impl Sample {
    /// Parses the text of `INFO commandstats` followed by `INFO cpu` (any order, one text).
    pub fn parse(text: &str) -> Self {
        let mut sample = Self::default();
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("cmdstat_") {
                let Some((name, fields)) = rest.split_once(':') else {
                    continue;
                };
                let calls = fields
                    .split(',')
                    .find_map(|f| f.strip_prefix("calls="))
                    .and_then(|n| n.parse::<u64>().ok());
                if let Some(calls) = calls {
                    sample.calls.insert(name.to_owned(), calls);
                }
            } else if let Some(v) = line
                .strip_prefix("used_cpu_sys:")
                .or_else(|| line.strip_prefix("used_cpu_user:"))
            {
                sample.cpu_secs += v.parse::<f64>().unwrap_or(0.0);
            }
        }
        sample
    }

    /// Commands executed between `earlier` and `self`, in total and per command, leaving out
    /// the `INFO` calls of the sampling itself.
    pub fn calls_since(&self, earlier: &Self) -> (u64, BTreeMap<String, u64>) {
        let mut per = BTreeMap::new();
        for (name, calls) in &self.calls {
            if name == "info" {
                continue;
            }
            let before = earlier.calls.get(name).copied().unwrap_or(0);
            let delta = calls.saturating_sub(before);
            if delta > 0 {
                per.insert(name.clone(), delta);
            }
        }
        (per.values().sum(), per)
    }
}

/// Takes one sample over a dedicated connection.
pub async fn sample(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<Sample> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await?;
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(con).await?;
    Ok(Sample::parse(&format!("{stats}\n{cpu}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# Commandstats\r\n\
        cmdstat_hmget:calls=120,usec=300,usec_per_call=2.5,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=7,usec=1,usec_per_call=0.1\r\n\
        cmdstat_evalsha:calls=5,usec=50,usec_per_call=10.0\r\n\
        # CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n";

    #[test]
    fn parses_calls_and_cpu() {
        let s = Sample::parse(TEXT);
        assert_eq!(s.calls.get("hmget"), Some(&120));
        assert_eq!(s.calls.get("evalsha"), Some(&5));
        assert!((s.cpu_secs - 3.75).abs() < 1e-9);
    }

    #[test]
    fn deltas_leave_out_info_and_unchanged_commands() {
        let before = Sample::parse(TEXT);
        let after = Sample::parse(
            &TEXT
                .replace("calls=120", "calls=150")
                .replace("calls=7", "calls=9"),
        );
        let (total, per) = after.calls_since(&before);
        assert_eq!(total, 30);
        assert_eq!(per.len(), 1);
    }
}
