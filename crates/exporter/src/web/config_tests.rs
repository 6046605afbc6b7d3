use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

use super::*;

/// Cost 4 (the minimum) keeps tests fast; the cost does not change the format.
fn hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

struct Pki {
    ca_pem: String,
    server_pem: String,
    server_key: String,
    other_key: String,
}

fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca.self_signed(&ca_key).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca, &ca_key)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server_pem: server.pem(),
        server_key: server_key.serialize_pem(),
        other_key: KeyPair::generate().unwrap().serialize_pem(),
    }
}

/// A directory holding `web.yml` and the PEM files `pki` names.
fn dir_with(yaml: &str, pki: Option<&Pki>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(p) = pki {
        std::fs::write(dir.path().join("ca.crt"), &p.ca_pem).unwrap();
        std::fs::write(dir.path().join("server.crt"), &p.server_pem).unwrap();
        std::fs::write(dir.path().join("server.key"), &p.server_key).unwrap();
    }
    let path = dir.path().join("web.yml");
    std::fs::write(&path, yaml).unwrap();
    (dir, path)
}

fn load_err(yaml: &str, pki: Option<&Pki>) -> WebConfigError {
    let (_dir, path) = dir_with(yaml, pki);
    match load(&path) {
        Ok(c) => panic!("expected an error, loaded {c:?}"),
        Err(e) => e,
    }
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

#[test]
fn empty_file_means_no_tls_and_no_auth() {
    let (_dir, path) = dir_with("", None);
    let c = load(&path).unwrap();
    assert!(!c.tls_enabled());
    assert_eq!(c.basic_auth_users(), 0);
    let (_dir, path) = dir_with("# only a comment\n", None);
    assert!(!load(&path).unwrap().tls_enabled());
}

#[test]
fn users_without_tls_serve_plain_http_with_auth() {
    let yaml = format!("basic_auth_users:\n  alice: '{}'\n", hash("pw"));
    let (_dir, path) = dir_with(&yaml, None);
    let c = load(&path).unwrap();
    assert!(!c.tls_enabled());
    assert_eq!(c.basic_auth_users(), 1);
    // An empty tls_server_config is "no TLS", as in exporter-toolkit.
    let (_dir, path) = dir_with(&format!("tls_server_config: {{}}\n{yaml}"), None);
    assert!(!load(&path).unwrap().tls_enabled());
}

#[test]
fn unknown_keys_are_errors_at_every_level() {
    let e = load_err("tls_config:\n  cert_file: x\n", None);
    assert!(e.to_string().contains("unknown field `tls_config`"), "{e}");
    let p = pki();
    let e = load_err(
        &format!("{TLS}  client_auth: RequireAndVerifyClientCert\n"),
        Some(&p),
    );
    assert!(e.to_string().contains("unknown field `client_auth`"), "{e}");
    let e = load_err("http_server_config:\n  headers:\n    X-Foo: bar\n", None);
    assert!(e.to_string().contains("X-Foo"), "{e}");
    assert!(!e.to_string().contains('\n'), "one line: {e}");
}

#[test]
fn missing_key_file_names_the_field_and_the_file() {
    let p = pki();
    let (dir, path) = dir_with(TLS, Some(&p));
    std::fs::remove_file(dir.path().join("server.key")).unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.field(), Some("tls_server_config.key_file"));
    assert_eq!(e.path(), path.as_path());
    let msg = e.to_string();
    assert!(
        msg.contains(&dir.path().join("server.key").display().to_string()),
        "{msg}"
    );
    assert!(
        msg.starts_with(&format!("web config {}: ", path.display())),
        "{msg}"
    );
    let e = load_err("tls_server_config:\n  cert_file: server.crt\n", Some(&p));
    assert_eq!(e.field(), Some("tls_server_config.key_file"));
}

#[test]
fn bad_bcrypt_hashes_are_refused_without_quoting_them() {
    let e = load_err("basic_auth_users:\n  alice: hunter2-plaintext\n", None);
    assert_eq!(e.field(), Some("basic_auth_users.alice"));
    assert!(!e.to_string().contains("hunter2"), "{e}");
    // A number would be quoted by a serde type error; it must not be.
    let e = load_err("basic_auth_users:\n  alice: 8675309\n", None);
    assert_eq!(e.field(), Some("basic_auth_users.alice"));
    assert!(!e.to_string().contains("8675309"), "{e}");
    let truncated = &hash("pw")[..40];
    let e = load_err(
        &format!("basic_auth_users:\n  alice: '{truncated}'\n"),
        None,
    );
    assert!(!e.to_string().contains(truncated), "{e}");
}

#[test]
fn relative_paths_are_taken_from_the_config_directory() {
    let p = pki();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("conf")).unwrap();
    std::fs::create_dir_all(root.path().join("certs")).unwrap();
    std::fs::write(root.path().join("certs/server.crt"), &p.server_pem).unwrap();
    std::fs::write(root.path().join("certs/server.key"), &p.server_key).unwrap();
    let path = root.path().join("conf/web.yml");
    let yaml =
        "tls_server_config:\n  cert_file: ../certs/server.crt\n  key_file: ../certs/server.key\n";
    std::fs::write(&path, yaml).unwrap();
    // The test's working directory is the crate root, where ../certs does not exist.
    assert!(!Path::new("../certs/server.crt").exists());
    let c = load(&path).unwrap();
    assert!(c.tls_enabled());
    assert!(c
        .watched
        .contains(&root.path().join("conf/../certs/server.key")));
    // Absolute paths stay as they are.
    let abs = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        root.path().join("certs/server.crt").display(),
        root.path().join("certs/server.key").display()
    );
    std::fs::write(&path, abs).unwrap();
    assert!(load(&path).unwrap().tls_enabled());
}

#[test]
fn client_ca_and_client_auth_type_must_agree() {
    let p = pki();
    let e = load_err(&format!("{TLS}  client_ca_file: ca.crt\n"), Some(&p));
    assert_eq!(e.field(), Some("tls_server_config.client_ca_file"));
    for mode in ["VerifyClientCertIfGiven", "RequireAndVerifyClientCert"] {
        let e = load_err(&format!("{TLS}  client_auth_type: {mode}\n"), Some(&p));
        assert_eq!(
            e.field(),
            Some("tls_server_config.client_ca_file"),
            "{mode}"
        );
        let yaml = format!("{TLS}  client_auth_type: {mode}\n  client_ca_file: ca.crt\n");
        let (_dir, path) = dir_with(&yaml, Some(&p));
        assert!(load(&path).unwrap().tls_enabled(), "{mode}");
    }
    for mode in ["RequestClientCert", "RequireAnyClientCert", "NoClientCert"] {
        let (_dir, path) = dir_with(&format!("{TLS}  client_auth_type: {mode}\n"), Some(&p));
        assert!(load(&path).is_ok(), "{mode}");
    }
    let e = load_err(&format!("{TLS}  client_auth_type: Sometimes\n"), Some(&p));
    assert_eq!(e.field(), Some("tls_server_config.client_auth_type"));
}

#[test]
fn a_key_that_does_not_fit_the_certificate_is_refused_without_key_material() {
    let p = pki();
    let (dir, path) = dir_with(TLS, Some(&p));
    std::fs::write(dir.path().join("server.key"), &p.other_key).unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.field(), Some("tls_server_config.key_file"));
    assert!(!e.to_string().contains("PRIVATE KEY"), "{e}");
    std::fs::write(
        dir.path().join("server.key"),
        "-----BEGIN PRIVATE KEY-----\nzzzz\n",
    )
    .unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.field(), Some("tls_server_config.key_file"));
    assert!(!e.to_string().contains("zzzz"), "{e}");
    std::fs::write(dir.path().join("server.crt"), "not a certificate").unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.field(), Some("tls_server_config.cert_file"));
}

#[test]
fn inline_pem_works_and_cannot_be_mixed_with_files() {
    let p = pki();
    let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
    let yaml = format!(
        "tls_server_config:\n  cert: |\n{}  key: |\n{}",
        indent(&p.server_pem),
        indent(&p.server_key)
    );
    let (_dir, path) = dir_with(&yaml, None);
    assert!(load(&path).unwrap().tls_enabled());
    let e = load_err(&format!("{TLS}  cert: x\n"), Some(&p));
    assert_eq!(e.field(), Some("tls_server_config.cert"));
}

#[test]
fn tls_versions() {
    let p = pki();
    for (min, max, ok) in [
        ("TLS12", "TLS13", true),
        ("TLS13", "TLS13", true),
        ("TLS12", "TLS12", true),
        ("TLS10", "TLS13", true),
        ("TLS13", "TLS12", false),
        ("TLS12", "TLS11", false),
        ("SSL3", "TLS13", false),
    ] {
        let yaml = format!("{TLS}  min_version: {min}\n  max_version: {max}\n");
        let (_dir, path) = dir_with(&yaml, Some(&p));
        assert_eq!(load(&path).is_ok(), ok, "{min}..{max}");
    }
}

#[test]
fn settings_rustls_cannot_honour_are_refused() {
    let p = pki();
    for extra in [
        "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n",
        "  curve_preferences: [X25519]\n",
        "  client_allowed_sans: [a.example]\n",
    ] {
        let e = load_err(&format!("{TLS}{extra}"), Some(&p));
        assert!(e.to_string().contains("not supported"), "{e}");
    }
    let e = load_err("rate_limit:\n  interval: 1s\n  burst: 20\n", None);
    assert_eq!(e.field(), Some("rate_limit"));
}

#[test]
fn response_headers_are_validated() {
    let yaml = "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    \
                X-Content-Type-Options: nosniff\n    Strict-Transport-Security: max-age=31536000\n";
    let (_dir, path) = dir_with(yaml, None);
    let c = load(&path).unwrap();
    let names: Vec<&str> = c.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "strict-transport-security",
            "x-content-type-options",
            "x-frame-options"
        ]
    );
    let e = load_err(
        "http_server_config:\n  headers:\n    X-Frame-Options: allow-all\n",
        None,
    );
    assert_eq!(
        e.field(),
        Some("http_server_config.headers.X-Frame-Options")
    );
}

#[test]
fn debug_output_holds_no_secret() {
    let h = hash("pw");
    let p = pki();
    let yaml = format!("{TLS}basic_auth_users:\n  alice: '{h}'\n");
    let (_dir, path) = dir_with(&yaml, Some(&p));
    let shown = format!("{:?}", load(&path).unwrap());
    assert!(shown.contains("alice"), "{shown}");
    assert!(!shown.contains(&h) && !shown.contains("PRIVATE"), "{shown}");
}

#[test]
fn fingerprint_follows_content_not_timestamps() {
    let p = pki();
    let (dir, path) = dir_with(TLS, Some(&p));
    let a = load(&path).unwrap().fingerprint;
    std::fs::write(&path, TLS).unwrap();
    assert_eq!(
        load(&path).unwrap().fingerprint,
        a,
        "same content, same fingerprint"
    );
    // A rotated certificate changes it even though the config file did not change.
    let q = pki();
    std::fs::write(dir.path().join("server.crt"), &q.server_pem).unwrap();
    std::fs::write(dir.path().join("server.key"), &q.server_key).unwrap();
    assert_ne!(load(&path).unwrap().fingerprint, a);
}

#[test]
fn the_documented_example_is_valid() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/web/example.yml"
    );
    let p = pki();
    let (_dir, path) = dir_with(&std::fs::read_to_string(example).unwrap(), Some(&p));
    let c = load(&path).unwrap();
    assert!(c.tls_enabled());
    assert_eq!(c.basic_auth_users(), 1);
    let hash = &c.users[0].hash;
    assert!(hash.starts_with("$2y$10$"));
    assert!(
        bcrypt::verify("example", hash).unwrap(),
        "the example's password is \"example\""
    );
}
