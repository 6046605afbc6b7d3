//! Unit tests of the kube source's own helpers; crates/demo/tests/kube runs it against the fake
//! API server.

use super::*;

#[test]
fn error_lines_are_bounded() {
    let e = KubeSourceError::InvalidConfig(format!("x\ny{}", "é".repeat(400)));
    let line = one_line(&e);
    assert!(!line.contains('\n'));
    assert!(line.len() <= MAX_ERROR_LEN + '…'.len_utf8());
}
