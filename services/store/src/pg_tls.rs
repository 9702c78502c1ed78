//! TLS to PostgreSQL with rustls: `require` encrypts without checking the server's certificate
//! (libpq's `sslmode=require`), `verify-full` checks the certificate against trusted authorities
//! and the host name (libpq's `sslmode=verify-full`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// How connections to PostgreSQL use TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgTls {
    Disable,
    /// Encrypted; the server's certificate is not checked.
    Require,
    /// Encrypted; the certificate must chain to `ca_file`'s authorities (the system's when
    /// `None`) and name the host connected to.
    VerifyFull {
        ca_file: Option<PathBuf>,
    },
}

/// The connector of `tls` (`None` for [`PgTls::Disable`]).
pub(crate) fn connector(tls: &PgTls) -> Result<Option<MakeRustlsConnect>, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Unavailable(format!("TLS setup: {e}")))?;
    let config = match tls {
        PgTls::Disable => return Ok(None),
        PgTls::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth(),
        PgTls::VerifyFull { ca_file } => builder
            .with_root_certificates(roots(ca_file.as_deref())?)
            .with_no_client_auth(),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, StoreError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    StoreError::Unavailable(format!(
                        "postgres.ca_file: cannot read certificates from {}: {e}",
                        path.display()
                    ))
                })?;
            if certs.is_empty() {
                return Err(StoreError::Unavailable(format!(
                    "postgres.ca_file: {} holds no PEM certificate",
                    path.display()
                )));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    StoreError::Unavailable(format!(
                        "postgres.ca_file: a certificate of {} is unusable: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(StoreError::Unavailable(
                    "postgres.tls_mode = verify-full: the system has no trusted certificate \
                     authorities; set postgres.ca_file"
                        .into(),
                ));
            }
        }
    }
    Ok(roots)
}

/// Accepts any server certificate but still checks the handshake's signatures, so the session
/// is encrypted to whoever holds the key of the certificate presented.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
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
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
