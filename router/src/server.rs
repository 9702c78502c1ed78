//! Runs the router's public APIs: gRPC (tool search, catalog, context search and syncs, health,
//! reflection) and REST.

use std::net::SocketAddr;
use std::sync::Arc;

use agentsearch_common::{Error, Result};
use agentsearch_proto::v1::connections_server::ConnectionsServer;
use agentsearch_proto::v1::context_search_server::ContextSearchServer;
use agentsearch_proto::v1::context_sync_server::ContextSyncServer;
use agentsearch_proto::v1::tool_catalog_server::ToolCatalogServer;
use agentsearch_proto::v1::tool_search_server::ToolSearchServer;
use futures::FutureExt;
use tokio::net::TcpListener;
use tonic::codec::CompressionEncoding;

use crate::Router;
use crate::auth::Auth;
use crate::grpc::PublicGrpc;
use crate::rest::{RestState, app};
use crate::rest_guard::RestAccess;

/// Largest gRPC message (a catalog batch).
const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// Binds `http` and `grpc` and serves until `shutdown` resolves. Refuses non-loopback binds
/// without authentication. `access` lists the web origins and host names the REST API serves.
pub async fn serve(
    router: Arc<Router>,
    auth: Auth,
    access: RestAccess,
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
    serve_on_with(router, auth, access, http_listener, grpc_listener, shutdown).await
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
    let shutdown = shutdown.boxed().shared();
    let http_addr = http
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;
    let grpc_addr = grpc
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<ToolSearchServer<PublicGrpc>>()
        .await;
    health_reporter
        .set_serving::<ToolCatalogServer<PublicGrpc>>()
        .await;
    health_reporter
        .set_serving::<ContextSearchServer<PublicGrpc>>()
        .await;
    health_reporter
        .set_serving::<ContextSyncServer<PublicGrpc>>()
        .await;
    health_reporter
        .set_serving::<ConnectionsServer<PublicGrpc>>()
        .await;
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
    let grpc_server = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(search)
        .add_service(catalog)
        .add_service(context_search)
        .add_service(context_sync)
        .add_service(connections)
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true)),
            shutdown.clone(),
        );

    let rest = app(RestState {
        router,
        auth,
        access,
    });
    let http_server = axum::serve(http, rest).with_graceful_shutdown(shutdown);
    tracing::info!(%http_addr, %grpc_addr, "router listening");
    let (grpc_result, http_result) = tokio::join!(grpc_server, http_server.into_future());
    grpc_result.map_err(|e| Error::Internal(format!("gRPC server: {e}")))?;
    http_result.map_err(|e| Error::Internal(format!("HTTP server: {e}")))?;
    Ok(())
}
