//! The head-sampling decision, taken once when a request arrives, before any span exists.
//!
//! Why here and not in the SDK's sampler: with the SDK deciding, every request built its
//! spans (the subscriber's registry entry, the OpenTelemetry context, each attribute) and the
//! SDK then dropped 99 of 100 of them at 1 % sampling, which cost 44 % more instructions per
//! JSON request than traces off (docs/performance.md). Deciding first lets an unsampled
//! request take the same `Span::none()` path as traces off; the SDK then samples every span
//! it is given.
//!
//! The standard variables keep their meaning (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`;
//! default `parentbased_always_on`): parent-based samplers follow a valid client
//! `traceparent`'s sampled flag and use the ratio only for new traces. One difference: the
//! ratio draw is random per request rather than a hash of a trace id that does not exist yet;
//! for the traces this node starts, that is the same rate.

/// What to do with a request's trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HeadSampler {
    /// Keep every trace.
    AlwaysOn,
    /// Keep none.
    AlwaysOff,
    /// Keep this fraction (0.0–1.0) of them.
    Ratio(f64),
    /// Follow the client's sampled flag when it sent a valid `traceparent`, else the inner
    /// rule.
    ParentBased(Root),
}

/// The rule for a new trace under a parent-based sampler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
}

impl HeadSampler {
    /// Reads `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` from `env`. An unknown
    /// sampler or a bad ratio falls back to the default, as the SDK does; the second value
    /// says why, for a start-up warning.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> (Self, Option<String>) {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_ascii_lowercase())
                .filter(|v| !v.is_empty())
        };
        let default = Self::ParentBased(Root::AlwaysOn);
        let Some(name) = get("OTEL_TRACES_SAMPLER") else {
            return (default, None);
        };
        let ratio = || -> Result<f64, String> {
            match get("OTEL_TRACES_SAMPLER_ARG") {
                None => Ok(1.0),
                Some(arg) => arg
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or(format!(
                        "OTEL_TRACES_SAMPLER_ARG={arg} is not a ratio in 0..1; sampling all"
                    )),
            }
        };
        let sampler = match name.as_str() {
            "always_on" => Self::AlwaysOn,
            "always_off" => Self::AlwaysOff,
            "traceidratio" => match ratio() {
                Ok(r) => Self::Ratio(r),
                Err(why) => return (Self::AlwaysOn, Some(why)),
            },
            "parentbased_always_on" => Self::ParentBased(Root::AlwaysOn),
            "parentbased_always_off" => Self::ParentBased(Root::AlwaysOff),
            "parentbased_traceidratio" => match ratio() {
                Ok(r) => Self::ParentBased(Root::Ratio(r)),
                Err(why) => return (default, Some(why)),
            },
            other => {
                return (
                    default,
                    Some(format!(
                        "OTEL_TRACES_SAMPLER={other} is not supported; using parentbased_always_on"
                    )),
                );
            }
        };
        (sampler, None)
    }

    /// Whether to trace a request. `parent` is the client's valid `traceparent`'s sampled
    /// flag (`None` when it sent none or an invalid one); `draw` is uniform in `[0, 1)`.
    pub fn keep(self, parent: Option<bool>, draw: f64) -> bool {
        match self {
            Self::AlwaysOn => true,
            Self::AlwaysOff => false,
            Self::Ratio(r) => draw < r,
            Self::ParentBased(root) => match parent {
                Some(sampled) => sampled,
                None => match root {
                    Root::AlwaysOn => true,
                    Root::AlwaysOff => false,
                    Root::Ratio(r) => draw < r,
                },
            },
        }
    }

    /// Whether [`keep`](Self::keep) needs a random draw (so the common cases skip it).
    pub fn needs_draw(self) -> bool {
        matches!(self, Self::Ratio(_) | Self::ParentBased(Root::Ratio(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::{HeadSampler, Root};

    fn from(pairs: &[(&str, &str)]) -> (HeadSampler, Option<String>) {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        HeadSampler::from_env(&move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_standard_names_read_as_the_sdk_reads_them() {
        assert_eq!(from(&[]).0, HeadSampler::ParentBased(Root::AlwaysOn));
        assert_eq!(
            from(&[("OTEL_TRACES_SAMPLER", "always_off")]).0,
            HeadSampler::AlwaysOff
        );
        assert_eq!(
            from(&[
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.01")
            ]),
            (HeadSampler::ParentBased(Root::Ratio(0.01)), None)
        );
        assert_eq!(
            from(&[("OTEL_TRACES_SAMPLER", "traceidratio")]).0,
            HeadSampler::Ratio(1.0)
        );
    }

    #[test]
    fn a_bad_sampler_or_ratio_falls_back_with_a_reason() {
        let (s, why) = from(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]);
        assert_eq!(s, HeadSampler::ParentBased(Root::AlwaysOn));
        assert!(why.is_some());
        let (s, why) = from(&[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ]);
        assert_eq!(s, HeadSampler::ParentBased(Root::AlwaysOn));
        assert!(why.is_some());
    }

    #[test]
    fn a_parent_based_sampler_follows_the_client_and_draws_only_for_new_traces() {
        let s = HeadSampler::ParentBased(Root::Ratio(0.01));
        assert!(s.keep(Some(true), 0.99));
        assert!(!s.keep(Some(false), 0.0));
        assert!(s.keep(None, 0.005));
        assert!(!s.keep(None, 0.5));
        assert!(s.needs_draw());
        assert!(!HeadSampler::ParentBased(Root::AlwaysOn).needs_draw());
    }

    #[test]
    fn a_plain_ratio_ignores_the_parent() {
        let s = HeadSampler::Ratio(0.25);
        assert!(s.keep(Some(false), 0.1));
        assert!(!s.keep(Some(true), 0.3));
        assert!(HeadSampler::AlwaysOn.keep(Some(false), 0.9));
        assert!(!HeadSampler::AlwaysOff.keep(Some(true), 0.0));
    }
}
