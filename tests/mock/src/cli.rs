//! The `switchyard-mock-upstream` command: the mock LLM provider as a process, for black-box
//! tests of the real gateway binaries, demos and the benchmark's "mock direct" baseline.
//!
//! It prints the bound address as the first line on stdout, then serves until SIGINT or
//! SIGTERM. See the crate docs for the control API. The command lives in the library (not
//! only in `src/bin/`) so that the test crate can build the same program under its own name
//! and find it through Cargo's `CARGO_BIN_EXE_*` variables.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::{AgentScript, MockConfig, MockUpstream, ToolCallSpec, parse_script};
use clap::Parser;

/// Mock OpenAI / Anthropic upstream with scripted faults.
#[derive(Debug, Parser)]
#[command(name = "switchyard-mock-upstream", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Runtime worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Content chunks per streamed response (words in a JSON one).
    #[arg(long, default_value_t = 20)]
    chunks: u32,
    /// Delay between streamed content chunks, in milliseconds.
    #[arg(long, default_value_t = 0)]
    chunk_delay_ms: u64,
    /// Delay before the first streamed content chunk, in milliseconds.
    #[arg(long, default_value_t = 0)]
    first_chunk_delay_ms: u64,
    /// JSON file with one fault object or an array of them, queued at start.
    #[arg(long)]
    fault_file: Option<PathBuf>,
    /// Answer 401 to requests without an API key.
    #[arg(long)]
    require_key: bool,
    /// Accept only these API keys (repeatable); others get a 401.
    #[arg(long = "valid-key")]
    valid_keys: Vec<String>,
    /// Model ids listed by GET /v1/models (comma-separated).
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// Longest a scripted stall may last, in seconds.
    #[arg(long, default_value_t = 300)]
    max_stall_secs: u64,
    /// Play an agent's model: ask for a call of this tool first, answer once its result is
    /// back (see --agent-tool-args, --agent-final-text).
    #[arg(long)]
    agent_tool: Option<String>,
    /// The scripted tool call's arguments (a JSON object).
    #[arg(long, default_value = "{}")]
    agent_tool_args: String,
    /// The scripted model's final answer.
    #[arg(long, default_value = "Done.")]
    agent_final_text: String,
    /// Answer POST /v1/responses with 404 {"detail":"Not Found"}, like a chat-only server.
    #[arg(long)]
    no_responses: bool,
}

/// Parses the command line, serves until a signal, and returns the exit code.
pub fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard-mock-upstream: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard-mock-upstream: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let mut config = MockConfig {
        listen: args.listen,
        chunks: args.chunks,
        chunk_delay: Duration::from_millis(args.chunk_delay_ms),
        first_chunk_delay: Duration::from_millis(args.first_chunk_delay_ms),
        require_key: args.require_key,
        valid_keys: args.valid_keys,
        max_stall: Duration::from_secs(args.max_stall_secs),
        ..MockConfig::default()
    };
    if !args.models.is_empty() {
        config.models = args.models;
    }
    config.serve_responses = !args.no_responses;
    if let Some(name) = args.agent_tool {
        let arguments = serde_json::from_str(&args.agent_tool_args)
            .map_err(|e| format!("bad --agent-tool-args: {e}"))?;
        config.agent = Some(AgentScript {
            tool: ToolCallSpec { name, arguments },
            final_text: args.agent_final_text,
        });
    }
    let faults = match &args.fault_file {
        Some(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            parse_script(&bytes).map_err(|e| format!("bad fault file {}: {e}", path.display()))?
        }
        None => Vec::new(),
    };

    let mock = MockUpstream::start(config)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    mock.script_all(faults)?;
    announce(mock.addr())?;

    wait_for_signal().await?;
    mock.shutdown().await;
    Ok(())
}

/// Prints the bound address as the first stdout line and flushes it.
// The address on stdout is this binary's interface: harnesses start it with port 0 and read
// the line to learn where it listens.
#[allow(clippy::print_stdout)]
fn announce(addr: SocketAddr) -> Result<(), String> {
    println!("{addr}");
    std::io::stdout()
        .flush()
        .map_err(|e| format!("cannot write the address to stdout: {e}"))
}

async fn wait_for_signal() -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|e| e.to_string()),
        _ = term.recv() => Ok(()),
    }
}
