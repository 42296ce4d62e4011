//! `switchyard-test-coordinator`: the `switchyard-coordinator` program, built by this package
//! so that the black-box tests run the coordinator of this very build (see the crate docs).

fn main() -> std::process::ExitCode {
    switchyard_coordinator::entry::main()
}
