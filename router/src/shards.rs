//! The router's view of its shards: one [`ShardClient`] type for a shard in this process or behind
//! gRPC, and the [`ShardSet`] of live shards by id.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentsearch_common::auth::Auth;
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, GetToolsRequest,
    GetToolsResponse, InlineSearchRequest, ReadSegmentsRequest, ReadSegmentsResponse,
    RecordDeleteRequest, SegmentUpsertRequest, ShardApi, ShardDeleteRequest, ShardInfo,
    ShardSearchRequest, ShardSearchResponse, ShardUpsertRequest, ShardWriteResponse, TermStats,
    TermStatsRequest,
};
use agentsearch_common::{Error, Result};
use agentsearch_proto::error_from_status;
use agentsearch_proto::shard_v1 as pb;
use agentsearch_proto::shard_v1::shard_client::ShardClient as PbShardClient;
use tonic::transport::{Channel, Endpoint};

/// Largest message exchanged with a shard.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A shard, in this process or remote.
#[derive(Clone)]
pub enum ShardClient {
    Local(Arc<dyn ShardApi>),
    Grpc(GrpcShard),
}

/// A remote shard over gRPC; calls carry the request id and the remaining deadline.
#[derive(Clone)]
pub struct GrpcShard {
    addr: String,
    client: PbShardClient<Channel>,
    /// `Bearer <token>` when shards require authentication.
    authorization: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl GrpcShard {
    /// A lazily connecting client for `addr` (`host:port` or a URL), authenticating with `auth`.
    pub fn connect_lazy(addr: &str, auth: &Auth) -> Result<Self> {
        let url = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let endpoint = Endpoint::from_shared(url)
            .map_err(|e| Error::invalid("shards", format!("`{addr}` is not a valid address: {e}")))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        let client = PbShardClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let authorization = match auth.header() {
            Some(header) => Some(
                header
                    .parse()
                    .map_err(|_| Error::invalid("auth.token", "must be printable ASCII"))?,
            ),
            None => None,
        };
        Ok(Self {
            addr: addr.to_string(),
            client,
            authorization,
        })
    }

    fn request<T>(&self, message: T, request_id: &str, timeout: Duration) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        req.set_timeout(timeout);
        if let Ok(v) = request_id.parse() {
            req.metadata_mut().insert("x-request-id", v);
        }
        if let Some(v) = &self.authorization {
            req.metadata_mut().insert("authorization", v.clone());
        }
        req
    }
}

/// A failed shard call as the router reports it: the shard's own error for bad input, otherwise
/// "unavailable" with the details in the log only.
fn remote(addr: &str, status: tonic::Status) -> Error {
    match error_from_status(&status) {
        err @ (Error::Internal(_) | Error::Unavailable(_) | Error::Unauthenticated(_)) => {
            tracing::warn!(shard = addr, error = %err, code = ?status.code(), "shard call failed");
            Error::Unavailable("a shard is unavailable".into())
        }
        other => other,
    }
}

impl ShardClient {
    /// Runs `call` on the local shard or the remote one, within `timeout`.
    pub async fn info(&self, request_id: &str, timeout: Duration) -> Result<ShardInfo> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.info().await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .info(g.request(pb::InfoRequest {}, request_id, timeout))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn term_stats(
        &self,
        req: TermStatsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<TermStats> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.term_stats(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .term_stats(g.request(pb::TermStatsRequest::from(req), request_id, timeout))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn search_tools(
        &self,
        req: ShardSearchRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ShardSearchResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.search_tools(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .search_tools(g.request(pb::SearchToolsRequest::from(req), request_id, timeout))
                    .await
                    .map_err(|s| remote(&g.addr, s))
                    .and_then(|r| r.into_inner().try_into()),
            }
        };
        within(timeout, fut).await
    }

    /// Ranks the tools carried in `req` on this shard; nothing is persisted there.
    pub async fn search_inline(
        &self,
        req: InlineSearchRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ShardSearchResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.search_inline(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .search_inline(g.request(
                        pb::SearchInlineRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map_err(|s| remote(&g.addr, s))
                    .and_then(|r| r.into_inner().try_into()),
            }
        };
        within(timeout, fut).await
    }

    pub async fn upsert_tools(
        &self,
        req: ShardUpsertRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ShardWriteResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.upsert_tools(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .upsert_tools(g.request(pb::UpsertToolsRequest::from(req), request_id, timeout))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn delete_tools(
        &self,
        req: ShardDeleteRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ShardWriteResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.delete_tools(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .delete_tools(g.request(pb::DeleteToolsRequest::from(req), request_id, timeout))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }
    pub async fn get_tools(
        &self,
        req: GetToolsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<GetToolsResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.get_tools(req).await,
                ShardClient::Grpc(g) => {
                    let response = g
                        .client
                        .clone()
                        .get_tools(g.request(pb::GetToolsRequest::from(req), request_id, timeout))
                        .await
                        .map_err(|s| remote(&g.addr, s))?;
                    GetToolsResponse::try_from(response.into_inner())
                }
            }
        };
        within(timeout, fut).await
    }

    pub async fn context_term_stats(
        &self,
        req: ContextStatsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<TermStats> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.context_term_stats(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .context_term_stats(g.request(
                        pb::ContextStatsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn search_segments(
        &self,
        req: ContextSearchRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ContextSearchResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.search_segments(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .search_segments(g.request(
                        pb::SearchSegmentsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn upsert_segments(
        &self,
        req: SegmentUpsertRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ShardWriteResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.upsert_segments(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .upsert_segments(g.request(
                        pb::UpsertSegmentsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn delete_records(
        &self,
        req: RecordDeleteRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ShardWriteResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.delete_records(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .delete_records(g.request(
                        pb::DeleteRecordsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }

    pub async fn read_segments(
        &self,
        req: ReadSegmentsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<Option<ReadSegmentsResponse>> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.read_segments(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .read_segments(g.request(
                        pb::ReadSegmentsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        within(timeout, fut).await
    }
}

async fn within<T>(timeout: Duration, fut: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| {
            Err(Error::Timeout(format!(
                "shard call exceeded {} ms",
                timeout.as_millis()
            )))
        })
}

/// The shards a router talks to, by stable shard id.
#[derive(Clone, Default)]
pub struct ShardSet {
    shards: BTreeMap<String, ShardClient>,
}

impl ShardSet {
    /// Builds the set by asking each client for its id. Remote shards are retried until `wait`
    /// has passed, so a router may start before its shards.
    pub async fn discover(clients: Vec<ShardClient>, wait: Duration) -> Result<Self> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut shards = BTreeMap::new();
        for client in clients {
            let info = loop {
                match client.info("startup", Duration::from_secs(2)).await {
                    Ok(info) => break info,
                    Err(err) if tokio::time::Instant::now() < deadline => {
                        tracing::warn!(error = %err, "shard not reachable yet, retrying");
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    Err(err) => {
                        return Err(Error::Unavailable(format!(
                            "shard did not answer at startup: {err}"
                        )));
                    }
                }
            };
            if shards.insert(info.shard_id.clone(), client).is_some() {
                return Err(Error::invalid(
                    "shards",
                    format!("two shards share the id `{}`", info.shard_id),
                ));
            }
        }
        if shards.is_empty() {
            return Err(Error::invalid("shards", "at least one shard is required"));
        }
        Ok(Self { shards })
    }

    pub fn ids(&self) -> Vec<String> {
        self.shards.keys().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<&ShardClient> {
        self.shards.get(id)
    }
}
