//! Whether traces are on, from the standard OpenTelemetry environment variables.
//!
//! A pure function of the environment, so the rules are tested without a process: traces are
//! off unless an OTLP endpoint is named (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) or `OTEL_TRACES_EXPORTER=otlp` asks for the default one
//! (`http://localhost:4318`). `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` turn
//! them off. Only OTLP over HTTP/protobuf is built in: another `OTEL_EXPORTER_OTLP_*PROTOCOL`
//! leaves traces off with a warning rather than sending what the collector cannot read. The
//! endpoint, headers, timeout, sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`),
//! batch (`OTEL_BSP_*`) and resource (`OTEL_RESOURCE_ATTRIBUTES`) variables are read by the
//! OpenTelemetry SDK itself, with their usual meaning.

/// The service name when `OTEL_SERVICE_NAME` does not give one.
pub const DEFAULT_SERVICE_NAME: &str = "switchyard-node";

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No traces (the default).
    Off,
    /// No traces, because a variable asks for something this build cannot do.
    Unsupported(String),
    /// Export traces; `service_name` is set when the environment names none.
    On { service_name: Option<&'static str> },
}

/// Reads the decision from `env` (a variable lookup; empty values count as unset).
pub fn decide(env: &dyn Fn(&str) -> Option<String>) -> Decision {
    let get = |k: &str| {
        env(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Decision::Off;
    }
    let exporter = get("OTEL_TRACES_EXPORTER").map(|v| v.to_ascii_lowercase());
    match exporter.as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Decision::Off,
        Some(other) => {
            return Decision::Unsupported(format!(
                "OTEL_TRACES_EXPORTER={other}: only `otlp` (or `none`) is supported; traces are off"
            ));
        }
    }
    let endpoint =
        get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| get("OTEL_EXPORTER_OTLP_ENDPOINT"));
    if endpoint.is_none() && exporter.is_none() {
        return Decision::Off;
    }
    let protocol =
        get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(p) = protocol
        && p != "http/protobuf"
    {
        return Decision::Unsupported(format!(
            "OTLP protocol `{p}`: this build exports over `http/protobuf` only; traces are off"
        ));
    }
    Decision::On {
        service_name: get("OTEL_SERVICE_NAME")
            .is_none()
            .then_some(DEFAULT_SERVICE_NAME),
    }
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_SERVICE_NAME, Decision, decide};

    fn with(pairs: &[(&str, &str)]) -> Decision {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        decide(&move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_or_the_exporter_asks() {
        assert_eq!(with(&[]), Decision::Off);
        assert_eq!(with(&[("OTEL_SERVICE_NAME", "x")]), Decision::Off);
        assert_eq!(with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")]), Decision::Off);
        let on = Decision::On {
            service_name: Some(DEFAULT_SERVICE_NAME),
        };
        assert_eq!(
            with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]),
            on
        );
        assert_eq!(
            with(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c:4318/v1/traces"
            )]),
            on
        );
        assert_eq!(with(&[("OTEL_TRACES_EXPORTER", "otlp")]), on);
    }

    #[test]
    fn the_off_switches_win() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        assert_eq!(
            with(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]),
            Decision::Off
        );
        assert_eq!(
            with(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
            Decision::Off
        );
        assert_eq!(
            with(&[endpoint, ("OTEL_SDK_DISABLED", "false")]),
            Decision::On {
                service_name: Some(DEFAULT_SERVICE_NAME)
            }
        );
    }

    #[test]
    fn what_this_build_cannot_send_is_refused_with_a_reason() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317");
        for pairs in [
            [endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            [
                endpoint,
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ],
            [endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")],
        ] {
            assert!(
                matches!(with(&pairs), Decision::Unsupported(_)),
                "{pairs:?}"
            );
        }
        assert!(matches!(
            with(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]),
            Decision::On { .. }
        ));
    }

    #[test]
    fn a_named_service_is_left_to_the_sdk() {
        assert_eq!(
            with(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_SERVICE_NAME", "edge-eu")
            ]),
            Decision::On { service_name: None }
        );
    }
}
