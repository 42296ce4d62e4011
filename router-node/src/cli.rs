//! The node's commands: run, check and demo.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::config::Config;

use crate::actors::change::StatePublisher;
use crate::clock::Clock;
use crate::http::server;
use crate::reload::{RuntimeCell, load_runtime};
use crate::runtime::Runtime;

/// `--check`: parse, validate, resolve secrets; print every problem; exit 0 or 1.
/// A reload (SIGHUP) validates through the same [`load_runtime`].
pub fn check(path: &Path) -> ExitCode {
    // Inside a runtime: the Redis client of redis mode spawns its connection task when built.
    let loaded = actix_web::rt::System::new()
        .block_on(async { load_runtime(path, &|k| std::env::var(k).ok(), Clock::new()) });
    match loaded {
        Ok(rt) => {
            for w in &rt.settings_warnings {
                eprintln!("warning: {w}");
            }
            eprintln!("{}: ok", path.display());
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in &errors.errors {
                eprintln!("error: {e}");
            }
            ExitCode::from(1)
        }
    }
}

/// Runs a node from a config file until it is stopped.
pub fn run(path: &Path) -> ExitCode {
    let _log_guard = init_tracing();
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors.errors {
                tracing::error!(path = %e.path, "config error: {}", e.message);
            }
            return ExitCode::from(1);
        }
    };
    serve_file(
        config,
        &|k| std::env::var(k).ok(),
        None,
        Some(path.to_owned()),
    )
}

/// Builds the runtime, starts actors and both listeners, and serves until shutdown.
/// `before_serve` runs inside the actix system (the demo starts its mock providers there).
pub fn serve(
    config: Config,
    env: &dyn Fn(&str) -> Option<String>,
    banner: Option<String>,
) -> ExitCode {
    serve_file(config, env, banner, None)
}

/// [`serve`], reloading `path` on SIGHUP when given.
fn serve_file(
    config: Config,
    env: &dyn Fn(&str) -> Option<String>,
    banner: Option<String>,
    path: Option<PathBuf>,
) -> ExitCode {
    let system = actix_web::rt::System::new();
    // Inside the system's runtime: the Redis client of redis mode spawns its connection task
    // when built, and that task must live on a runtime that runs as long as the node.
    let rt = match system.block_on(async { Runtime::build(config, env) }) {
        Ok(rt) => Arc::new(rt),
        Err(errors) => {
            for e in &errors.errors {
                tracing::error!(path = %e.path, "config error: {}", e.message);
            }
            return ExitCode::from(1);
        }
    };
    for w in &rt.settings_warnings {
        tracing::warn!("settings: {w}");
    }
    let cell = match RuntimeCell::new(rt.clone(), path) {
        Ok(cell) => Arc::new(cell),
        Err(e) => {
            tracing::error!("cannot register the metrics: {e}");
            return ExitCode::from(1);
        }
    };
    // Only the cell may keep the runtime: a reload retires the old one once nothing holds it.
    drop(rt);
    let result = system.block_on(async move {
        let arbiter = actix::Arbiter::new();
        let (client, admin) = {
            let rt = cell.load();
            if let Some(cluster) = &rt.table.cluster {
                // Before the actors start, so every actor hands its changes to the writer.
                // A reload carries both the cluster handle and the actor stats over.
                let _ = rt
                    .table
                    .actor_stats
                    .cluster
                    .set(cluster.clone() as Arc<dyn StatePublisher>);
                let current = cell.clone();
                crate::cluster_sync::start(cluster, Arc::new(move || current.load()));
            }
            // Embedded mode: restore the stored connection state and lockouts before the
            // actors are seeded from the handles, and the open breakers they start from
            // (redis mode keeps all of it in the cluster store instead).
            let mut breakers = std::collections::HashMap::new();
            if rt.table.cluster.is_none()
                && let Some(dir) = env(crate::state::settings_store::STATE_DIR_ENV)
            {
                breakers = crate::actors::persist::open(
                    Path::new(&dir),
                    &rt.table.connections,
                    &rt.table.providers,
                    rt.table.clock,
                );
            }
            crate::actors::start_actors_seeded(
                &rt.table.providers,
                &rt.table.connections,
                &rt.table.settings.load(),
                &arbiter.handle(),
                rt.table.actor_stats.clone(),
                &breakers,
            );
            let servers = server::bind(cell.clone())?;
            rt.lifecycle.ready.store(true, Ordering::Release);
            tracing::info!(
                node_id = %rt.node_id,
                listen = %rt.config.server.listen,
                admin_listen = %rt.config.server.admin_listen,
                "switchyard-node ready"
            );
            servers
        };
        if let Some(b) = banner {
            eprintln!("{b}");
        }
        let signals = actix_web::rt::spawn(crate::lifecycle::handle_signals(
            cell.clone(),
            client.handle(),
            admin.handle(),
            arbiter.handle(),
        ));
        let out = futures_util::future::try_join(client, admin)
            .await
            .map(|_| ());
        signals.abort();
        if let Some(cluster) = &cell.load().table.cluster {
            // Leave the membership at once rather than after the heartbeat TTL (bounded by the
            // Redis timeout; a failure only means the key expires on its own).
            let _ = cluster.store.remove_node(&cluster.node_id).await;
        }
        cell.load()
            .lifecycle
            .draining
            .store(true, Ordering::Release);
        arbiter.stop();
        out
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("server error: {e}");
            ExitCode::from(1)
        }
    }
}

/// What keeps the log thread and the trace exporter running; dropping it flushes both
/// (the traces first, so their last warnings still reach the log).
pub struct LogGuard {
    _traces: Option<crate::telemetry::export::Guard>,
    _log: Option<crate::logwriter::FlushGuard>,
}

/// JSON lines on stdout, or a human format when stdout is a terminal; OpenTelemetry traces
/// when the `OTEL_*` environment asks for them (`crate::telemetry`).
///
/// Lines go through [`crate::logwriter`]: a buffer written out in batches by one thread, so
/// a slow log pipe never stalls a request worker and an access line costs neither a write
/// syscall nor a thread wake-up on the request path. The returned guard writes out what is
/// left when dropped: keep it for the process. Without a log thread (it could not be
/// started), lines go to stdout directly.
pub fn init_tracing() -> LogGuard {
    use std::io::IsTerminal;

    use tracing_subscriber::Layer as _;
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    use crate::telemetry::{self, settings::Decision};
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,h2=warn,hyper=warn,reqwest=warn")
    });
    // actix-http's connection dispatcher logs a client's malformed request (over 96 headers,
    // a broken request line) at ERROR after it has already answered 4xx: a client's mistake,
    // not an operator alert. Naming `actix_http` in RUST_LOG brings those lines back.
    let filter = match "actix_http::h1::dispatcher=off".parse() {
        Ok(quiet) if !std::env::var("RUST_LOG").is_ok_and(|v| v.contains("actix_http")) => {
            filter.add_directive(quiet)
        }
        _ => filter,
    };
    // The trace spans are for OpenTelemetry only: never in the log. With traces off, no layer
    // wants them, so their callsites are disabled and cost nothing.
    let filter = match format!("{}=off", telemetry::TARGET).parse() {
        Ok(off) => filter.add_directive(off),
        Err(_) => filter,
    };
    let terminal = std::io::stdout().is_terminal();
    let (writer, log) = match crate::logwriter::start(std::io::stdout()) {
        Ok((w, g)) => {
            if !terminal {
                crate::access_log::install(w.clone());
            }
            (BoxMakeWriter::new(w), Some(g))
        }
        Err(e) => {
            eprintln!("switchyard-node: no log thread ({e}); logging synchronously");
            (BoxMakeWriter::new(std::io::stdout), None)
        }
    };
    let fmt = if terminal {
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_writer(writer)
            .with_filter(filter)
            .boxed()
    };
    // Every layer carries its own filter and no unfiltered layer is added (not even an empty
    // `Option`, which would count as wanting everything): `tracing::enabled!` then means
    // "some layer wants it", which the access log relies on, and with traces off the trace
    // callsites stay disabled.
    let registry = tracing_subscriber::registry().with(fmt);
    let mut notes = Vec::new();
    let mut traces = None;
    match telemetry::settings::decide(&|k| std::env::var(k).ok()) {
        Decision::Off => {
            let _ = registry.try_init();
        }
        Decision::Unsupported(why) => {
            notes.push(why);
            let _ = registry.try_init();
        }
        Decision::On { service_name } => {
            let (sampler, why) =
                telemetry::sampling::HeadSampler::from_env(&|k| std::env::var(k).ok());
            notes.extend(why);
            telemetry::set_sampler(sampler);
            match telemetry::export::install(service_name) {
                Ok((layer, guard)) => {
                    let only_traces = tracing_subscriber::filter::Targets::new()
                        .with_target(telemetry::TARGET, tracing::Level::TRACE);
                    let _ = registry.with(layer.with_filter(only_traces)).try_init();
                    traces = Some(guard);
                }
                Err(e) => {
                    notes.push(format!("{e}; traces are off"));
                    let _ = registry.try_init();
                }
            }
        }
    }
    for note in notes {
        tracing::warn!("OpenTelemetry: {note}");
    }
    if traces.is_some() {
        tracing::info!("OpenTelemetry traces on: OTLP over HTTP/protobuf, batched");
    }
    LogGuard {
        _traces: traces,
        _log: log,
    }
}

/// `demo`: a node on `port` routing to two in-process mock providers.
#[cfg(feature = "demo")]
pub fn demo(port: u16, admin_port: u16) -> ExitCode {
    let _log_guard = init_tracing();
    let mocks = match crate::demo::start_mocks() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("demo: cannot start the mock providers: {e}");
            return ExitCode::from(1);
        }
    };
    let toml = crate::demo::config_toml(port, admin_port, &mocks.healthy, &mocks.flaky);
    let config = match Config::from_toml_str(&toml) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors.errors {
                eprintln!("demo config error: {e}");
            }
            return ExitCode::from(1);
        }
    };
    let banner = crate::demo::banner(port, admin_port);
    let code = serve(config, &crate::demo::env, Some(banner));
    drop(mocks);
    code
}

/// `demo` in a build without the `demo` feature (release images leave the mock out).
#[cfg(not(feature = "demo"))]
pub fn demo(_port: u16, _admin_port: u16) -> ExitCode {
    eprintln!(
        "switchyard-node demo: this binary was built without the `demo` feature, so it has no \
         mock providers to route to (release images leave them out). Build one that has it: \
         `cargo run --release -p switchyard-node -- demo` (the feature is on by default)."
    );
    ExitCode::from(2)
}
