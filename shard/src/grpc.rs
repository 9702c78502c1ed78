//! The gRPC adapter of the internal shard API: convert, call [`ShardApi`], map errors.

use std::sync::Arc;

use agentsearch_common::auth::Auth;
use agentsearch_common::shard::{ShardApi, ShardSearchRequest};
use agentsearch_proto::convert::search_response_to_wire;
use agentsearch_proto::shard_v1 as pb;
use agentsearch_proto::shard_v1::shard_server::{Shard, ShardServer};
use agentsearch_proto::status_from_error;
use tonic::{Request, Response, Status};

/// Largest message a shard accepts or sends (upsert batches carry vectors).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

pub struct ShardGrpcService {
    shard: Arc<dyn ShardApi>,
    auth: Auth,
    /// With mutual TLS: names of which the caller's certificate must carry one (empty: any).
    client_names: Arc<Vec<String>>,
}

impl ShardGrpcService {
    pub fn new(shard: Arc<dyn ShardApi>, auth: Auth) -> Self {
        Self {
            shard,
            auth,
            client_names: Arc::default(),
        }
    }

    /// Accepts only callers whose certificate carries one of `names` (`tls.client_names`).
    pub fn with_client_names(mut self, names: Arc<Vec<String>>) -> Self {
        self.client_names = names;
        self
    }

    /// The request id, once the caller is authenticated.
    #[allow(clippy::result_large_err)]
    fn begin<T>(&self, request: &Request<T>) -> Result<String, Status> {
        let request_id = agentsearch_proto::context::begin(request.metadata(), &self.auth)?;
        if !self.client_names.is_empty() {
            let named = request.peer_certs().is_some_and(|certs| {
                certs.first().is_some_and(|leaf| {
                    agentsearch_proto::tls::certificate_names_one_of(leaf, &self.client_names)
                })
            });
            if !named {
                let err = agentsearch_common::Error::Unauthenticated(
                    "the client certificate names none of tls.client_names".into(),
                );
                return Err(status_from_error(&err, &request_id));
            }
        }
        Ok(request_id)
    }

    pub fn into_server(self) -> ShardServer<Self> {
        ShardServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

#[tonic::async_trait]
impl Shard for ShardGrpcService {
    async fn info(
        &self,
        request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoResponse>, Status> {
        let rid = self.begin(&request)?;
        let info = self
            .shard
            .info()
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(info.into()))
    }

    async fn term_stats(
        &self,
        request: Request<pb::TermStatsRequest>,
    ) -> Result<Response<pb::TermStatsResponse>, Status> {
        let rid = self.begin(&request)?;
        let stats = self
            .shard
            .term_stats(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(stats.into()))
    }

    async fn search_tools(
        &self,
        request: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        let rid = self.begin(&request)?;
        let request: ShardSearchRequest = request
            .into_inner()
            .try_into()
            .map_err(|e| status_from_error(&e, &rid))?;
        let records = request.records;
        let response = self
            .shard
            .search_tools(request)
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(search_response_to_wire(response, records)))
    }

    async fn search_inline(
        &self,
        request: Request<pb::SearchInlineRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        let rid = self.begin(&request)?;
        let request = request
            .into_inner()
            .try_into()
            .map_err(|e| status_from_error(&e, &rid))?;
        let response = self
            .shard
            .search_inline(request)
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn upsert_tools(
        &self,
        request: Request<pb::UpsertToolsRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let rid = self.begin(&request)?;
        let request = request
            .into_inner()
            .try_into()
            .map_err(|e| status_from_error(&e, &rid))?;
        let response = self
            .shard
            .upsert_tools(request)
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn delete_tools(
        &self,
        request: Request<pb::DeleteToolsRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .delete_tools(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn get_tools(
        &self,
        request: Request<pb::GetToolsRequest>,
    ) -> Result<Response<pb::GetToolsResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .get_tools(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn context_term_stats(
        &self,
        request: Request<pb::ContextStatsRequest>,
    ) -> Result<Response<pb::TermStatsResponse>, Status> {
        let rid = self.begin(&request)?;
        let stats = self
            .shard
            .context_term_stats(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(stats.into()))
    }

    async fn search_segments(
        &self,
        request: Request<pb::SearchSegmentsRequest>,
    ) -> Result<Response<pb::SearchSegmentsResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .search_segments(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn upsert_segments(
        &self,
        request: Request<pb::UpsertSegmentsRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .upsert_segments(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn delete_records(
        &self,
        request: Request<pb::DeleteRecordsRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .delete_records(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn fetch_segments(
        &self,
        request: Request<pb::FetchSegmentsRequest>,
    ) -> Result<Response<pb::FetchSegmentsResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .fetch_segments(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn read_segments(
        &self,
        request: Request<pb::ReadSegmentsRequest>,
    ) -> Result<Response<pb::ReadSegmentsResponse>, Status> {
        let rid = self.begin(&request)?;
        let response = self
            .shard
            .read_segments(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(response.into()))
    }

    async fn export_tools(
        &self,
        request: Request<pb::ExportToolsRequest>,
    ) -> Result<Response<pb::ExportToolsResponse>, Status> {
        let rid = self.begin(&request)?;
        let tools = self
            .shard
            .export_tools(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(agentsearch_proto::convert::exported_tools(
            tools,
        )))
    }

    async fn list_records(
        &self,
        request: Request<pb::ListRecordsRequest>,
    ) -> Result<Response<pb::ListRecordsResponse>, Status> {
        let rid = self.begin(&request)?;
        let records = self
            .shard
            .list_records(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(pb::ListRecordsResponse {
            records: records.into_iter().map(Into::into).collect(),
        }))
    }

    async fn export_records(
        &self,
        request: Request<pb::ExportRecordsRequest>,
    ) -> Result<Response<pb::ExportRecordsResponse>, Status> {
        let rid = self.begin(&request)?;
        let records = self
            .shard
            .export_records(request.into_inner().into())
            .await
            .map_err(|e| status_from_error(&e, &rid))?;
        Ok(Response::new(pb::ExportRecordsResponse {
            records: records.into_iter().map(Into::into).collect(),
        }))
    }
}
