//! The `agentsearch` binary; everything lives in the library.

/// mimalloc instead of the C library's allocator: a search allocates and frees thousands of small
/// objects (candidate lists, records, the answer), which glibc's allocator served at a tenth of a
/// search's CPU time (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agentsearch::main()
}
