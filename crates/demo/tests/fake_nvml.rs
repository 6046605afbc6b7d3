//! The exporter names the fake NVML library's variables without linking it (the library is a
//! test double, built beside the binary only with the demo).

use tessera_exporter::source::nvml::isolate::link;

#[test]
fn the_fake_nvml_epoch_variable_is_the_fake_librarys() {
    assert_eq!(link::FAKE_NVML_EPOCH_ENV, fake_nvml::EPOCH_ENV);
}
