// protox parses the vendored kubelet proto in-process, so building needs no `protoc` binary.
// Generates the pod-resources client (crates/demo generates the server its fake kubelet serves).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PODRESOURCES_PROTO: &str = "../../proto/podresources/v1/api.proto";
    println!("cargo:rerun-if-changed={PODRESOURCES_PROTO}");
    let fds = protox::compile([PODRESOURCES_PROTO], ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
