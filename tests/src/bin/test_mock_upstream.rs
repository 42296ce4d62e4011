//! `switchyard-test-mock-upstream`: the `switchyard-mock-upstream` program, built by this
//! package so that its tests find it through `CARGO_BIN_EXE_*` (see the crate docs).

fn main() -> std::process::ExitCode {
    switchyard_mock::cli::main()
}
