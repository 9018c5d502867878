//! TLS for the main listener: a rustls `ServerConfig` whose certificate comes from the
//! `--cert_file`/`--key_file` PEM files and is swapped in place when they change, as HAMi re-reads
//! its certificates, and, with `--client-ca-file`, the CA whose client certificates the extender
//! verbs trust (see `http/access.rs`). Binds no socket; `app.rs` does.
//!
//! ```text
//!  load ──▶ ServerConfig ─(resolver)─▶ RwLock<Arc<CertifiedKey>> ◀── ReloadHandle::reload ◀── watch (every 5 s)
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::UnixTime;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading certificate chain {}", path.display())]
    Cert {
        path: PathBuf,
        #[source]
        source: pem::Error,
    },
    #[error("{} holds no certificate", path.display())]
    NoCert { path: PathBuf },
    #[error("reading private key {}", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: pem::Error,
    },
    #[error("private key {} is not a supported type", path.display())]
    KeyType {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("private key {} does not match certificate {}", key.display(), cert.display())]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("building the TLS server config")]
    Config(#[source] rustls::Error),
    #[error("reading client CA {}", path.display())]
    Ca {
        path: PathBuf,
        #[source]
        source: pem::Error,
    },
    #[error("client CA {} holds no usable CA certificate", path.display())]
    NoCa { path: PathBuf },
}

/// The ring provider, named explicitly so the server never depends on a process default: with two
/// providers compiled in, rustls cannot choose one and panics at run time.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a certificate chain and its key and checks that they belong together, so a half-written
/// pair (new certificate, old key) is refused instead of breaking every handshake.
fn read_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, Error> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| Error::Cert { path: cert.to_owned(), source })?;
    if chain.is_empty() {
        return Err(Error::NoCert { path: cert.to_owned() });
    }
    let der = PrivateKeyDer::from_pem_file(key).map_err(|source| Error::Key { path: key.to_owned(), source })?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|source| Error::KeyType { path: key.to_owned(), source })?;
    let ck = CertifiedKey::new(chain, signer);
    match ck.keys_match() {
        // A key type that cannot say its public key is trusted, as rustls itself does.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(ck),
        Err(source) => Err(Error::Mismatch { cert: cert.to_owned(), key: key.to_owned(), source }),
    }
}

/// Serves whatever key pair is current; every clone of the `ServerConfig` shares it.
struct Resolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Resolver")
    }
}

impl Resolver {
    fn current(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a complete key: the writer only assigns an `Arc`.
        match self.current.read() {
            Ok(k) => k.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
    fn set(&self, ck: CertifiedKey) {
        let ck = Arc::new(ck);
        match self.current.write() {
            Ok(mut k) => *k = ck,
            Err(p) => *p.into_inner() = ck,
        }
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Swaps the certificate of the `ServerConfig` it came with. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ReloadHandle {
    resolver: Arc<Resolver>,
}

impl ReloadHandle {
    /// The key pair handshakes get now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.resolver.current()
    }

    /// Reads the files again and serves them from the next handshake on. On `Err` the old pair
    /// stays in use.
    pub fn reload(&self, cert: &Path, key: &Path) -> Result<(), Error> {
        self.resolver.set(read_pair(cert, key)?);
        Ok(())
    }
}

/// The CA of `--client-ca-file`: a client chain it verifies is a trusted caller of the extender
/// verbs. Read once at start-up.
pub struct ClientCa {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCa")
    }
}

impl ClientCa {
    /// Reads the CA certificates (PEM, one or more). Fails when the file holds none that can
    /// anchor a chain.
    pub fn load(path: &Path) -> Result<Arc<ClientCa>, Error> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|source| Error::Ca { path: path.to_owned(), source })?;
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(Error::NoCa { path: path.to_owned() });
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|_| Error::NoCa { path: path.to_owned() })?;
        Ok(Arc::new(ClientCa { verifier }))
    }

    /// Whether `chain` (leaf first, as the client sent it) chains to the CA for client
    /// authentication and is valid now.
    pub fn verifies(&self, chain: &[CertificateDer<'_>]) -> bool {
        let Some((leaf, intermediates)) = chain.split_first() else { return false };
        self.verifier.verify_client_cert(leaf, intermediates, UnixTime::now()).is_ok()
    }
}

/// The handshake's side of client authentication: every client is asked for a certificate, none
/// is required, and a chain the CA does not verify does not fail the handshake (the webhook and
/// `/refit` answer any caller, and an API server may present a certificate of its own to
/// webhooks). The client must still prove it holds the key of what it presented; whether the
/// chain is trusted is [`ClientCa::verifies`]'s, asked once per connection.
#[derive(Debug)]
struct OfferClientAuth(Arc<ClientCa>);

impl ClientCertVerifier for OfferClientAuth {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.verifier.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verifier.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verifier.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.verifier.supported_verify_schemes()
    }
}

/// Builds the listener's TLS config from PEM files (the certificate file may hold a chain, leaf
/// first; the key may be PKCS#8, PKCS#1 or SEC1), asking clients for a certificate when a client
/// CA is given. Fails when either file is unusable.
pub fn load(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Arc<ClientCa>>,
) -> Result<(Arc<ServerConfig>, ReloadHandle), Error> {
    let resolver = Arc::new(Resolver { current: RwLock::new(Arc::new(read_pair(cert, key)?)) });
    // ALPN is left to actix-web, which sets the protocols it serves when it binds.
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().map_err(Error::Config)?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(Arc::new(OfferClientAuth(ca.clone()))),
        None => builder.with_no_client_auth(),
    };
    let cfg = builder.with_cert_resolver(resolver.clone());
    Ok((Arc::new(cfg), ReloadHandle { resolver }))
}

fn modified(cert: &Path, key: &Path) -> Option<(SystemTime, SystemTime)> {
    let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((m(cert)?, m(key)?))
}

/// Polls both files' modification times every `every` and reloads when either changed (a
/// Kubernetes Secret volume swaps a symlink, which `metadata` follows). A pair that fails to
/// load logs a warning and keeps the old one; it is retried when the files change again, so a
/// certificate written before its key is picked up once the key follows. Needs a running tokio
/// runtime; the task ends when the `ServerConfig` and every other handle are gone.
pub fn watch(handle: ReloadHandle, cert: PathBuf, key: PathBuf, every: Duration) {
    let resolver: Weak<Resolver> = Arc::downgrade(&handle.resolver);
    drop(handle);
    tokio::spawn(async move {
        let mut seen = modified(&cert, &key);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(resolver) = resolver.upgrade() else { return };
            let now = modified(&cert, &key);
            if now.is_none() || now == seen {
                // A file that is missing for a moment (mid-rotation) is looked at again next time.
                continue;
            }
            seen = now;
            match read_pair(&cert, &key) {
                Ok(ck) => {
                    resolver.set(ck);
                    tracing::info!(cert = %cert.display(), "TLS certificate reloaded");
                }
                Err(e) => {
                    let why = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
                    tracing::warn!(error = %e, %why, "TLS certificate not reloaded; keeping the current one");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests;
