// The fake kubelet serves the pod-resources v1 API from the same vendored proto the exporter's
// client is built from; the exporter keeps its generated types to itself, so the server (and a
// raw client, for the fake's own tests) is generated here. protox parses it in-process:
// building needs no `protoc` binary.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PODRESOURCES_PROTO: &str = "../../proto/podresources/v1/api.proto";
    println!("cargo:rerun-if-changed={PODRESOURCES_PROTO}");
    let fds = protox::compile([PODRESOURCES_PROTO], ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
