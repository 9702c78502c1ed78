//! TLS from PEM files: the server side of the public listeners and of a shard's listener (gRPC
//! through tonic, REST through rustls directly), and the client side of router-to-shard calls.
//! Every file is read and checked when the process starts, so a wrong path, a file without a
//! certificate or a key that does not match its certificate stops it with the key named.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::config::{ShardsConfig, TlsConfig};
use agentsearch_common::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

fn read(key: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::config(key, format!("cannot read {}: {e}", path.display())))
}

fn certificates(key: &str, path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::config(
                key,
                format!("{} is not a PEM certificate file: {e}", path.display()),
            )
        })?;
    if certs.is_empty() {
        return Err(Error::config(
            key,
            format!("{} holds no PEM certificate", path.display()),
        ));
    }
    Ok(certs)
}

fn private_key(key: &str, path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
        Error::config(
            key,
            format!("{} holds no PEM private key: {e}", path.display()),
        )
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS of a listener, read and checked.
#[derive(Clone)]
pub struct ServerTls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    client_ca_pem: Option<Vec<u8>>,
    client_names: Arc<Vec<String>>,
    rest: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mutual", &self.mutual())
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The TLS of `[tls]`, or `None` when no certificate is configured.
    pub fn load(config: &TlsConfig) -> Result<Option<Self>> {
        let (Some(cert_file), Some(key_file)) = (&config.cert_file, &config.key_file) else {
            return Ok(None);
        };
        let cert_pem = read("tls.cert_file", cert_file)?;
        let key_pem = read("tls.key_file", key_file)?;
        let certs = certificates("tls.cert_file", cert_file, &cert_pem)?;
        let key = private_key("tls.key_file", key_file, &key_pem)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Internal(format!("TLS: {e}")))?;
        let (builder, client_ca_pem) = match &config.client_ca_file {
            Some(path) => {
                let pem = read("tls.client_ca_file", path)?;
                let mut roots = rustls::RootCertStore::empty();
                for cert in certificates("tls.client_ca_file", path, &pem)? {
                    roots.add(cert).map_err(|e| {
                        Error::config("tls.client_ca_file", format!("{}: {e}", path.display()))
                    })?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| Error::config("tls.client_ca_file", e.to_string()))?;
                (builder.with_client_cert_verifier(verifier), Some(pem))
            }
            None => (builder.with_no_client_auth(), None),
        };
        let mut rest = builder.with_single_cert(certs, key).map_err(|e| {
            Error::config(
                "tls.key_file",
                format!("cannot serve tls.cert_file with this key: {e}"),
            )
        })?;
        rest.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Some(Self {
            cert_pem,
            key_pem,
            client_ca_pem,
            client_names: Arc::new(config.client_names.clone()),
            rest: Arc::new(rest),
        }))
    }

    /// Whether callers must present a certificate (mutual TLS).
    pub fn mutual(&self) -> bool {
        self.client_ca_pem.is_some()
    }

    /// The names of which a caller's certificate must carry one (empty: any).
    pub fn client_names(&self) -> Arc<Vec<String>> {
        self.client_names.clone()
    }

    /// The gRPC listener's TLS; a handshake must finish within `handshake_timeout`.
    pub fn grpc(&self, handshake_timeout: Duration) -> ServerTlsConfig {
        let mut tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .timeout(handshake_timeout);
        if let Some(ca) = &self.client_ca_pem {
            tls = tls.client_ca_root(Certificate::from_pem(ca));
        }
        tls
    }

    /// The REST listener's TLS (HTTP/2 and HTTP/1.1 by ALPN).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.rest.clone())
    }
}

/// How a router calls its shards over TLS, or `None` for plain text: TLS when
/// `shards.tls_ca_file` or a client certificate is set, or when an address is `https://`.
pub fn shard_client_tls(shards: &ShardsConfig) -> Result<Option<ClientTlsConfig>> {
    let https = shards.remote.iter().any(|a| a.starts_with("https://"));
    if shards.tls_ca_file.is_none() && shards.tls_cert_file.is_none() && !https {
        return Ok(None);
    }
    let mut tls = ClientTlsConfig::new();
    tls = match &shards.tls_ca_file {
        Some(path) => {
            let pem = read("shards.tls_ca_file", path)?;
            certificates("shards.tls_ca_file", path, &pem)?;
            tls.ca_certificate(Certificate::from_pem(pem))
        }
        None => tls.with_native_roots(),
    };
    if let (Some(cert_file), Some(key_file)) = (&shards.tls_cert_file, &shards.tls_key_file) {
        let cert_pem = read("shards.tls_cert_file", cert_file)?;
        let key_pem = read("shards.tls_key_file", key_file)?;
        let certs = certificates("shards.tls_cert_file", cert_file, &cert_pem)?;
        let key = private_key("shards.tls_key_file", key_file, &key_pem)?;
        // The pair is checked here, not at the first call.
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Internal(format!("TLS: {e}")))?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_client_auth_cert(certs, key)
            .map_err(|e| {
                Error::config(
                    "shards.tls_key_file",
                    format!("cannot present shards.tls_cert_file with this key: {e}"),
                )
            })?;
        tls = tls.identity(Identity::from_pem(cert_pem, key_pem));
    }
    if let Some(name) = &shards.tls_server_name {
        tls = tls.domain_name(name.clone());
    }
    Ok(Some(tls))
}

/// Whether the certificate `leaf` is valid for one of `names` (its DNS names, wildcards
/// included, as a server name is checked).
pub fn certificate_names_one_of(leaf: &CertificateDer<'_>, names: &[String]) -> bool {
    let Ok(cert) = webpki::EndEntityCert::try_from(leaf) else {
        return false;
    };
    names.iter().any(|name| {
        rustls::pki_types::ServerName::try_from(name.as_str())
            .is_ok_and(|name| cert.verify_is_valid_for_subject_name(&name).is_ok())
    })
}
