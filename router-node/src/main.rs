//! `switchyard-node`: run a router node, validate a config, or start a demo (see
//! `switchyard_node::entry` for the commands).

// The request path allocates small, short-lived buffers on several threads; mimalloc
// (a well-kept allocator made for that pattern) measured faster than glibc malloc here.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    switchyard_node::entry::main()
}
