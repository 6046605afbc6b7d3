//! A stand-in for a CUDA process with the probe loaded: calls `InitializeInjection` as the
//! driver does at `cuInit`, runs for `PROBE_HOST_MS` (default 2600), then exits through the
//! exit handlers, as a process returning from main does. The probe's host-process tests run
//! it against the stand-in CUPTI (`crates/fake-cupti`).

fn main() {
    if tessera_probe::InitializeInjection() != 1 {
        std::process::exit(1);
    }
    let ms = std::env::var("PROBE_HOST_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_600);
    std::thread::sleep(std::time::Duration::from_millis(ms));
    std::process::exit(0);
}
