//! Certificate loading and hot reload (HAMi re-reads its certificates when the files change):
//! pairs made with `openssl` in a scratch directory, checked through the handle and through real
//! in-memory TLS handshakes, where the client verifies the server's signature with the
//! certificate it was shown.

use super::*;

use std::sync::atomic::{AtomicUsize, Ordering};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::{ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, ServerConnection, SignatureScheme};

fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hami-rs-tls-{test}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn cert(&self) -> PathBuf {
        self.0.join("tls.crt")
    }
    fn key(&self) -> PathBuf {
        self.0.join("tls.key")
    }
    /// A fresh self-signed pair for `cn` written to `name.crt` / `name.key`; `key_type` is
    /// `ec` (P-256) or `rsa`.
    fn generate(&self, name: &str, cn: &str, key_type: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (self.0.join(format!("{name}.crt")), self.0.join(format!("{name}.key")));
        let newkey: &[&str] = match key_type {
            "rsa" => &["-newkey", "rsa:2048"],
            _ => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
        };
        let out = std::process::Command::new("openssl")
            .args(["req", "-x509", "-nodes", "-days", "2", "-subj"])
            .arg(format!("/CN={cn}"))
            .args(["-addext", "subjectAltName=DNS:localhost"])
            .args(newkey)
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl 3 must be installed to run the TLS tests");
        assert!(out.status.success(), "openssl failed: {}", String::from_utf8_lossy(&out.stderr));
        (cert, key)
    }
    /// A fresh CA (`name.crt`, `name.key`).
    fn ca(&self, name: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (self.0.join(format!("{name}.crt")), self.0.join(format!("{name}.key")));
        openssl(&[
            "req",
            "-x509",
            "-nodes",
            "-days",
            "2",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            path(&key),
            "-out",
            path(&cert),
        ]);
        (cert, key)
    }
    /// A certificate for `cn` signed by `ca`, for the extended key usage `usage` (`clientAuth`,
    /// `serverAuth`).
    fn signed(&self, name: &str, cn: &str, ca: &(PathBuf, PathBuf), usage: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (self.0.join(format!("{name}.crt")), self.0.join(format!("{name}.key")));
        let (csr, ext) = (self.0.join(format!("{name}.csr")), self.0.join(format!("{name}.ext")));
        openssl(&[
            "req",
            "-new",
            "-nodes",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            path(&key),
            "-out",
            path(&csr),
        ]);
        std::fs::write(&ext, format!("basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\nsubjectAltName=DNS:{cn}\n"))
            .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            path(&csr),
            "-CA",
            path(&ca.0),
            "-CAkey",
            path(&ca.1),
            "-CAcreateserial",
            "-extfile",
            path(&ext),
            "-out",
            path(&cert),
        ]);
        (cert, key)
    }
    /// Installs a generated pair as the served files, with a modification time `bump` seconds
    /// ahead so a change is seen whatever the file system's time resolution.
    fn install(&self, pair: &(PathBuf, PathBuf), bump: u64) {
        for (from, to) in [(&pair.0, self.cert()), (&pair.1, self.key())] {
            std::fs::copy(from, &to).unwrap();
            touch(&to, bump);
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn openssl(args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl 3 must be installed to run the TLS tests");
    assert!(out.status.success(), "openssl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn touch(path: &Path, bump: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(bump)).unwrap();
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The DER of the first certificate in a PEM file.
fn der(path: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(path).unwrap()
}

/// Accepts any certificate (as kube-scheduler does: HAMi's chart configures the extender with
/// certificate checks off) but checks the handshake
/// signature against it, so the server must hold the matching key.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One complete handshake in memory; the certificate the client was shown.
fn handshake(server: &Arc<ServerConfig>) -> CertificateDer<'static> {
    handshake_as(server, None).0
}

/// One complete handshake in memory, the client presenting `client` (certificate file, key file)
/// if given: the certificate the client was shown, and the chain the server was shown.
fn handshake_as(
    server: &Arc<ServerConfig>,
    client: Option<&(PathBuf, PathBuf)>,
) -> (CertificateDer<'static>, Option<Vec<CertificateDer<'static>>>) {
    let p = provider();
    let builder = ClientConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(p)));
    let client_cfg = match client {
        Some((cert, key)) => {
            builder.with_client_auth_cert(vec![der(cert)], PrivateKeyDer::from_pem_file(key).unwrap()).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let mut client = ClientConnection::new(Arc::new(client_cfg), ServerName::try_from("localhost").unwrap()).unwrap();
    let mut srv = ServerConnection::new(server.clone()).unwrap();
    for _ in 0..10 {
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            srv.read_tls(&mut rd).unwrap();
            srv.process_new_packets().unwrap();
        }
        let mut buf = Vec::new();
        while srv.wants_write() {
            srv.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            client.read_tls(&mut rd).unwrap();
            client.process_new_packets().unwrap();
        }
        if !client.is_handshaking() && !srv.is_handshaking() {
            break;
        }
    }
    assert!(!client.is_handshaking(), "handshake did not finish");
    let shown = client.peer_certificates().unwrap()[0].clone().into_owned();
    let seen = srv.peer_certificates().map(|c| c.iter().map(|c| c.clone().into_owned()).collect());
    (shown, seen)
}

#[test]
fn load_serves_the_certificate_from_the_files() {
    install_provider();
    let s = Scratch::new("load");
    s.install(&s.generate("a", "first", "ec"), 0);
    let (cfg, handle) = load(&s.cert(), &s.key(), None).unwrap();
    assert_eq!(handle.current().cert[0], der(&s.cert()));
    assert_eq!(handshake(&cfg), der(&s.cert()));
}

#[test]
fn rsa_keys_load_too() {
    install_provider();
    let s = Scratch::new("rsa");
    s.install(&s.generate("a", "rsa", "rsa"), 0);
    let (cfg, _) = load(&s.cert(), &s.key(), None).unwrap();
    assert_eq!(handshake(&cfg), der(&s.cert()));
}

#[test]
fn a_reload_serves_the_new_certificate_to_every_copy_of_the_config() {
    // As in HAMi, certificates are re-read when the files change. actix-web clones the
    // config per socket, so the clones must follow too.
    install_provider();
    let s = Scratch::new("reload");
    let (first, second) = (s.generate("a", "first", "ec"), s.generate("b", "second", "ec"));
    s.install(&first, 0);
    let (cfg, handle) = load(&s.cert(), &s.key(), None).unwrap();
    let copy = Arc::new((*cfg).clone());
    s.install(&second, 10);
    handle.reload(&s.cert(), &s.key()).unwrap();
    assert_eq!(handle.current().cert[0], der(&second.0));
    assert_eq!(handshake(&cfg), der(&second.0));
    assert_eq!(handshake(&copy), der(&second.0));
}

#[test]
fn a_bad_new_file_keeps_the_old_certificate() {
    install_provider();
    let s = Scratch::new("bad");
    let (first, second) = (s.generate("a", "first", "ec"), s.generate("b", "second", "ec"));
    s.install(&first, 0);
    let (cfg, handle) = load(&s.cert(), &s.key(), None).unwrap();

    std::fs::write(s.cert(), "not a certificate").unwrap();
    assert!(matches!(handle.reload(&s.cert(), &s.key()), Err(Error::NoCert { .. })));
    // A new certificate with the old key: half of a rotation.
    std::fs::copy(&second.0, s.cert()).unwrap();
    assert!(matches!(handle.reload(&s.cert(), &s.key()), Err(Error::Mismatch { .. })));
    std::fs::write(s.key(), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap();
    assert!(handle.reload(&s.cert(), &s.key()).is_err());
    std::fs::remove_file(s.key()).unwrap();
    assert!(matches!(handle.reload(&s.cert(), &s.key()), Err(Error::Key { .. })));

    assert_eq!(handle.current().cert[0], der(&first.0));
    assert_eq!(handshake(&cfg), der(&first.0));
}

#[test]
fn load_reports_unusable_files() {
    install_provider();
    let s = Scratch::new("errors");
    let (a, b) = (s.generate("a", "first", "ec"), s.generate("b", "second", "ec"));
    assert!(matches!(load(&s.0.join("missing.crt"), &a.1, None), Err(Error::Cert { .. })));
    assert!(matches!(load(&a.0, &s.0.join("missing.key"), None), Err(Error::Key { .. })));
    assert!(matches!(load(&a.0, &b.1, None), Err(Error::Mismatch { .. })));
    let e = load(&a.0, &b.1, None).unwrap_err().to_string();
    assert!(e.contains("b.key") && e.contains("a.crt"), "{e}");
}

#[tokio::test]
async fn watch_swaps_in_changed_files_and_ignores_broken_ones() {
    // Hot reload: the watcher polls modification times.
    install_provider();
    let s = Scratch::new("watch");
    let (first, second) = (s.generate("a", "first", "ec"), s.generate("b", "second", "ec"));
    s.install(&first, 0);
    let (cfg, handle) = load(&s.cert(), &s.key(), None).unwrap();
    watch(handle.clone(), s.cert(), s.key(), Duration::from_millis(20));

    // Let the watcher record the first modification times before the files change.
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.install(&second, 10);
    let mut waited = 0;
    while handle.current().cert[0] != der(&second.0) {
        assert!(waited < 500, "the watcher never reloaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    assert_eq!(handshake(&cfg), der(&second.0));

    std::fs::write(s.cert(), "garbage").unwrap();
    touch(&s.cert(), 20);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(handle.current().cert[0], der(&second.0), "a broken file keeps the current pair");
    assert_eq!(handshake(&cfg), der(&second.0));
}

// --- client certificates (--client-ca-file) -----------------------------------------------------

/// A served pair, a client CA and the server's config asking clients for certificates.
fn with_client_ca(s: &Scratch) -> (Arc<ServerConfig>, Arc<ClientCa>, (PathBuf, PathBuf)) {
    s.install(&s.generate("serving", "localhost", "ec"), 0);
    let ca_pair = s.ca("client-ca");
    let ca = ClientCa::load(&ca_pair.0).unwrap();
    let (cfg, _) = load(&s.cert(), &s.key(), Some(&ca)).unwrap();
    (cfg, ca, ca_pair)
}

#[test]
fn a_client_certificate_the_ca_signed_is_trusted() {
    install_provider();
    let s = Scratch::new("client-ok");
    let (cfg, ca, ca_pair) = with_client_ca(&s);
    let client = s.signed("kube-scheduler", "kube-scheduler", &ca_pair, "clientAuth");
    let (_, seen) = handshake_as(&cfg, Some(&client));
    let chain = seen.expect("the client presented its certificate");
    assert_eq!(chain[0], der(&client.0));
    assert!(ca.verifies(&chain));
}

#[test]
fn other_client_certificates_complete_the_handshake_but_are_not_trusted() {
    // The webhook and /refit answer any caller, so no certificate fails a handshake; only the
    // extender verbs ask whether the CA verifies it.
    install_provider();
    let s = Scratch::new("client-other");
    let (cfg, ca, ca_pair) = with_client_ca(&s);
    let other_ca = s.ca("other-ca");
    for (what, client) in [
        ("self-signed", s.generate("selfsigned", "kube-scheduler", "ec")),
        ("signed by another CA", s.signed("stranger", "kube-scheduler", &other_ca, "clientAuth")),
        ("signed by the CA for serving only", s.signed("server-only", "kube-scheduler", &ca_pair, "serverAuth")),
    ] {
        let (_, seen) = handshake_as(&cfg, Some(&client));
        let chain = seen.unwrap_or_else(|| panic!("{what}: the chain reached the server"));
        assert!(!ca.verifies(&chain), "{what} must not be trusted");
    }
    // No certificate at all (an API server calling the webhook).
    let (shown, seen) = handshake_as(&cfg, None);
    assert_eq!(shown, der(&s.cert()));
    assert!(seen.is_none());
    assert!(!ca.verifies(&[]));
}

#[test]
fn without_a_client_ca_no_client_certificate_is_asked_for() {
    install_provider();
    let s = Scratch::new("client-none");
    s.install(&s.generate("serving", "localhost", "ec"), 0);
    let ca_pair = s.ca("client-ca");
    let client = s.signed("kube-scheduler", "kube-scheduler", &ca_pair, "clientAuth");
    let (cfg, _) = load(&s.cert(), &s.key(), None).unwrap();
    let (_, seen) = handshake_as(&cfg, Some(&client));
    assert!(seen.is_none(), "a server that asks for none is sent none");
}

#[test]
fn a_client_ca_file_without_a_ca_is_refused() {
    install_provider();
    let s = Scratch::new("client-ca-bad");
    assert!(matches!(ClientCa::load(&s.0.join("missing.crt")), Err(Error::Ca { .. })));
    let empty = s.0.join("empty.crt");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    assert!(matches!(ClientCa::load(&empty), Err(Error::NoCa { .. })));
}
