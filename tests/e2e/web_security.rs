//! TLS, client certificates, basic auth and live reload of `--web.config.file`, exercised with a
//! real client (curl) against `tessera_exporter::web::serve` on 127.0.0.1. Certificates are generated
//! per test with rcgen; nothing secret is committed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// Long enough for several reload polls (every 2 s) even on a loaded CI machine; a passing
/// test returns as soon as the condition holds.
const DEADLINE: Duration = Duration::from_secs(40);

// ---------------------------------------------------------------------------------------------
// Certificates

struct Ca {
    cert: Certificate,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    Ca {
        cert: p.self_signed(&key).unwrap(),
        key,
    }
}

/// A leaf certificate and its key, as PEM.
fn leaf(ca: &Ca, name: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
    let mut p =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A temp directory with: ca.crt, server.crt/key (for 127.0.0.1 and localhost), client.crt/key
/// (signed by ca), rogue.crt/key (a client cert from another CA) and, for rotation tests,
/// ca2.crt with server2.crt/key.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let good = ca("tessera test CA");
        let other = ca("some other CA");
        let second = ca("rotated CA");
        let write = |name: &str, body: &str| std::fs::write(dir.path().join(name), body).unwrap();
        write("ca.crt", &good.cert.pem());
        write("ca2.crt", &second.cert.pem());
        let server_sans = ["127.0.0.1", "localhost"];
        let (c, k) = leaf(
            &good,
            "tessera",
            &server_sans,
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        write("server.crt", &c);
        write("server.key", &k);
        let (c, k) = leaf(
            &second,
            "tessera",
            &server_sans,
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        write("server2.crt", &c);
        write("server2.key", &k);
        let (c, k) = leaf(
            &good,
            "prometheus",
            &["prometheus"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        write("client.crt", &c);
        write("client.key", &k);
        let (c, k) = leaf(
            &other,
            "prometheus",
            &["prometheus"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        write("rogue.crt", &c);
        write("rogue.key", &k);
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }

    /// Writes web.yml in place (truncate and write, as an editor or `kubectl cp` would).
    fn write_config(&self, yaml: &str) -> PathBuf {
        let path = self.path("web.yml");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(yaml.as_bytes()).unwrap();
        f.sync_all().unwrap();
        path
    }
}

/// bcrypt at the minimum cost keeps the suite fast; exporter-toolkit files usually say `$2y$`
/// (htpasswd), which must verify like `$2b$`.
fn hash(password: &str) -> String {
    bcrypt::hash(password, 4)
        .unwrap()
        .replacen("$2b$", "$2y$", 1)
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

fn users(list: &[(&str, &str)]) -> String {
    let mut s = String::from("basic_auth_users:\n");
    for (user, hash) in list {
        s.push_str(&format!("  {user}: '{hash}'\n"));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Server

#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Server {
    port: u16,
    logs: Logs,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

fn app() -> Router {
    Router::new()
        .route("/metrics", get(|| async { "gpu_up 1\n" }))
        .route("/healthz", get(|| async { "ok\n" }))
}

impl Server {
    /// Serves on its own thread and current-thread runtime, so that a thread-local tracing
    /// subscriber sees every log line the server writes.
    fn start(config: Option<&Path>) -> Self {
        let web = config.map(|p| {
            (
                p.to_path_buf(),
                tessera_exporter::web::load(p).expect("web config loads"),
            )
        });
        let logs = Logs::default();
        let sink = logs.0.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_writer(move || LogWriter(sink.clone()))
                .finish();
            let _guard = tracing::subscriber::set_default(subscriber);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = port_tx.send(listener.local_addr()?.port());
                let shutdown = async move {
                    let _ = stop_rx.await;
                };
                tessera_exporter::web::serve(listener, app(), web, shutdown).await
            })
        });
        let port = port_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server starts");
        Server {
            port,
            logs,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// Stops the server and returns what `serve` returned.
    fn shutdown(mut self) -> std::io::Result<()> {
        let _ = self.stop.take().map(|s| s.send(()));
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Client

struct Reply {
    /// None when no HTTP response came back (connection or handshake failure).
    status: Option<u16>,
    headers: String,
    stderr: String,
}

/// `curl` with a 10 s limit; `args` go before the URL.
fn curl(url: &str, args: &[&str]) -> Reply {
    let headers = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("curl")
        .args([
            "-sS",
            "-v",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-D",
        ])
        .arg(headers.path())
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed (scripts/install-test-deps.sh)");
    let code: u16 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    Reply {
        status: (out.status.success() && code != 0).then_some(code),
        headers: std::fs::read_to_string(headers.path()).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn cacert(files: &Files, name: &str) -> String {
    files.path(name).display().to_string()
}

fn get_as(server: &Server, files: &Files, user_pass: Option<&str>) -> Option<u16> {
    let ca = cacert(files, "ca.crt");
    let mut args = vec!["--cacert", ca.as_str()];
    if let Some(up) = user_pass {
        args.extend(["-u", up]);
    }
    curl(&server.url("https", "/metrics"), &args).status
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("not within {DEADLINE:?}: {what}");
}

fn assert_no_secrets(logs: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!logs.contains(s), "a secret reached the log: {logs}");
    }
    assert!(
        !logs.contains("PRIVATE KEY"),
        "key material reached the log: {logs}"
    );
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn basic_auth_over_tls() {
    let files = Files::new();
    let (alice, bob) = (hash("s3cret-alice"), hash("s3cret-bob"));
    let path = files.write_config(&format!(
        "{TLS}{}",
        users(&[("alice", &alice), ("bob", &bob)])
    ));
    let server = Server::start(Some(&path));

    assert_eq!(
        get_as(&server, &files, Some("alice:s3cret-alice")),
        Some(200)
    );
    assert_eq!(get_as(&server, &files, Some("bob:s3cret-bob")), Some(200));
    // Again, now from the cache of recent verifications.
    assert_eq!(
        get_as(&server, &files, Some("alice:s3cret-alice")),
        Some(200)
    );
    assert_eq!(
        get_as(&server, &files, Some("alice:s3cret-bob")),
        Some(401),
        "wrong password"
    );
    assert_eq!(
        get_as(&server, &files, Some("alice:")),
        Some(401),
        "empty password"
    );
    assert_eq!(
        get_as(&server, &files, Some("mallory:s3cret-alice")),
        Some(401),
        "unknown user"
    );
    assert_eq!(get_as(&server, &files, None), Some(401), "no credentials");

    let ca = cacert(&files, "ca.crt");
    let r = curl(&server.url("https", "/metrics"), &["--cacert", &ca]);
    assert!(
        r.headers
            .to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"tessera\""),
        "{}",
        r.headers
    );
    // Every route is behind auth, health checks included (as in exporter-toolkit).
    assert_eq!(
        curl(&server.url("https", "/healthz"), &["--cacert", &ca]).status,
        Some(401)
    );
    assert_eq!(
        curl(
            &server.url("https", "/healthz"),
            &["--cacert", &ca, "-u", "bob:s3cret-bob"]
        )
        .status,
        Some(200)
    );

    let logs = server.logs.text();
    assert_no_secrets(&logs, &["s3cret", &alice, &bob]);
    assert!(
        logs.contains("basic auth failed"),
        "debug logging is on: {logs}"
    );
}

#[test]
fn plain_http_to_the_tls_port_fails() {
    let files = Files::new();
    let path = files.write_config(TLS);
    let server = Server::start(Some(&path));
    let r = curl(&server.url("http", "/metrics"), &[]);
    assert_eq!(r.status, None, "plain HTTP got an answer: {}", r.stderr);
    // The server itself is fine.
    assert_eq!(get_as(&server, &files, None), Some(200));
}

#[test]
fn client_certificates_are_verified() {
    let files = Files::new();
    let path = files.write_config(&format!(
        "{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
    ));
    let server = Server::start(Some(&path));
    let ca = cacert(&files, "ca.crt");
    let url = server.url("https", "/metrics");
    let with = |cert: &str, key: &str| {
        let (c, k) = (cacert(&files, cert), cacert(&files, key));
        curl(&url, &["--cacert", &ca, "--cert", &c, "--key", &k])
    };
    assert_eq!(with("client.crt", "client.key").status, Some(200));
    let rogue = with("rogue.crt", "rogue.key");
    assert_eq!(
        rogue.status, None,
        "a client cert from another CA was accepted: {}",
        rogue.stderr
    );
    let none = curl(&url, &["--cacert", &ca]);
    assert_eq!(
        none.status, None,
        "no client cert was accepted: {}",
        none.stderr
    );
}

#[test]
fn minimum_tls_version_is_honoured() {
    let files = Files::new();
    let ca = cacert(&files, "ca.crt");

    let path = files.write_config(&format!("{TLS}  min_version: TLS13\n"));
    let server = Server::start(Some(&path));
    let url = server.url("https", "/metrics");
    let r = curl(&url, &["--cacert", &ca, "--tls-max", "1.2"]);
    assert_eq!(
        r.status, None,
        "TLS 1.2 accepted with min_version TLS13: {}",
        r.stderr
    );
    let r = curl(&url, &["--cacert", &ca, "--tlsv1.3"]);
    assert_eq!(r.status, Some(200), "{}", r.stderr);
    assert!(r.stderr.contains("TLSv1.3"), "{}", r.stderr);
    drop(server);

    let path = files.write_config(&format!("{TLS}  min_version: TLS12\n"));
    let server = Server::start(Some(&path));
    let url = server.url("https", "/metrics");
    let r = curl(&url, &["--cacert", &ca, "--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(r.status, Some(200), "{}", r.stderr);
    assert!(r.stderr.contains("TLSv1.2"), "{}", r.stderr);
    drop(server);

    let path = files.write_config(&format!("{TLS}  max_version: TLS12\n"));
    let server = Server::start(Some(&path));
    let r = curl(
        &server.url("https", "/metrics"),
        &["--cacert", &ca, "--tlsv1.3"],
    );
    assert_eq!(
        r.status, None,
        "TLS 1.3 accepted with max_version TLS12: {}",
        r.stderr
    );
}

#[test]
fn a_new_password_replaces_the_old_one_without_a_restart() {
    let files = Files::new();
    let old = hash("old-password");
    let path = files.write_config(&format!("{TLS}{}", users(&[("alice", &old)])));
    let server = Server::start(Some(&path));
    assert_eq!(
        get_as(&server, &files, Some("alice:old-password")),
        Some(200)
    );

    let new = hash("new-password");
    files.write_config(&format!("{TLS}{}", users(&[("alice", &new)])));
    eventually("the new password works", || {
        get_as(&server, &files, Some("alice:new-password")) == Some(200)
    });
    // The old one was verified (and cached) before: the cache must not keep it alive.
    assert_eq!(
        get_as(&server, &files, Some("alice:old-password")),
        Some(401)
    );
    let logs = server.logs.text();
    assert!(logs.contains("web config reloaded"), "{logs}");
    assert_no_secrets(&logs, &["old-password", "new-password", &old, &new]);
}

#[test]
fn a_broken_rewrite_keeps_the_old_config() {
    let files = Files::new();
    let good = hash("good-password");
    let path = files.write_config(&format!("{TLS}{}", users(&[("alice", &good)])));
    let server = Server::start(Some(&path));
    assert_eq!(
        get_as(&server, &files, Some("alice:good-password")),
        Some(200)
    );

    // A plain-text password: invalid, and it must not be echoed.
    files.write_config(&format!(
        "{TLS}basic_auth_users:\n  alice: plaintext-oops\n"
    ));
    let warned = || {
        server
            .logs
            .text()
            .matches("keeping the previous web config")
            .count()
    };
    eventually("the bad file is reported", || warned() >= 1);
    assert_eq!(
        get_as(&server, &files, Some("alice:good-password")),
        Some(200)
    );
    assert_eq!(
        get_as(&server, &files, Some("alice:plaintext-oops")),
        Some(401)
    );
    // The same problem is reported once, not on every poll.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(warned(), 1, "{}", server.logs.text());

    // Broken YAML, then a good file again: the watcher is still alive.
    files.write_config("tls_server_config: [unclosed\n");
    eventually("the second problem is reported", || warned() >= 2);
    assert_eq!(
        get_as(&server, &files, Some("alice:good-password")),
        Some(200)
    );
    let fixed = hash("fixed-password");
    files.write_config(&format!("{TLS}{}", users(&[("alice", &fixed)])));
    eventually("the fixed file is taken", || {
        get_as(&server, &files, Some("alice:fixed-password")) == Some(200)
    });

    let logs = server.logs.text();
    let warn_lines: Vec<&str> = logs.lines().filter(|l| l.contains(" WARN ")).collect();
    assert!(
        warn_lines.iter().all(|l| l.contains("web.yml")),
        "warnings name the file: {logs}"
    );
    assert_no_secrets(&logs, &["plaintext-oops", "good-password", &good, &fixed]);
}

#[test]
fn a_rotated_certificate_is_served_to_new_connections() {
    let files = Files::new();
    let path = files.write_config(TLS);
    let server = Server::start(Some(&path));
    assert_eq!(get_as(&server, &files, None), Some(200));
    // cert-manager style: the files change, the config does not.
    std::fs::write(files.path("server.key"), files.read("server2.key")).unwrap();
    std::fs::write(files.path("server.crt"), files.read("server2.crt")).unwrap();
    let ca2 = cacert(&files, "ca2.crt");
    eventually("the new certificate is served", || {
        curl(&server.url("https", "/metrics"), &["--cacert", &ca2]).status == Some(200)
    });
    assert_eq!(
        get_as(&server, &files, None),
        None,
        "the old CA no longer matches"
    );
}

#[test]
fn basic_auth_without_tls_and_no_config_at_all() {
    let files = Files::new();
    let path = files.write_config(&users(&[("alice", &hash("pw"))]));
    let server = Server::start(Some(&path));
    let url = server.url("http", "/metrics");
    assert_eq!(curl(&url, &["-u", "alice:pw"]).status, Some(200));
    assert_eq!(curl(&url, &["-u", "alice:nope"]).status, Some(401));
    assert_eq!(curl(&url, &[]).status, Some(401));
    drop(server);

    // No web config: plain axum::serve, no auth.
    let server = Server::start(None);
    assert_eq!(curl(&server.url("http", "/metrics"), &[]).status, Some(200));
    assert!(server.shutdown().is_ok());
}

#[test]
fn response_headers_from_the_config() {
    let files = Files::new();
    let path = files.write_config(&format!(
        "{TLS}http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
    ));
    let server = Server::start(Some(&path));
    let ca = cacert(&files, "ca.crt");
    let r = curl(&server.url("https", "/metrics"), &["--cacert", &ca]);
    assert_eq!(r.status, Some(200));
    assert!(
        r.headers
            .to_ascii_lowercase()
            .contains("x-content-type-options: nosniff"),
        "{}",
        r.headers
    );
}

#[test]
fn tls_shutdown_stops_accepting_and_returns() {
    let files = Files::new();
    let path = files.write_config(TLS);
    let server = Server::start(Some(&path));
    assert_eq!(get_as(&server, &files, None), Some(200));
    let url = server.url("https", "/metrics");
    assert!(server.shutdown().is_ok());
    let r = curl(&url, &["--cacert", &cacert(&files, "ca.crt")]);
    assert_eq!(r.status, None, "still answering after shutdown");
}

#[test]
fn turning_tls_off_needs_a_restart() {
    let files = Files::new();
    let path = files.write_config(&format!("{TLS}{}", users(&[("alice", &hash("pw"))])));
    let server = Server::start(Some(&path));
    assert_eq!(get_as(&server, &files, Some("alice:pw")), Some(200));
    // Valid on its own, but the listener already speaks TLS: refused, TLS and auth stay.
    files.write_config(&users(&[("alice", &hash("other"))]));
    eventually("the refusal is reported", || {
        server
            .logs
            .text()
            .contains("turning TLS on or off needs a restart")
    });
    assert_eq!(get_as(&server, &files, Some("alice:pw")), Some(200));
    assert_eq!(get_as(&server, &files, Some("alice:other")), Some(401));
}
