//! The `agentsearch` binary; everything lives in the library.

fn main() -> std::process::ExitCode {
    agentsearch::main()
}
