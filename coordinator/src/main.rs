//! `switchyard-coordinator`: the cluster view of a Switchyard deployment.
//!
//! It will aggregate node heartbeats and the shared resilience state in Redis into
//! `/api/cluster/health` and fan cluster-wide admin actions out to the nodes. It never sits on
//! the request path. Today it only validates that it was invoked correctly.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "switchyard-coordinator {}: not implemented yet; see README.md",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}
