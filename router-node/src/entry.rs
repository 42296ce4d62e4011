//! The `switchyard-node` command line: run a router node, validate a config, or start a demo.
//!
//! It lives in the library so that the black-box test crate can build the same program
//! under its own name (Cargo locates only a package's own binaries for its tests).
//!
//! ```text
//! switchyard-node --config switchyard.toml          # run
//! switchyard-node --config switchyard.toml --check  # validate, list every error, exit 0/1
//! switchyard-node demo                              # node + two mock providers, try failover
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "switchyard-node", version, about = "Switchyard router node")]
struct Cli {
    /// Config file (TOML).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Validate the config (and that its secrets resolve), print every problem, and exit.
    #[arg(long)]
    check: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start a node on 127.0.0.1:8080 with two in-process mock providers (one healthy, one
    /// always failing) and print a curl command that shows failover.
    Demo {
        /// Client listener port.
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// Admin listener port.
        #[arg(long, default_value_t = 9090)]
        admin_port: u16,
    },
}

/// Parses the command line, runs the command, and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match (cli.command, cli.config) {
        (Some(Command::Demo { port, admin_port }), _) => crate::cli::demo(port, admin_port),
        (None, Some(path)) if cli.check => crate::cli::check(&path),
        (None, Some(path)) => crate::cli::run(&path),
        (None, None) => {
            eprintln!("switchyard-node: --config FILE is required (or use `switchyard-node demo`)");
            ExitCode::from(2)
        }
    }
}
