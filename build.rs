//! Compiles proto/checkpoint.proto and proto/model_topic.proto with prost-build, using the protoc binary
//! vendored from crates.io unless PROTOC points at another.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/checkpoint.proto");
    println!("cargo:rerun-if-changed=proto/model_topic.proto");
    if std::env::var_os("PROTOC").is_none() {
        // SAFETY: build scripts are single-threaded; nothing else reads the environment concurrently.
        unsafe { std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?) };
    }
    prost_build::compile_protos(&["proto/checkpoint.proto", "proto/model_topic.proto"], &["proto"])?;
    Ok(())
}
