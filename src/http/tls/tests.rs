//! Certificate loading and hot reload (protocol.md §1): pairs made with `openssl` in a scratch
//! directory, checked through the handle and through real in-memory TLS handshakes, where the
//! client verifies the server's signature with the certificate it was shown.

use super::*;

use std::sync::atomic::{AtomicUsize, Ordering};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
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
    /// Installs a generated pair as the served files, with a modification time `bump` seconds
    /// ahead so a change is seen whatever the file system's time resolution.
    fn install(&self, pair: &(PathBuf, PathBuf), bump: u64) {
        for (from, to) in [(&pair.0, self.cert()), (&pair.1, self.key())] {
            std::fs::copy(from, &to).unwrap();
            touch(&to, bump);
        }
    }
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

/// Accepts any certificate (as kube-scheduler does, protocol.md §1) but checks the handshake
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
    let p = provider();
    let client_cfg = ClientConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(p)))
        .with_no_client_auth();
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
    client.peer_certificates().unwrap()[0].clone().into_owned()
}

#[test]
fn load_serves_the_certificate_from_the_files() {
    install_provider();
    let s = Scratch::new("load");
    s.install(&s.generate("a", "first", "ec"), 0);
    let (cfg, handle) = load(&s.cert(), &s.key()).unwrap();
    assert_eq!(handle.current().cert[0], der(&s.cert()));
    assert_eq!(handshake(&cfg), der(&s.cert()));
}

#[test]
fn rsa_keys_load_too() {
    install_provider();
    let s = Scratch::new("rsa");
    s.install(&s.generate("a", "rsa", "rsa"), 0);
    let (cfg, _) = load(&s.cert(), &s.key()).unwrap();
    assert_eq!(handshake(&cfg), der(&s.cert()));
}

#[test]
fn a_reload_serves_the_new_certificate_to_every_copy_of_the_config() {
    // protocol.md §1: certificates are re-read when the files change. actix-web clones the
    // config per socket, so the clones must follow too.
    install_provider();
    let s = Scratch::new("reload");
    let (first, second) = (s.generate("a", "first", "ec"), s.generate("b", "second", "ec"));
    s.install(&first, 0);
    let (cfg, handle) = load(&s.cert(), &s.key()).unwrap();
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
    let (cfg, handle) = load(&s.cert(), &s.key()).unwrap();

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
    assert!(matches!(load(&s.0.join("missing.crt"), &a.1), Err(Error::Cert { .. })));
    assert!(matches!(load(&a.0, &s.0.join("missing.key")), Err(Error::Key { .. })));
    assert!(matches!(load(&a.0, &b.1), Err(Error::Mismatch { .. })));
    let e = load(&a.0, &b.1).unwrap_err().to_string();
    assert!(e.contains("b.key") && e.contains("a.crt"), "{e}");
}

#[tokio::test]
async fn watch_swaps_in_changed_files_and_ignores_broken_ones() {
    // protocol.md §1 hot reload: the watcher polls modification times.
    install_provider();
    let s = Scratch::new("watch");
    let (first, second) = (s.generate("a", "first", "ec"), s.generate("b", "second", "ec"));
    s.install(&first, 0);
    let (cfg, handle) = load(&s.cert(), &s.key()).unwrap();
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
