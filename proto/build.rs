//! Compiles the public and internal protos, with a file descriptor set for gRPC reflection.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        // No system protoc needed: use the vendored one. The build script is single-threaded here.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?)
        };
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("agentsearch_descriptor.bin"))
        .compile_protos(
            &[
                "agentsearch/v1/tools.proto",
                "agentsearch/v1/context.proto",
                "agentsearch/shard/v1/shard.proto",
            ],
            &["."],
        )?;
    println!("cargo:rerun-if-changed=agentsearch");
    Ok(())
}
