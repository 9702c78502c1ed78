//! Runs the router's public APIs: gRPC (tool search, catalog, context search and syncs, health,
//! reflection) and REST.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::{Error, Result};
use agentsearch_proto::tls::ServerTls;
use agentsearch_proto::v1::connections_server::ConnectionsServer;
use agentsearch_proto::v1::context_search_server::ContextSearchServer;
use agentsearch_proto::v1::context_sync_server::ContextSyncServer;
use agentsearch_proto::v1::tool_catalog_server::ToolCatalogServer;
use agentsearch_proto::v1::tool_search_server::ToolSearchServer;
use futures::FutureExt;
use tokio::net::TcpListener;
use tonic::codec::CompressionEncoding;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::Router;
use crate::auth::Auth;
use crate::grpc::PublicGrpc;
use crate::http::guard::RestAccess;
use crate::rest::{RestState, app};

/// Largest gRPC message (a catalog batch).
const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// Binds `http` and `grpc` and serves until `shutdown` resolves. Refuses non-loopback binds
/// without authentication. `access` lists the web origins and host names the REST API serves.
pub async fn serve(
    router: Arc<Router>,
    auth: Auth,
    access: RestAccess,
    tls: Option<ServerTls>,
    http: SocketAddr,
    grpc: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    auth.check_bind(http, "the REST API")?;
    auth.check_bind(grpc, "the gRPC API")?;
    let http_listener = TcpListener::bind(http)
        .await
        .map_err(|e| Error::Unavailable(format!("bind {http}: {e}")))?;
    let grpc_listener = TcpListener::bind(grpc)
        .await
        .map_err(|e| Error::Unavailable(format!("bind {grpc}: {e}")))?;
    serve_on_tls(
        router,
        auth,
        access,
        tls,
        http_listener,
        grpc_listener,
        shutdown,
    )
    .await
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open requests finish: HTTP/1.1
/// and HTTP/2, a connection must send a request's headers within
/// `limits.header_read_timeout_ms`, and at most `limits.max_connections` are open (more are
/// closed as they are accepted, counted as shed).
async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: &agentsearch_common::config::LimitsConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;

    let connections = Arc::new(tokio::sync::Semaphore::new(limits.max_connections as usize));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    let header_read = Duration::from_millis(limits.header_read_timeout_ms);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read);
    // Idle HTTP/2 connections are pinged, and closed when the ping goes unanswered.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!(error = %err, "accepting a REST connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = connections.clone().try_acquire_owned() else {
                    metrics::counter!(agentsearch_common::metrics::SHED, "api" => "rest_connection")
                        .increment(1);
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (app, builder, watcher) = (app.clone(), builder.clone(), graceful.watcher());
                let tls = tls.clone();
                tokio::spawn(async move {
                    // A connection that sends nothing within the header-read timeout is closed
                    // (before its first byte, hyper applies no timeout of its own).
                    let mut first = [0u8; 1];
                    match tokio::time::timeout(header_read, stream.peek(&mut first)).await {
                        Ok(Ok(n)) if n > 0 => {}
                        _ => return,
                    }
                    let service = TowerToHyperService::new(app);
                    match tls {
                        Some(acceptor) => {
                            // The handshake has the header-read timeout too.
                            let stream = match tokio::time::timeout(header_read, acceptor.accept(stream)).await {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(err)) => {
                                    tracing::debug!(error = %err, "REST TLS handshake failed");
                                    return;
                                }
                                Err(_) => return,
                            };
                            let connection = builder.serve_connection(TokioIo::new(stream), service);
                            let _ = watcher.watch(connection.into_owned()).await;
                        }
                        None => {
                            let connection = builder.serve_connection(TokioIo::new(stream), service);
                            let _ = watcher.watch(connection.into_owned()).await;
                        }
                    }
                    drop(permit);
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    // Open requests finish within their timeout; a connection that still holds on is cut.
    let limit = Duration::from_millis(limits.request_timeout_ms);
    if tokio::time::timeout(limit, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("REST connections still open after limits.request_timeout_ms: closing them");
    }
    Ok(())
}

/// How often gRPC health is brought in line with readiness.
const HEALTH_EVERY: Duration = Duration::from_secs(2);

async fn set_all(reporter: &HealthReporter, services: &[&'static str], status: ServingStatus) {
    for service in services {
        reporter.set_service_status(*service, status).await;
    }
}

async fn mirror_readiness(
    router: Arc<Router>,
    reporter: HealthReporter,
    services: Vec<&'static str>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut last = None;
    loop {
        let ready = router.readiness().await.ready;
        metrics::gauge!(agentsearch_common::metrics::READY).set(if ready { 1.0 } else { 0.0 });
        if last != Some(ready) && !router.lifecycle().draining() {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            set_all(&reporter, &services, status).await;
            last = Some(ready);
        }
        tokio::select! {
            _ = stopped.changed() => return,
            () = tokio::time::sleep(HEALTH_EVERY) => {}
        }
    }
}

/// Like [`serve`], on listeners the caller bound (tests bind port 0), with the default
/// [`RestAccess`]: no web origin, and only loopback names for anonymous requests.
pub async fn serve_on(
    router: Arc<Router>,
    auth: Auth,
    http: TcpListener,
    grpc: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    serve_on_with(router, auth, RestAccess::default(), http, grpc, shutdown).await
}

/// [`serve_on`] with the REST API's allowed web origins and host names.
pub async fn serve_on_with(
    router: Arc<Router>,
    auth: Auth,
    access: RestAccess,
    http: TcpListener,
    grpc: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    serve_on_tls(router, auth, access, None, http, grpc, shutdown).await
}

/// [`serve_on_with`] over TLS when `tls` is set: both listeners then speak TLS only.
pub async fn serve_on_tls(
    router: Arc<Router>,
    auth: Auth,
    access: RestAccess,
    tls: Option<ServerTls>,
    http: TcpListener,
    grpc: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let http_addr = http
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;
    let grpc_addr = grpc
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let services: Vec<&'static str> = vec![
        "",
        <ToolSearchServer<PublicGrpc> as NamedService>::NAME,
        <ToolCatalogServer<PublicGrpc> as NamedService>::NAME,
        <ContextSearchServer<PublicGrpc> as NamedService>::NAME,
        <ContextSyncServer<PublicGrpc> as NamedService>::NAME,
        <ConnectionsServer<PublicGrpc> as NamedService>::NAME,
    ];
    // gRPC health mirrors readiness, checked every HEALTH_EVERY until the servers stop.
    let (stopped_tx, stopped_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(mirror_readiness(
        router.clone(),
        health_reporter.clone(),
        services.clone(),
        stopped_rx,
    ));
    // On the shutdown signal: report not ready at once, keep serving for the drain period (load
    // balancers stop sending meanwhile), then stop accepting and let in-flight requests finish.
    let lifecycle = router.lifecycle().clone();
    let drain = router.drain();
    let reporter = health_reporter.clone();
    let drain_services = services.clone();
    let shutdown = async move {
        shutdown.await;
        lifecycle.start_draining();
        set_all(&reporter, &drain_services, ServingStatus::NotServing).await;
        if !drain.is_zero() {
            tracing::info!(
                drain_secs = drain.as_secs_f64(),
                "draining: not ready, still serving"
            );
            tokio::time::sleep(drain).await;
        }
        tracing::info!("closing listeners; in-flight requests finish");
    }
    .boxed()
    .shared();
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(agentsearch_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| Error::Internal(format!("reflection: {e}")))?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(agentsearch_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| Error::Internal(format!("reflection: {e}")))?;

    let public = PublicGrpc::new(router.clone(), auth.clone());
    let search = ToolSearchServer::new(public.clone())
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let catalog = ToolCatalogServer::new(public.clone())
        .accept_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let context_search = ContextSearchServer::new(public.clone())
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let connections =
        ConnectionsServer::new(public.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES);
    let context_sync = ContextSyncServer::new(public)
        .accept_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    agentsearch_common::metrics::handle();
    let limits = router.limits().clone();
    // A call whose answer takes longer than limits.request_timeout_ms is answered TIMEOUT by the
    // admission layer; a caller's shorter grpc-timeout applies too (tonic answers CANCELLED).
    let mut grpc_builder = tonic::transport::Server::builder()
        // Idle connections are pinged; one whose peer stopped answering is closed.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .tcp_keepalive(Some(Duration::from_secs(60)));
    if let Some(tls) = &tls {
        // A TLS handshake must finish within the time a plain connection has for its headers.
        grpc_builder = grpc_builder
            .tls_config(tls.grpc(Duration::from_millis(limits.header_read_timeout_ms)))
            .map_err(|e| Error::config("tls.cert_file", format!("gRPC TLS: {e}")))?;
    }
    let grpc_server = grpc_builder
        // Admission first: a refused call never reaches routing, so metrics label only calls
        // that were routed (refusals are counted by agentsearch_requests_shed_total).
        .layer(agentsearch_proto::admission::AdmissionLayer::new(
            router.admission().clone(),
        ))
        .layer(agentsearch_proto::grpc_metrics::GrpcMetricsLayer)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(search)
        .add_service(catalog)
        .add_service(context_search)
        .add_service(context_sync)
        .add_service(connections)
        .serve_with_incoming_shutdown(
            agentsearch_proto::incoming::bounded(
                grpc,
                limits.max_connections as usize,
                Duration::from_millis(limits.header_read_timeout_ms),
                "grpc_connection",
            ),
            shutdown.clone(),
        );

    let rest = app(RestState {
        router,
        auth,
        access,
    });
    let acceptor = tls.as_ref().map(ServerTls::acceptor);
    let http_server = serve_http(http, rest, acceptor, &limits, shutdown.clone());
    tracing::info!(
        %http_addr,
        %grpc_addr,
        tls = tls.is_some(),
        client_certificates = tls.as_ref().is_some_and(ServerTls::mutual),
        "router listening"
    );
    // After the shutdown signal and the drain, in-flight calls get limits.request_timeout_ms to
    // finish; a stream still open then (a client that never ends its ingest) is cut.
    let cut = {
        let request_timeout = Duration::from_millis(limits.request_timeout_ms);
        async move {
            shutdown.await;
            tokio::time::sleep(request_timeout).await;
        }
    };
    let grpc_server = async {
        tokio::select! {
            result = grpc_server => result,
            () = cut => {
                tracing::warn!("gRPC calls still open after limits.request_timeout_ms: closing them");
                Ok(())
            }
        }
    };
    let (grpc_result, http_result) = tokio::join!(grpc_server, http_server);
    let _ = stopped_tx.send(true);
    grpc_result.map_err(|e| Error::Internal(format!("gRPC server: {e}")))?;
    http_result.map_err(|e| Error::Internal(format!("HTTP server: {e}")))?;
    Ok(())
}
