//! TLS with certificates made here: the router's public listeners speak TLS only, and router to
//! shard calls use mutual TLS with an internal credential distinct from the public token.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::auth::Auth;
use agentsearch_common::config::{Secret, ShardsConfig, TlsConfig};
use agentsearch_proto::tls::{ServerTls, shard_client_tls};
use agentsearch_proto::v1 as pb;
use agentsearch_router::{GrpcShard, Router, ShardClient, ShardSet};
use agentsearch_shard::LocalShard;
use agentsearch_tests::*;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const INTERNAL_TOKEN: &str = "internal-credential-0123456789";

/// A certificate authority, and PEM files of certificates it issued.
struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

impl Authority {
    fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), issuer.pem()).unwrap();
        Self { issuer, dir }
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `names` (DNS names or IP addresses): (certificate, key) files.
    fn issue(&self, file: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(ToString::to_string).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, file);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_file, key_file) = (
            self.dir.join(format!("{file}.pem")),
            self.dir.join(format!("{file}-key.pem")),
        );
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        (cert_file, key_file)
    }
}

/// A shard served over TLS; with `client_ca`, only callers with a certificate it issued for
/// `router.internal`.
async fn tls_shard(
    dir: &Path,
    (cert, key): &(PathBuf, PathBuf),
    client_ca: Option<PathBuf>,
    token: Option<&str>,
) -> (SocketAddr, oneshot::Sender<()>) {
    let shard = Arc::new(LocalShard::open(dir, Default::default(), Default::default()).unwrap());
    let tls = ServerTls::load(&TlsConfig {
        cert_file: Some(cert.clone()),
        key_file: Some(key.clone()),
        client_ca_file: client_ca,
        client_names: vec!["router.internal".to_string()],
    })
    .unwrap()
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let limits = agentsearch_common::config::LimitsConfig::default();
    let admission = agentsearch_shard::shard_admission(&limits);
    let auth = Auth::new(token.map(Secret::new));
    tokio::spawn(async move {
        agentsearch_shard::serve_on_tls(
            shard,
            auth,
            listener,
            async {
                let _ = stopped.await;
            },
            Duration::ZERO,
            admission,
            Some(tls),
            &limits,
        )
        .await
    });
    (addr, stop)
}

/// A router's client of the shard at `addr` as `shards` configures it.
fn client(addr: SocketAddr, shards: &ShardsConfig, token: Option<&str>) -> ShardClient {
    let tls = shard_client_tls(shards).unwrap();
    ShardClient::Grpc(
        GrpcShard::connect_lazy_tls(
            &addr.to_string(),
            &Auth::new(token.map(Secret::new)),
            tls.as_ref(),
        )
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_to_shard_calls_use_mutual_tls_and_the_internal_credential() {
    let dir = tempfile::tempdir().unwrap();
    let internal = Authority::new(dir.path(), "internal");
    let stranger = Authority::new(dir.path(), "stranger");
    let shard_cert = internal.issue("shard", &["shard.internal", "127.0.0.1"]);
    let (router_cert, router_key) = internal.issue("router", &["router.internal"]);
    let (stranger_cert, stranger_key) = stranger.issue("router", &["router.internal"]);
    let (intruder_cert, intruder_key) = internal.issue("intruder", &["intruder.internal"]);

    let mut addrs = Vec::new();
    let mut stops = Vec::new();
    for i in 0..2 {
        let data = dir.path().join(format!("shard{i}"));
        let (addr, stop) = tls_shard(
            &data,
            &shard_cert,
            Some(internal.ca()),
            Some(INTERNAL_TOKEN),
        )
        .await;
        addrs.push(addr);
        stops.push(stop);
    }
    let mutual = ShardsConfig {
        tls_ca_file: Some(internal.ca()),
        tls_cert_file: Some(router_cert.clone()),
        tls_key_file: Some(router_key.clone()),
        ..ShardsConfig::default()
    };

    // Refused: plain text, no client certificate, a certificate of another authority, the
    // right certificate with the public token instead of the internal one.
    let probe = |client: ShardClient| async move {
        client
            .info("tls-test", Duration::from_secs(3))
            .await
            .map(|_| ())
    };
    let plain = ShardClient::Grpc(
        GrpcShard::connect_lazy(
            &addrs[0].to_string(),
            &Auth::new(Some(Secret::new(INTERNAL_TOKEN))),
        )
        .unwrap(),
    );
    assert!(
        probe(plain).await.is_err(),
        "plain text reached a TLS shard"
    );
    let refused = [
        (
            "a caller without a client certificate",
            ShardsConfig {
                tls_ca_file: Some(internal.ca()),
                ..ShardsConfig::default()
            },
            INTERNAL_TOKEN,
        ),
        (
            "a certificate of another authority",
            ShardsConfig {
                tls_cert_file: Some(stranger_cert),
                tls_key_file: Some(stranger_key),
                ..mutual.clone()
            },
            INTERNAL_TOKEN,
        ),
        (
            // The right authority, but issued for another name (another workload it serves).
            "a certificate naming none of tls.client_names",
            ShardsConfig {
                tls_cert_file: Some(intruder_cert),
                tls_key_file: Some(intruder_key),
                ..mutual.clone()
            },
            INTERNAL_TOKEN,
        ),
        ("the public token", mutual.clone(), SERVICE_TOKEN),
        (
            // The router refuses a shard certificate that does not name the expected server.
            "a shard certificate for another name",
            ShardsConfig {
                tls_server_name: Some("other.internal".into()),
                ..mutual.clone()
            },
            INTERNAL_TOKEN,
        ),
    ];
    for (what, config, token) in &refused {
        let answer = probe(client(addrs[0], config, Some(token))).await;
        // Refused at the handshake (the error depends on when the connection breaks) or by the
        // shard's credential check (unavailable, as the router reports a shard refusing it).
        assert!(answer.is_err(), "{what} got in");
    }
    // The name the certificate carries, when the addresses are IPs.
    let named = ShardsConfig {
        tls_server_name: Some("shard.internal".into()),
        ..mutual.clone()
    };
    probe(client(addrs[0], &named, Some(INTERNAL_TOKEN)))
        .await
        .unwrap();

    // Accepted: the router's certificate and the internal token, end to end.
    let clients = addrs
        .iter()
        .map(|a| client(*a, &mutual, Some(INTERNAL_TOKEN)))
        .collect();
    let shards = ShardSet::discover(clients, Duration::from_secs(10))
        .await
        .unwrap();
    let (store, _schema) = pg_store().await;
    let router = Arc::new(Router::new(
        store,
        shards,
        Arc::new(agentsearch_embed::CachedEmbedder::new(embedder(), 4 << 20)),
        settings(),
    ));
    let (_http, grpc) = start_router(router.clone(), Auth::default()).await;
    let acks = load_catalog(grpc, PROJECT, &fixture_catalog(), 10).await;
    assert_eq!(acks.iter().map(|a| a.upserted).sum::<u32>(), 42);
    let answer = search(grpc, search_request("send an email")).await.unwrap();
    assert!(!answer.tools.is_empty());
    assert!(answer.errors.is_empty(), "{answer:?}");
    assert!(!answer.usage.unwrap().partial);
    // Both shards hold part of the catalog, so both were called over mutual TLS.
    let statuses = router.shards().statuses();
    assert_eq!(statuses.iter().filter(|s| s.reachable).count(), 2);
    drop(stops);
}

/// An HTTPS request with a client trusting `ca`: the response's status line, or the error.
async fn https_get(addr: SocketAddr, ca: &Path, name: &str, path: &str) -> std::io::Result<String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let mut stream = connector.connect(name, stream).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    Ok(text.lines().next().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_listeners_speak_tls_only() {
    let dir = tempfile::tempdir().unwrap();
    let public = Authority::new(dir.path(), "public");
    let other = Authority::new(dir.path(), "other");
    let (cert, key) = public.issue("search", &["localhost", "127.0.0.1"]);
    let tls = ServerTls::load(&TlsConfig {
        cert_file: Some(cert),
        key_file: Some(key),
        client_ca_file: None,
        client_names: Vec::new(),
    })
    .unwrap()
    .unwrap();

    let data = tempfile::tempdir().unwrap();
    let (shard, _local) = start_shard(data.path()).await;
    let (store, _schema) = pg_store().await;
    let router = grpc_router(store, &[shard.addr], settings()).await;
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (http_addr, grpc_addr) = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(agentsearch_router::serve_on_tls(
        router,
        Auth::default(),
        agentsearch_router::RestAccess::default(),
        Some(tls),
        http,
        grpc,
        async {
            let _ = stopped.await;
        },
    ));

    // REST: HTTPS answers; a client that does not trust the authority, or plain HTTP, gets
    // nothing.
    let status = https_get(http_addr, &public.ca(), "localhost", "/livez")
        .await
        .unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        https_get(http_addr, &other.ca(), "localhost", "/livez")
            .await
            .is_err()
    );
    let mut plain = tokio::net::TcpStream::connect(http_addr).await.unwrap();
    plain
        .write_all(b"GET /livez HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(15), plain.read_to_end(&mut answer)).await;
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plain HTTP was answered on the TLS listener: {}",
        String::from_utf8_lossy(&answer)
    );

    // gRPC: a TLS client loads and searches; a plain-text client is refused.
    let pem = std::fs::read(public.ca()).unwrap();
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{grpc_addr}"))
        .unwrap()
        .tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(pem))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    let acks = load_catalog_over(channel.clone(), PROJECT, &fixture_catalog(), 10, None).await;
    assert_eq!(acks.iter().map(|a| a.upserted).sum::<u32>(), 42);
    let answer = pb::tool_search_client::ToolSearchClient::new(channel)
        .search_tools(search_request("send an email"))
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.tools.is_empty());
    // The command-line client, trusting the authority.
    let out = std::process::Command::new(agentsearch_tests::procs::binary())
        .args([
            "search",
            "send an email",
            "--json",
            "--project",
            PROJECT,
            "--server",
        ])
        .arg(format!("https://localhost:{}", grpc_addr.port()))
        .arg("--ca-file")
        .arg(public.ca())
        .env_remove("AGENTSEARCH_TOKEN")
        .env_remove("AGENTSEARCH_SERVER")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"tools\""), "{stdout}");
    let plain = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .connect()
        .await;
    if let Ok(channel) = plain {
        let refused = pb::tool_search_client::ToolSearchClient::new(channel)
            .search_tools(search_request("send an email"))
            .await;
        assert!(
            refused.is_err(),
            "plain-text gRPC was answered on the TLS listener"
        );
    }
}

#[test]
fn tls_files_are_checked_at_start_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let authority = Authority::new(dir.path(), "ca");
    let (cert, key) = authority.issue("one", &["localhost"]);
    let (_other_cert, other_key) = authority.issue("two", &["localhost"]);
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let message = |result: agentsearch_common::Result<Option<ServerTls>>| match result {
        Err(err) => err.to_string(),
        Ok(_) => panic!("accepted"),
    };
    let config = |cert: &Path, key: &Path, ca: Option<&Path>| TlsConfig {
        cert_file: Some(cert.to_path_buf()),
        key_file: Some(key.to_path_buf()),
        client_ca_file: ca.map(Path::to_path_buf),
        client_names: Vec::new(),
    };

    assert!(ServerTls::load(&TlsConfig::default()).unwrap().is_none());
    assert!(
        ServerTls::load(&config(&cert, &key, Some(&authority.ca())))
            .unwrap()
            .unwrap()
            .mutual()
    );
    let missing = message(ServerTls::load(&config(
        &dir.path().join("nope.pem"),
        &key,
        None,
    )));
    assert!(missing.contains("tls.cert_file"), "{missing}");
    let not_pem = message(ServerTls::load(&config(&garbage, &key, None)));
    assert!(not_pem.contains("tls.cert_file"), "{not_pem}");
    let no_key = message(ServerTls::load(&config(&cert, &garbage, None)));
    assert!(no_key.contains("tls.key_file"), "{no_key}");
    let mismatch = message(ServerTls::load(&config(&cert, &other_key, None)));
    assert!(mismatch.contains("tls.key_file"), "{mismatch}");
    let bad_ca = message(ServerTls::load(&config(&cert, &key, Some(&garbage))));
    assert!(bad_ca.contains("tls.client_ca_file"), "{bad_ca}");

    let shards = |ca: &Path, cert: &Path, key: &Path| ShardsConfig {
        tls_ca_file: Some(ca.to_path_buf()),
        tls_cert_file: Some(cert.to_path_buf()),
        tls_key_file: Some(key.to_path_buf()),
        ..ShardsConfig::default()
    };
    assert!(
        shard_client_tls(&ShardsConfig::default())
            .unwrap()
            .is_none()
    );
    assert!(
        shard_client_tls(&shards(&authority.ca(), &cert, &key))
            .unwrap()
            .is_some()
    );
    let bad = shard_client_tls(&shards(&garbage, &cert, &key))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("shards.tls_ca_file"), "{bad}");
    let bad = shard_client_tls(&shards(&authority.ca(), &cert, &other_key))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("shards.tls_key_file"), "{bad}");
    // An http:// address cannot be called over TLS.
    let tls = shard_client_tls(&shards(&authority.ca(), &cert, &key)).unwrap();
    let refused = GrpcShard::connect_lazy_tls("http://127.0.0.1:1", &Auth::default(), tls.as_ref());
    assert!(refused.is_err());
}
