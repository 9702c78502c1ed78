//! The router's view of its shards: one [`ShardClient`] type for a shard in this process or behind
//! gRPC, and the [`ShardSet`] of live shards by id.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentsearch_common::auth::Auth;
use agentsearch_common::metrics::{SHARD_CALL_DURATION, SHARD_CALL_FAILURES};
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, ExportRecordsRequest,
    ExportToolsRequest, GetToolsRequest, GetToolsResponse, IndexedRecord, IndexedTool,
    InlineSearchRequest, ListRecordsRequest, ReadSegmentsRequest, ReadSegmentsResponse,
    RecordDeleteRequest, RecordVersion, ScopeStats, SegmentFetchRequest, SegmentFetchResponse,
    SegmentUpsertRequest, ShardApi, ShardDeleteRequest, ShardInfo, ShardSearchRequest,
    ShardSearchResponse, ShardUpsertRequest, ShardWriteResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::{Error, Result};
use agentsearch_proto::error_from_status;
use agentsearch_proto::shard_v1 as pb;
use agentsearch_proto::shard_v1::shard_client::ShardClient as PbShardClient;
use tonic::transport::{Channel, Endpoint};
use tracing::Instrument;

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
        Self::connect_lazy_tls(addr, auth, None)
    }

    /// [`GrpcShard::connect_lazy`] over TLS when `tls` is set (see
    /// `agentsearch_proto::tls::shard_client_tls`): a `host:port` address is then `https://`.
    pub fn connect_lazy_tls(
        addr: &str,
        auth: &Auth,
        tls: Option<&tonic::transport::ClientTlsConfig>,
    ) -> Result<Self> {
        let url = match (addr.split_once("://"), tls) {
            (Some(("http", _)), Some(_)) => {
                return Err(Error::config(
                    "shards.remote",
                    format!("`{addr}` is plain http:// while the shards are called over TLS"),
                ));
            }
            (Some(_), _) => addr.to_string(),
            (None, Some(_)) => format!("https://{addr}"),
            (None, None) => format!("http://{addr}"),
        };
        let mut endpoint = Endpoint::from_shared(url)
            .map_err(|e| {
                Error::config(
                    "shards.remote",
                    format!("`{addr}` is not a valid address: {e}"),
                )
            })?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|e| {
                Error::config("shards.tls_ca_file", format!("TLS to `{addr}`: {e}"))
            })?;
        }
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
        // The trace context of the call's span (see `ShardClient::timed`), so that the shard's
        // spans join the router's trace.
        let mut headers = http::HeaderMap::new();
        agentsearch_common::telemetry::inject(&tracing::Span::current(), &mut headers);
        for (name, value) in &headers {
            if let (Ok(key), Ok(value)) = (
                tonic::metadata::MetadataKey::from_bytes(name.as_str().as_bytes()),
                value.to_str().map(str::parse),
            ) && let Ok(value) = value
            {
                req.metadata_mut().insert(key, value);
            }
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
        self.timed("info", timeout, fut).await
    }

    pub async fn term_stats(
        &self,
        req: TermStatsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<ScopeStats> {
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
        self.timed("term_stats", timeout, fut).await
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
        self.timed("search_tools", timeout, fut).await
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
        self.timed("search_inline", timeout, fut).await
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
        self.timed("upsert_tools", timeout, fut).await
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
        self.timed("delete_tools", timeout, fut).await
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
        self.timed("get_tools", timeout, fut).await
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
        self.timed("context_term_stats", timeout, fut).await
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
        self.timed("search_segments", timeout, fut).await
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
        self.timed("upsert_segments", timeout, fut).await
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
        self.timed("delete_records", timeout, fut).await
    }

    pub async fn fetch_segments(
        &self,
        req: SegmentFetchRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<SegmentFetchResponse> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.fetch_segments(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .fetch_segments(g.request(
                        pb::FetchSegmentsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().into())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        self.timed("fetch_segments", timeout, fut).await
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
        self.timed("read_segments", timeout, fut).await
    }
}

impl ShardClient {
    pub async fn export_tools(
        &self,
        req: ExportToolsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<Vec<IndexedTool>> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.export_tools(req).await,
                ShardClient::Grpc(g) => {
                    let response = g
                        .client
                        .clone()
                        .export_tools(g.request(
                            pb::ExportToolsRequest::from(req),
                            request_id,
                            timeout,
                        ))
                        .await
                        .map_err(|s| remote(&g.addr, s))?;
                    agentsearch_proto::convert::exported_tools_from(response.into_inner())
                }
            }
        };
        self.timed("export_tools", timeout, fut).await
    }

    pub async fn list_records(
        &self,
        req: ListRecordsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<Vec<RecordVersion>> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.list_records(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .list_records(g.request(pb::ListRecordsRequest::from(req), request_id, timeout))
                    .await
                    .map(|r| r.into_inner().records.into_iter().map(Into::into).collect())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        self.timed("list_records", timeout, fut).await
    }

    pub async fn export_records(
        &self,
        req: ExportRecordsRequest,
        request_id: &str,
        timeout: Duration,
    ) -> Result<Vec<IndexedRecord>> {
        let fut = async {
            match self {
                ShardClient::Local(s) => s.export_records(req).await,
                ShardClient::Grpc(g) => g
                    .client
                    .clone()
                    .export_records(g.request(
                        pb::ExportRecordsRequest::from(req),
                        request_id,
                        timeout,
                    ))
                    .await
                    .map(|r| r.into_inner().records.into_iter().map(Into::into).collect())
                    .map_err(|s| remote(&g.addr, s)),
            }
        };
        self.timed("export_records", timeout, fut).await
    }
}

impl ShardClient {
    /// How metrics name this shard: its address, or `local`.
    fn label(&self) -> String {
        match self {
            ShardClient::Local(_) => "local".to_string(),
            ShardClient::Grpc(g) => g.addr.clone(),
        }
    }

    /// Runs `fut` within `timeout`, timing it as RPC `rpc` of this shard and counting failures.
    async fn timed<T>(
        &self,
        rpc: &'static str,
        timeout: Duration,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let started = std::time::Instant::now();
        // The periodic probes make no trace of their own.
        let span = if rpc == "info" {
            tracing::Span::none()
        } else {
            tracing::info_span!(
                "shard_call",
                otel.name = rpc,
                otel.kind = "client",
                rpc.system = "grpc",
                shard = %self.label(),
            )
        };
        let result = within(timeout, fut).instrument(span.clone()).await;
        if let Err(err) = &result {
            agentsearch_common::telemetry::mark_error(&span, err.code().as_str());
        }
        let shard = self.label();
        metrics::histogram!(SHARD_CALL_DURATION, "rpc" => rpc, "shard" => shard.clone())
            .record(started.elapsed().as_secs_f64());
        if let Err(err) = &result
            && matches!(
                err,
                Error::Unavailable(_) | Error::Timeout(_) | Error::Internal(_)
            )
        {
            metrics::counter!(SHARD_CALL_FAILURES, "rpc" => rpc, "shard" => shard).increment(1);
        }
        result
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

/// The shards a router talks to, by stable shard id, with what the router last learned of each
/// configured address. Cheap to clone (shared state).
///
/// A remote shard is known by the id it reports (`Info`); until it has answered once, its address
/// is pending and the router serves without it (parts placed on it are reported unavailable).
/// [`ShardSet::refresh`] probes every address again: pending ones join, an address now answering
/// with another id (a shard rebuilt on an empty disk) is re-keyed, and unreachable ones are marked
/// so readiness can tell. Host names are resolved again on each reconnection.
#[derive(Clone, Default)]
pub struct ShardSet {
    inner: Arc<parking_lot::RwLock<Members>>,
}

#[derive(Default)]
struct Members {
    by_id: BTreeMap<String, ShardClient>,
    /// Requests this router has in flight on each shard (by id, kept across re-keying).
    in_flight: BTreeMap<String, Arc<std::sync::atomic::AtomicUsize>>,
    /// Ids whose address now answers with another id (the shard came back with an empty data
    /// dir): old id -> new id, until their replicas were moved (see [`ShardSet::replaced`]).
    replaced: BTreeMap<String, String>,
    /// Every configured shard in configuration order: its address, the id it answered with, and
    /// whether the last probe reached it.
    slots: Vec<Slot>,
    /// Shards being drained (see [`crate::cluster::membership`]): no new placements.
    draining: std::collections::BTreeSet<String>,
}

struct Slot {
    address: String,
    client: ShardClient,
    id: Option<String>,
    reachable: bool,
    last_error: Option<String>,
}

/// What the router knows of one configured shard, for readiness and operators.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    pub address: String,
    /// The shard's id, once it has answered.
    pub shard_id: Option<String>,
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a router learns its shards' addresses while it runs (see
/// [`ShardSet::keep_discovering`]): the addresses, or why they could not be learned.
pub type Discover = Box<
    dyn Fn() -> futures::future::BoxFuture<'static, std::result::Result<Vec<String>, String>>
        + Send
        + Sync,
>;

/// How a router makes the client of a shard address it learned.
pub type Connect = Box<dyn Fn(&str) -> Result<ShardClient> + Send + Sync>;

/// Time allowed for one probe of a shard.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

impl ShardSet {
    /// Builds the set by asking each client for its id. Remote shards are retried until `wait`
    /// has passed; a shard still silent then is an error (the embedded default and tests).
    pub async fn discover(clients: Vec<ShardClient>, wait: Duration) -> Result<Self> {
        let deadline = tokio::time::Instant::now() + wait;
        let set = Self::pending(clients.into_iter().enumerate().map(|(i, c)| {
            let address = match &c {
                ShardClient::Local(_) => format!("local-{i}"),
                ShardClient::Grpc(g) => g.addr.clone(),
            };
            (address, c)
        }));
        loop {
            set.refresh().await?;
            let statuses = set.statuses();
            let Some(silent) = statuses.iter().find(|s| s.shard_id.is_none()) else {
                break;
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Unavailable(format!(
                    "shard {} did not answer at startup: {}",
                    silent.address,
                    silent.error.as_deref().unwrap_or("no answer")
                )));
            }
            tracing::warn!(shard = %silent.address, "shard not reachable yet, retrying");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if set.inner.read().by_id.is_empty() {
            return Err(Error::invalid("shards", "at least one shard is required"));
        }
        Ok(set)
    }

    /// A set of `(address, client)` none of which has answered yet; [`ShardSet::refresh`] (or
    /// [`ShardSet::keep_fresh`]) brings them in. A router starts this way, whatever its shards'
    /// state.
    pub fn pending(clients: impl IntoIterator<Item = (String, ShardClient)>) -> Self {
        let slots = clients
            .into_iter()
            .map(|(address, client)| Slot {
                address,
                client,
                id: None,
                reachable: false,
                last_error: None,
            })
            .collect();
        Self {
            inner: Arc::new(parking_lot::RwLock::new(Members {
                by_id: BTreeMap::new(),
                in_flight: BTreeMap::new(),
                replaced: BTreeMap::new(),
                slots,
                draining: Default::default(),
            })),
        }
    }

    /// Probes every configured shard once, in parallel. Fails only when two addresses answer
    /// with one id (a configuration mistake); unreachable shards are recorded, not errors.
    pub async fn refresh(&self) -> Result<()> {
        let clients: Vec<(usize, ShardClient)> = {
            let members = self.inner.read();
            members
                .slots
                .iter()
                .enumerate()
                .map(|(i, s)| (i, s.client.clone()))
                .collect()
        };
        let probes = clients
            .into_iter()
            .map(|(i, client)| async move { (i, client.info("probe", PROBE_TIMEOUT).await) });
        let answers = futures::future::join_all(probes).await;
        let mut members = self.inner.write();
        let mut replaced = Vec::new();
        for (i, answer) in answers {
            let slot = &mut members.slots[i];
            match answer {
                Ok(info) => {
                    slot.reachable = true;
                    slot.last_error = None;
                    if slot.id.as_deref() != Some(info.shard_id.as_str()) {
                        if let Some(old) = &slot.id {
                            tracing::warn!(
                                address = %slot.address, old = %old, new = %info.shard_id,
                                "shard answers with a new id: its data is gone, its replicas move"
                            );
                            replaced.push((old.clone(), info.shard_id.clone()));
                        } else {
                            tracing::info!(address = %slot.address, shard = %info.shard_id, "shard joined");
                        }
                        slot.id = Some(info.shard_id);
                    }
                }
                // A shard at its concurrency limit answered: busy, not lost.
                Err(Error::RateLimited { .. }) => {
                    slot.reachable = true;
                }
                Err(err) => {
                    if slot.reachable {
                        tracing::warn!(address = %slot.address, error = %err, "shard unreachable");
                    }
                    slot.reachable = false;
                    slot.last_error = Some(err.to_string());
                }
            }
        }
        let mut by_id = BTreeMap::new();
        for slot in &members.slots {
            if let Some(id) = &slot.id
                && by_id.insert(id.clone(), slot.client.clone()).is_some()
            {
                return Err(Error::invalid(
                    "shards",
                    format!("two shards share the id `{id}`"),
                ));
            }
        }
        for id in by_id.keys() {
            members.in_flight.entry(id.clone()).or_default();
        }
        members.replaced.extend(replaced);
        members.by_id = by_id;
        let reachable = members.slots.iter().filter(|s| s.reachable).count();
        metrics::gauge!(agentsearch_common::metrics::SHARDS_CONFIGURED)
            .set(members.slots.len() as f64);
        metrics::gauge!(agentsearch_common::metrics::SHARDS_REACHABLE).set(reachable as f64);
        Ok(())
    }

    /// Replaces the configured addresses (membership changes while the router runs): shards
    /// at addresses still listed keep what was learned of them, new addresses join pending (the
    /// next [`ShardSet::refresh`] probes them), and shards at addresses no longer listed leave
    /// the set at once. A new address whose client cannot be built is skipped (logged).
    pub fn set_addresses(
        &self,
        addresses: &[String],
        connect: &(dyn Fn(&str) -> Result<ShardClient> + Send + Sync),
    ) {
        let current: Vec<String> = self
            .inner
            .read()
            .slots
            .iter()
            .map(|s| s.address.clone())
            .collect();
        if current == addresses {
            return;
        }
        let mut fresh = Vec::new();
        for address in addresses {
            if current.contains(address) {
                continue;
            }
            match connect(address) {
                Ok(client) => fresh.push((address.clone(), client)),
                Err(err) => tracing::error!(address = %address, error = %err, "bad shard address"),
            }
        }
        let mut members = self.inner.write();
        let mut slots: Vec<Slot> = std::mem::take(&mut members.slots);
        slots.retain(|slot| {
            let kept = addresses.contains(&slot.address);
            if !kept {
                tracing::info!(address = %slot.address, shard = ?slot.id, "shard address removed");
            }
            kept
        });
        for (address, client) in fresh {
            tracing::info!(address = %address, "shard address added");
            slots.push(Slot {
                address,
                client,
                id: None,
                reachable: false,
                last_error: None,
            });
        }
        slots.sort_by_key(|slot| {
            addresses
                .iter()
                .position(|a| *a == slot.address)
                .unwrap_or(usize::MAX)
        });
        members.by_id = slots
            .iter()
            .filter_map(|slot| slot.id.clone().map(|id| (id, slot.client.clone())))
            .collect();
        members.slots = slots;
    }

    /// Like [`ShardSet::keep_fresh`], learning the addresses from `discover` before each probe
    /// (the configuration file read again, or DNS): see [`ShardSet::set_addresses`]. A failed or
    /// empty discovery keeps the addresses known.
    pub async fn keep_discovering(
        self,
        every: Duration,
        discover: Discover,
        connect: Connect,
        stop: impl Future<Output = ()>,
    ) {
        self.refresh_every(every, Some((discover, connect)), stop)
            .await;
    }

    /// Refreshes every `every` until `stop` resolves (the router's background task).
    pub async fn keep_fresh(self, every: Duration, stop: impl Future<Output = ()>) {
        self.refresh_every(every, None, stop).await;
    }

    async fn refresh_every(
        self,
        every: Duration,
        discovery: Option<(Discover, Connect)>,
        stop: impl Future<Output = ()>,
    ) {
        let mut ticker = tokio::time::interval(every.max(Duration::from_millis(100)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = ticker.tick() => {
                    if let Some((discover, connect)) = &discovery {
                        match discover().await {
                            Ok(addresses) if !addresses.is_empty() => {
                                self.set_addresses(&addresses, connect.as_ref());
                            }
                            Ok(_) => tracing::warn!("shard discovery found no address; keeping the known ones"),
                            Err(err) => tracing::warn!(error = %err, "shard discovery failed; keeping the known addresses"),
                        }
                    }
                    if let Err(err) = self.refresh().await {
                        tracing::error!(error = %err, "shard membership");
                    }
                }
            }
        }
    }

    /// Shards whose address answered with a new id since this router started (their data dir was
    /// lost): old id -> new id. Their replicas are to be moved (see [`crate::cluster::repair`]).
    pub fn replaced(&self) -> BTreeMap<String, String> {
        self.inner.read().replaced.clone()
    }

    /// Forgets a replaced id once its replicas were moved.
    pub(crate) fn forget_replaced(&self, old: &str) {
        self.inner.write().replaced.remove(old);
    }

    /// Ids of the shards that have answered, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.inner.read().by_id.keys().cloned().collect()
    }

    /// Ids of the shards new integrations and syncs may be placed on: those that have answered
    /// and are not being drained (all of them if every one is drained).
    pub fn placeable_ids(&self) -> Vec<String> {
        let members = self.inner.read();
        let open: Vec<String> = members
            .by_id
            .keys()
            .filter(|id| !members.draining.contains(*id))
            .cloned()
            .collect();
        if open.is_empty() {
            members.by_id.keys().cloned().collect()
        } else {
            open
        }
    }

    /// Shards being drained, as last read from the store.
    pub(crate) fn draining(&self) -> std::collections::BTreeSet<String> {
        self.inner.read().draining.clone()
    }

    /// Records which shards are being drained.
    pub(crate) fn set_draining(&self, ids: std::collections::BTreeSet<String>) {
        self.inner.write().draining = ids;
    }

    pub fn get(&self, id: &str) -> Option<ShardClient> {
        self.inner.read().by_id.get(id).cloned()
    }

    /// Counts one request on shard `id` until the guard is dropped (see [`ShardSet::in_flight`]).
    pub(crate) fn begin(&self, id: &str) -> InFlight {
        let known = self.inner.read().in_flight.get(id).cloned();
        let counter = known.unwrap_or_else(|| {
            self.inner
                .write()
                .in_flight
                .entry(id.to_string())
                .or_default()
                .clone()
        });
        InFlight::new(counter)
    }

    /// Every shard known by id, in id order, with whether the last probe reached it and the
    /// requests in flight on it now: what a search plan reads, under one lock.
    pub(crate) fn load_by_id(&self) -> Vec<(String, bool, usize)> {
        let members = self.inner.read();
        let reachable: std::collections::BTreeSet<&str> = members
            .slots
            .iter()
            .filter(|s| s.reachable)
            .filter_map(|s| s.id.as_deref())
            .collect();
        members
            .by_id
            .keys()
            .map(|id| {
                let reachable = reachable.contains(id.as_str());
                let in_flight = members
                    .in_flight
                    .get(id)
                    .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed));
                (id.clone(), reachable, in_flight)
            })
            .collect()
    }

    /// A set of shards known by id and reachable, without probing them (unit tests).
    #[cfg(test)]
    pub(crate) fn fixed(clients: impl IntoIterator<Item = (String, ShardClient)>) -> Self {
        let set = Self::pending(std::iter::empty());
        {
            let mut members = set.inner.write();
            for (id, client) in clients {
                members.slots.push(Slot {
                    address: id.clone(),
                    client: client.clone(),
                    id: Some(id.clone()),
                    reachable: true,
                    last_error: None,
                });
                members.in_flight.entry(id.clone()).or_default();
                members.by_id.insert(id, client);
            }
        }
        set
    }

    /// Ids of the shards whose last probe answered.
    pub fn reachable_ids(&self) -> std::collections::BTreeSet<String> {
        self.inner
            .read()
            .slots
            .iter()
            .filter(|s| s.reachable)
            .filter_map(|s| s.id.clone())
            .collect()
    }

    /// Every configured shard, in configuration order.
    pub fn statuses(&self) -> Vec<ShardStatus> {
        self.inner
            .read()
            .slots
            .iter()
            .map(|s| ShardStatus {
                address: s.address.clone(),
                shard_id: s.id.clone(),
                reachable: s.reachable,
                error: s.last_error.clone(),
            })
            .collect()
    }
}

/// One request in flight on a shard, counted while it lives.
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    pub(crate) fn new(counter: Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
