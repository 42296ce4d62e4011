//! The `switchyard-coordinator` command line: the cluster view of a Switchyard deployment.
//!
//! It lives in the library so that the black-box test crate can build the same program
//! under its own name (Cargo locates only a package's own binaries for its tests).
//!
//! ```text
//! switchyard-coordinator --config switchyard.toml [--listen 127.0.0.1:9100]   # serve
//! switchyard-coordinator status [--url URL] [--json] [--config FILE]           # one look
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{DEFAULT_LISTEN, LISTEN_ENV, Settings};
use crate::{server, status};
use clap::{Parser, Subcommand};
use switchyard_shared::config::Config;

#[derive(Parser, Debug)]
#[command(
    name = "switchyard-coordinator",
    version,
    about = "Switchyard coordinator"
)]
struct Cli {
    /// Config file (TOML), the same file the nodes use.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    /// Listen address (default 127.0.0.1:9100; SWITCHYARD_COORDINATOR_LISTEN overrides).
    #[arg(long)]
    listen: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the cluster health of a running coordinator (exit 0 ok, 1 degraded, 2 down).
    Status {
        /// The coordinator's base URL (default: from the config, else http://127.0.0.1:9100).
        #[arg(long)]
        url: Option<String>,
        /// Print the raw JSON document.
        #[arg(long)]
        json: bool,
    },
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Parses the command line, runs the command, and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Status { url, json }) => {
            let config = match cli.config.as_deref().map(Config::load) {
                Some(Ok(c)) => Some(c),
                Some(Err(e)) => {
                    for err in &e.errors {
                        eprintln!("error: {err}");
                    }
                    return ExitCode::from(3);
                }
                None => None,
            };
            let key_env = config
                .as_ref()
                .map_or("SWITCHYARD_MANAGEMENT_KEY", |c| {
                    c.auth.management_key_env.as_str()
                })
                .to_owned();
            let key = (!key_env.is_empty()).then(|| env(&key_env)).flatten();
            let url = url.unwrap_or_else(|| {
                let listen = env(LISTEN_ENV)
                    .filter(|v| !v.trim().is_empty())
                    .or_else(|| cli.listen.clone())
                    .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
                format!("http://{listen}")
            });
            status::run(&url, key.as_deref(), json)
        }
        None => {
            server::init_tracing();
            let Some(path) = cli.config else {
                eprintln!("switchyard-coordinator: --config FILE is required");
                return ExitCode::from(2);
            };
            match Settings::load(&path, cli.listen.as_deref(), &env) {
                Ok(settings) => server::run(settings),
                Err(e) => {
                    tracing::error!("{e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
