//! `switchyard-node`: the Switchyard data plane (work in progress).

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "switchyard-node {}: not implemented yet",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}
