//! The HTTPS (h2 and HTTP/1.1) front for a plain upstream (see `switchyard_mock::tls_front`).

fn main() -> std::process::ExitCode {
    switchyard_mock::tls_front::main()
}
