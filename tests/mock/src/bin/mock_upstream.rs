//! `switchyard-mock-upstream`: the mock OpenAI / Anthropic upstream as a process (see
//! `switchyard_mock::cli`).

fn main() -> std::process::ExitCode {
    switchyard_mock::cli::main()
}
