//! TLS: building the rustls config from the web config, and the accept loop that serves the
//! Router over it. Each connection takes the rustls config current when it is accepted, so a
//! reloaded certificate or client CA applies to new connections without a restart.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    ring as ring_provider, verify_tls12_signature, verify_tls13_signature, CryptoProvider,
    WebPkiSupportedAlgorithms,
};
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{
    version, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme, SupportedProtocolVersion,
};
use tokio_rustls::TlsAcceptor;

use super::settings::{ClientAuth, TlsSettings, TlsVersion, WebConfig};

/// A client that opens a connection and never finishes the handshake must not hold a task and
/// a socket for ever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Same for a client that never finishes sending its request headers (slowloris).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// At shutdown, in-flight requests get this long to finish; a scrape takes milliseconds.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

type FieldError = (String, String);

fn field_error(field: &str, reason: impl Into<String>) -> FieldError {
    (format!("tls_server_config.{field}"), reason.into())
}

/// The ring provider is named explicitly rather than taken from the process default, which
/// another dependency (kube) may or may not have installed.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring_provider::default_provider())
}

fn certificates(pem_bytes: &[u8], field: &str) -> Result<Vec<CertificateDer<'static>>, FieldError> {
    let certs = CertificateDer::pem_slice_iter(pem_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| field_error(field, "not valid PEM"))?;
    if certs.is_empty() {
        return Err(field_error(field, "holds no PEM CERTIFICATE block"));
    }
    Ok(certs)
}

pub(crate) fn server_config(s: &TlsSettings) -> Result<ServerConfig, FieldError> {
    let provider = provider();
    let chain = certificates(&s.cert_pem, s.cert_field)?;
    // The pem error is not quoted: its text can carry bytes of the section it choked on.
    let key = PrivateKeyDer::from_pem_slice(&s.key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => field_error(s.key_field, "holds no PEM private key block"),
        _ => field_error(s.key_field, "not a valid PEM private key"),
    })?;
    let roots = match &s.client_ca_pem {
        Some(pem_bytes) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(pem_bytes, s.client_ca_field)? {
                roots.add(cert).map_err(|e| {
                    field_error(s.client_ca_field, format!("unusable CA certificate: {e}"))
                })?;
            }
            Some(Arc::new(roots))
        }
        None => None,
    };
    let verifier: Arc<dyn ClientCertVerifier> = match (s.client_auth, roots) {
        (ClientAuth::NoClientCert, _) => WebPkiClientVerifier::no_client_auth(),
        (ClientAuth::RequestClientCert, _) => Arc::new(AnyClientCert::new(false, &provider)),
        (ClientAuth::RequireAnyClientCert, _) => Arc::new(AnyClientCert::new(true, &provider)),
        (ClientAuth::VerifyClientCertIfGiven, Some(roots)) => {
            WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| field_error(s.client_ca_field, format!("unusable: {e}")))?
        }
        (ClientAuth::RequireAndVerifyClientCert, Some(roots)) => {
            WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| field_error(s.client_ca_field, format!("unusable: {e}")))?
        }
        // config.rs refuses a verifying mode without a CA; kept total for the compiler.
        (_, None) => return Err(field_error("client_ca_file", "missing")),
    };
    let versions: Vec<&'static SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &version::TLS12),
        (TlsVersion::Tls13, &version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (s.min_version..=s.max_version).contains(v))
    .map(|(_, p)| p)
    .collect();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| field_error("min_version", format!("unusable: {e}")))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| field_error(s.key_field, format!("does not fit the certificate: {e}")))?;
    config.ignore_client_order = s.prefer_server_cipher_suites;
    config.alpn_protocols = if s.http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// RequestClientCert and RequireAnyClientCert: Go's semantics, which ask for a certificate but
/// do not check who signed it. The handshake signature is still verified, so the client must
/// hold the certificate's key. exporter-toolkit documents both modes as insecure; they exist
/// so that configs written for it keep working.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl AnyClientCert {
    fn new(mandatory: bool, provider: &CryptoProvider) -> Self {
        Self {
            mandatory,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, tokio_rustls::rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Errors that concern one client, not the listener: accepting goes straight on.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    config: watch::Receiver<Arc<WebConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a clone of `alive`; once the last one is dropped, recv()
    // returns None: that is how shutdown knows the in-flight requests are done.
    let (alive, mut all_done) = mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Typically EMFILE: back off instead of spinning on a full fd table.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let current = config.borrow().clone();
        // The reload watcher never swaps TLS off under a TLS listener; dropping is the safe
        // answer should that ever change.
        let Some(tls) = current.tls.clone() else {
            continue;
        };
        let http2 = tls.alpn_protocols.iter().any(|p| p == b"h2");
        tokio::spawn(connection(
            stream,
            peer,
            TlsAcceptor::from(tls),
            http2,
            app.clone(),
            stop_rx.clone(),
            alive.clone(),
        ));
    }
    // Closing the listener refuses new connections while the open ones finish.
    drop(listener);
    let _ = stop_tx.send(true);
    drop(alive);
    if tokio::time::timeout(SHUTDOWN_GRACE, all_done.recv())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_seconds = SHUTDOWN_GRACE.as_secs(),
            "connections still open at the end of the shutdown grace period; closing them"
        );
    }
    Ok(())
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    http2: bool,
    app: Router,
    mut stop: watch::Receiver<bool>,
    _alive: mpsc::Sender<()>,
) {
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(s)) => s,
            // Scanners and plain-HTTP clients end up here: debug, not warn, to keep logs quiet.
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        () = stopped(&mut stop) => return,
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let builder = if http2 { builder } else { builder.http1_only() };
    let conn = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = stopped(&mut stop) => {
            // Finish the request in flight, then close; idle keep-alive connections close now.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Resolves once shutdown begins (or the server is gone). The watch guard is dropped here, not
/// held across the caller's next await.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
