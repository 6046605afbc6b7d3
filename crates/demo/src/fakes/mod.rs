pub mod apiserver;
pub mod kubelet;

/// Code generated from `proto/podresources/v1/api.proto` (build.rs): the server the exporter's
/// own generated code leaves out, and a raw client for the fake's tests.
#[allow(
    dead_code,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    missing_docs
)]
pub mod pb {
    tonic::include_proto!("v1");
}
