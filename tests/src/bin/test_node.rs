//! `switchyard-test-node`: the `switchyard-node` program, built by this package so that the
//! black-box tests run the node of this very build (see the crate docs).

// The same allocator as the shipped binary (router-node/src/main.rs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    switchyard_node::entry::main()
}
