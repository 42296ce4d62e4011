//! `switchyard-coordinator`: the cluster view of a Switchyard deployment (see
//! `switchyard_coordinator::entry` for the commands).

fn main() -> std::process::ExitCode {
    switchyard_coordinator::entry::main()
}
