//! TLS to the hydration dependencies, with certificates made here: an `https://` provider and a
//! real `redis-server` speaking TLS only (`rediss://`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentsearch_hydrate::{CachedValue, HttpHydrator, Hydrator, RedisCache, SchemaCache};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use crate::support::{request, start_tls_provider, unique_project};

/// A certificate authority; `issue` gives (certificate PEM, key PEM) for names.
struct Authority(CertifiedIssuer<'static, KeyPair>);

impl Authority {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Self(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    fn pem(&self) -> String {
        self.0.pem()
    }

    fn issue(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(ToString::to_string).collect();
        let params = CertificateParams::new(names).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

#[tokio::test]
async fn an_https_provider_hydrates_when_its_certificate_is_trusted() {
    let authority = Authority::new("provider CA");
    let (cert, key) = authority.issue(&["localhost"]);
    let (base, provider) = start_tls_provider(&cert, &key).await;
    let url = format!("{base}/hydrate");
    let req = request(
        &unique_project(),
        "alice@example.com",
        "SALESFORCE_CREATE_LEAD",
    );
    let timeout = Duration::from_secs(3);

    let trusted =
        HttpHydrator::with_roots(&url, timeout, Some(authority.pem().as_bytes())).unwrap();
    let schema = trusted.hydrate(&req).await.unwrap().expect("a schema");
    assert!(schema.parameters_json.contains("Region__c"));
    assert_eq!(provider.requests(), 1);

    // Another authority's roots, or the system's: the certificate is refused, nothing is sent.
    let other = Authority::new("other CA");
    let untrusted = HttpHydrator::with_roots(&url, timeout, Some(other.pem().as_bytes())).unwrap();
    assert!(untrusted.hydrate(&req).await.is_err());
    let system = HttpHydrator::new(&url, timeout).unwrap();
    assert!(system.hydrate(&req).await.is_err());
    // Plain HTTP to the TLS port gets no answer either.
    let plain = HttpHydrator::new(&url.replace("https://", "http://"), timeout).unwrap();
    assert!(plain.hydrate(&req).await.is_err());
    assert_eq!(provider.requests(), 1);
}

/// A `redis-server` listening for TLS only, killed when dropped.
struct TlsRedis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn tls_redis(authority: &Authority) -> TlsRedis {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = authority.issue(&["localhost", "127.0.0.1"]);
    let (cert_file, key_file, ca_file) = (
        dir.path().join("redis.crt"),
        dir.path().join("redis.key"),
        dir.path().join("ca.crt"),
    );
    std::fs::write(&cert_file, cert).unwrap();
    std::fs::write(&key_file, key).unwrap();
    std::fs::write(&ca_file, authority.pem()).unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--tls-port")
        .arg(port.to_string())
        .arg("--tls-cert-file")
        .arg(&cert_file)
        .arg("--tls-key-file")
        .arg(&key_file)
        .arg("--tls-ca-cert-file")
        .arg(&ca_file)
        .args(["--tls-auth-clients", "no", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed (the CI script installs it)");
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "redis-server with TLS did not start on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    TlsRedis {
        child,
        port,
        _dir: dir,
    }
}

#[tokio::test]
async fn a_rediss_cache_checks_the_server_certificate() {
    let authority = Authority::new("redis CA");
    let redis = tls_redis(&authority).await;
    let url = format!("rediss://localhost:{}", redis.port);
    let timeout = Duration::from_secs(3);

    let cache = RedisCache::with_roots(&url, timeout, Some(authority.pem().as_bytes())).unwrap();
    cache.ping().await.unwrap();
    let key = format!("tls-test:{}", unique_project());
    let value = CachedValue::Static;
    cache
        .put(&key, &value, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(cache.get(&key).await.unwrap(), Some(value));

    // A server whose certificate another authority issued is refused.
    let other = Authority::new("other CA");
    let untrusted = RedisCache::with_roots(&url, timeout, Some(other.pem().as_bytes())).unwrap();
    assert!(untrusted.ping().await.is_err());
    // Plain text to the TLS port gets no answer.
    let plain = RedisCache::new(&format!("redis://localhost:{}", redis.port), timeout).unwrap();
    assert!(plain.ping().await.is_err());
}
