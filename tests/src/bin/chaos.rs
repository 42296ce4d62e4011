//! `switchyard-chaos`: runs the chaos scenario against real processes and prints the report.
//!
//! ```text
//! switchyard-chaos                       # the short form (about 2 minutes)
//! switchyard-chaos --duration 10m        # the soak: a fault every 30 s, RSS/fd slopes
//! switchyard-chaos --out report.md       # also write the Markdown report
//! ```
//!
//! The node and coordinator are this package's `switchyard-test-node` and
//! `switchyard-test-coordinator`, built with it (`cargo build -p switchyard-tests`); set
//! `SWITCHYARD_BIN_DIR` to run another build's binaries instead. Exits 0 when
//! every invariant held, 1 when one broke, 2 when the scenario could not be set up.

use std::io::Write as _;
use std::time::Duration;

use clap::Parser;
use switchyard_tests::chaos::{self, Options};

#[derive(Parser)]
#[command(about = "Chaos scenario: 3 nodes, Redis, coordinator, mock upstreams, scheduled faults")]
struct Cli {
    /// Length of the load, e.g. `100s` or `10m`. Without it the short form runs.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Client requests per second (default: 150 short, 200 soak).
    #[arg(long)]
    rate: Option<u32>,
    /// Write the Markdown report here as well.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number
        .parse()
        .map_err(|_| format!("bad duration {text:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3_600),
        _ => return Err(format!("bad duration unit in {text:?} (use s, m or h)")),
    };
    if !(30..=24 * 3_600).contains(&secs) {
        return Err("the duration must be between 30 s and 24 h".to_owned());
    }
    Ok(Duration::from_secs(secs))
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut opts = match cli.duration {
        Some(d) if d > Duration::from_secs(180) => Options::soak(d),
        Some(d) => Options {
            duration: d,
            ..Options::short()
        },
        None => Options::short(),
    };
    if let Some(rate) = cli.rate {
        opts.rate = rate.clamp(1, 5_000);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard-chaos: cannot start a runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(chaos::run(&opts)) {
        Ok(report) => {
            let _ = writeln!(std::io::stdout(), "{}", report.markdown);
            if let Some(path) = cli.out
                && let Err(e) = std::fs::write(&path, &report.markdown)
            {
                eprintln!("switchyard-chaos: cannot write {}: {e}", path.display());
            }
            if report.passed() {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("switchyard-chaos: setup failed: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
