use super::*;

#[test]
fn nvml_errors_become_short_reasons() {
    assert_eq!(error_reason(&NvmlError::InUse), "in_use");
    assert_eq!(error_reason(&NvmlError::NoPermission), "no_permission");
    assert_eq!(error_reason(&NvmlError::NotSupported), "not_supported");
    assert_eq!(
        error_reason(&NvmlError::UnexpectedVariant(999)),
        "unexpected_variant"
    );
}
