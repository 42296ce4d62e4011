//! The minimal hyper responder, the benchmark's second baseline (see `switchyard_mock::minimal`).

fn main() -> std::process::ExitCode {
    switchyard_mock::minimal::main()
}
