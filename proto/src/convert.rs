//! Conversions between the internal shard messages and the domain types of
//! `agentsearch_common::shard`.

use agentsearch_common::Error;
use agentsearch_common::shard::{
    GetToolsRequest, GetToolsResponse, Hit, IndexedTool, InlineSearchRequest, PartFailure,
    ScopeStats, ShardDeleteRequest, ShardInfo, ShardSearchRequest, ShardSearchResponse,
    ShardTimings, ShardUpsertRequest, ShardWriteResponse, TermStats, TermStatsRequest,
};
use agentsearch_common::tool::{SideEffect, ToolRecord};

use crate::shard_v1 as pb;

fn side_effect(field: &str, value: &str) -> Result<SideEffect, Error> {
    value
        .parse()
        .map_err(|issue: String| Error::invalid(field, issue))
}

impl From<ShardInfo> for pb::InfoResponse {
    fn from(i: ShardInfo) -> Self {
        Self {
            shard_id: i.shard_id,
            indexes: i.indexes,
            tools: i.tools,
            resident_bytes: i.resident_bytes,
            sync_indexes: i.sync_indexes,
            segments: i.segments,
            generations: i.generations,
        }
    }
}

impl From<pb::InfoResponse> for ShardInfo {
    fn from(i: pb::InfoResponse) -> Self {
        Self {
            shard_id: i.shard_id,
            indexes: i.indexes,
            tools: i.tools,
            resident_bytes: i.resident_bytes,
            sync_indexes: i.sync_indexes,
            segments: i.segments,
            generations: i.generations,
        }
    }
}

impl From<TermStatsRequest> for pb::TermStatsRequest {
    fn from(r: TermStatsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integrations: r.integrations,
            query: r.query,
        }
    }
}

impl From<pb::TermStatsRequest> for TermStatsRequest {
    fn from(r: pb::TermStatsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integrations: r.integrations,
            query: r.query,
        }
    }
}

impl From<TermStats> for pb::TermStatsResponse {
    fn from(s: TermStats) -> Self {
        Self {
            total_docs: s.total_docs,
            field_tokens: s
                .field_tokens
                .into_iter()
                .map(|(field, tokens)| pb::FieldTokens { field, tokens })
                .collect(),
            doc_freqs: s
                .doc_freqs
                .into_iter()
                .map(|((field, term), doc_freq)| pb::DocFreq {
                    field,
                    term,
                    doc_freq,
                })
                .collect(),
            stamp: None,
        }
    }
}

impl From<ScopeStats> for pb::TermStatsResponse {
    fn from(s: ScopeStats) -> Self {
        Self {
            stamp: s.stamp,
            ..s.stats.into()
        }
    }
}

impl From<pb::TermStatsResponse> for ScopeStats {
    fn from(s: pb::TermStatsResponse) -> Self {
        Self {
            stamp: s.stamp,
            stats: s.into(),
        }
    }
}

impl From<pb::TermStatsResponse> for TermStats {
    fn from(s: pb::TermStatsResponse) -> Self {
        Self {
            total_docs: s.total_docs,
            field_tokens: s
                .field_tokens
                .into_iter()
                .map(|f| (f.field, f.tokens))
                .collect(),
            doc_freqs: s
                .doc_freqs
                .into_iter()
                .map(|d| ((d.field, d.term), d.doc_freq))
                .collect(),
        }
    }
}

impl From<ShardSearchRequest> for pb::SearchToolsRequest {
    fn from(r: ShardSearchRequest) -> Self {
        Self {
            project_id: r.project_id,
            integrations: r.integrations,
            query: r.query,
            vector: r.vector.unwrap_or_default(),
            categories: r.categories,
            max_side_effect: r
                .max_side_effect
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            limit: r.limit,
            lexical: r.lexical,
            stats: r.stats.map(Into::into),
            structured: r.structured,
            records: r.records,
        }
    }
}

impl TryFrom<pb::SearchToolsRequest> for ShardSearchRequest {
    type Error = Error;

    fn try_from(r: pb::SearchToolsRequest) -> Result<Self, Error> {
        let max_side_effect = match r.max_side_effect.as_str() {
            "" => None,
            s => Some(side_effect("maxSideEffect", s)?),
        };
        Ok(Self {
            project_id: r.project_id,
            integrations: r.integrations,
            query: r.query,
            vector: (!r.vector.is_empty()).then_some(r.vector),
            categories: r.categories,
            max_side_effect,
            limit: r.limit,
            lexical: r.lexical,
            stats: r.stats.map(Into::into),
            structured: r.structured,
            records: r.records,
        })
    }
}

impl From<InlineSearchRequest> for pb::SearchInlineRequest {
    fn from(r: InlineSearchRequest) -> Self {
        Self {
            project_id: r.project_id,
            tools: indexed_tools(r.tools),
            query: r.query,
            vector: r.vector.unwrap_or_default(),
            categories: r.categories,
            max_side_effect: r
                .max_side_effect
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            limit: r.limit,
            lexical: r.lexical,
            stats: r.stats.map(Into::into),
        }
    }
}

impl TryFrom<pb::SearchInlineRequest> for InlineSearchRequest {
    type Error = Error;

    fn try_from(r: pb::SearchInlineRequest) -> Result<Self, Error> {
        let max_side_effect = match r.max_side_effect.as_str() {
            "" => None,
            s => Some(side_effect("maxSideEffect", s)?),
        };
        Ok(Self {
            project_id: r.project_id,
            tools: indexed_tools_from(r.tools)?,
            query: r.query,
            vector: (!r.vector.is_empty()).then_some(r.vector),
            categories: r.categories,
            max_side_effect,
            limit: r.limit,
            lexical: r.lexical,
            stats: r.stats.map(Into::into),
        })
    }
}

impl From<Hit> for pb::Hit {
    fn from(h: Hit) -> Self {
        Self {
            name: h.name,
            integration: h.integration,
            score: h.score,
        }
    }
}

impl From<pb::Hit> for Hit {
    fn from(h: pb::Hit) -> Self {
        Self {
            name: h.name,
            integration: h.integration,
            score: h.score,
        }
    }
}

impl From<ToolRecord> for pb::ToolRecord {
    fn from(t: ToolRecord) -> Self {
        Self {
            name: t.name,
            integration: t.integration,
            category: t.category,
            side_effect: t.side_effect.as_str().to_string(),
            description: t.description,
            parameters_json: t.parameters,
            tokens: t.tokens,
        }
    }
}

impl TryFrom<pb::ToolRecord> for ToolRecord {
    type Error = Error;

    fn try_from(t: pb::ToolRecord) -> Result<Self, Error> {
        Ok(Self {
            side_effect: side_effect("sideEffect", &t.side_effect)?,
            name: t.name,
            integration: t.integration,
            category: t.category,
            description: t.description,
            parameters: t.parameters_json,
            tokens: t.tokens,
        })
    }
}

impl From<PartFailure> for pb::PartFailure {
    fn from(f: PartFailure) -> Self {
        Self {
            integration: f.integration,
            retriever: f.retriever,
            message: f.message,
        }
    }
}

impl From<pb::PartFailure> for PartFailure {
    fn from(f: pb::PartFailure) -> Self {
        Self {
            integration: f.integration,
            retriever: f.retriever,
            message: f.message,
        }
    }
}

fn hits<T, U: From<T>>(v: Vec<T>) -> Vec<U> {
    v.into_iter().map(Into::into).collect()
}

impl From<ShardSearchResponse> for pb::SearchToolsResponse {
    fn from(r: ShardSearchResponse) -> Self {
        search_response_to_wire(r, None)
    }
}

/// A shard's answer on the wire with the records of the eligible hits ranked within the first
/// `records` of the lexical or the dense list only (`None`: every record it holds).
pub fn search_response_to_wire(
    mut r: ShardSearchResponse,
    records: Option<u32>,
) -> pb::SearchToolsResponse {
    if let Some(n) = records {
        let n = n as usize;
        let wanted: std::collections::HashSet<&str> = r
            .lexical
            .iter()
            .take(n)
            .chain(r.dense.iter().take(n))
            .map(|h| h.name.as_str())
            .collect();
        r.tools.retain(|t| wanted.contains(t.name.as_str()));
    }
    pb::SearchToolsResponse {
        lexical: hits(r.lexical),
        dense: hits(r.dense),
        excluded_lexical: hits(r.excluded_lexical),
        excluded_dense: hits(r.excluded_dense),
        tools: r
            .tools
            .into_iter()
            .map(|t| std::sync::Arc::unwrap_or_clone(t).into())
            .collect(),
        failures: hits(r.failures),
        lexical_ms: r.timings.lexical_ms,
        dense_ms: r.timings.dense_ms,
        assemble_ms: r.timings.assemble_ms,
        prepare_ms: r.timings.prepare_ms,
        generations: r.generations.into_iter().collect(),
        matched: r.matched.into_iter().collect(),
        highlights: r
            .highlights
            .into_iter()
            .map(|(name, fragments)| (name, pb::Fragments { fragments }))
            .collect(),
        structured: r.structured,
        stamp: r.stamp,
    }
}

impl TryFrom<pb::SearchToolsResponse> for ShardSearchResponse {
    type Error = Error;

    fn try_from(r: pb::SearchToolsResponse) -> Result<Self, Error> {
        Ok(Self {
            lexical: hits(r.lexical),
            dense: hits(r.dense),
            excluded_lexical: hits(r.excluded_lexical),
            excluded_dense: hits(r.excluded_dense),
            tools: r
                .tools
                .into_iter()
                .map(|t| t.try_into().map(std::sync::Arc::new))
                .collect::<Result<_, _>>()?,
            failures: hits(r.failures),
            timings: ShardTimings {
                prepare_ms: r.prepare_ms,
                lexical_ms: r.lexical_ms,
                dense_ms: r.dense_ms,
                assemble_ms: r.assemble_ms,
            },
            generations: r.generations.into_iter().collect(),
            matched: r.matched.into_iter().collect(),
            highlights: r
                .highlights
                .into_iter()
                .map(|(name, f)| (name, f.fragments))
                .collect(),
            structured: r.structured,
            stamp: r.stamp,
        })
    }
}

impl From<agentsearch_common::shard::ExportToolsRequest> for pb::ExportToolsRequest {
    fn from(r: agentsearch_common::shard::ExportToolsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integration: r.integration,
        }
    }
}

impl From<pb::ExportToolsRequest> for agentsearch_common::shard::ExportToolsRequest {
    fn from(r: pb::ExportToolsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integration: r.integration,
        }
    }
}

/// Tools as a shard exports them.
pub fn exported_tools(tools: Vec<IndexedTool>) -> pb::ExportToolsResponse {
    pb::ExportToolsResponse {
        tools: indexed_tools(tools),
    }
}

/// Tools of an export, checked.
pub fn exported_tools_from(response: pb::ExportToolsResponse) -> Result<Vec<IndexedTool>, Error> {
    indexed_tools_from(response.tools)
}

fn indexed_tools(tools: Vec<IndexedTool>) -> Vec<pb::IndexedTool> {
    tools
        .into_iter()
        .map(|t| pb::IndexedTool {
            record: Some(t.record.into()),
            vector: t.vector,
        })
        .collect()
}

fn indexed_tools_from(tools: Vec<pb::IndexedTool>) -> Result<Vec<IndexedTool>, Error> {
    tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let record = t
                .record
                .ok_or_else(|| Error::invalid(format!("tools[{i}].record"), "is required"))?;
            Ok(IndexedTool {
                record: record.try_into()?,
                vector: t.vector,
            })
        })
        .collect()
}

impl From<ShardUpsertRequest> for pb::UpsertToolsRequest {
    fn from(r: ShardUpsertRequest) -> Self {
        Self {
            project_id: r.project_id,
            tools: indexed_tools(r.tools),
        }
    }
}

impl TryFrom<pb::UpsertToolsRequest> for ShardUpsertRequest {
    type Error = Error;

    fn try_from(r: pb::UpsertToolsRequest) -> Result<Self, Error> {
        Ok(Self {
            project_id: r.project_id,
            tools: indexed_tools_from(r.tools)?,
        })
    }
}

impl From<ShardDeleteRequest> for pb::DeleteToolsRequest {
    fn from(r: ShardDeleteRequest) -> Self {
        Self {
            project_id: r.project_id,
            integration: r.integration,
            names: r.names,
        }
    }
}

impl From<pb::DeleteToolsRequest> for ShardDeleteRequest {
    fn from(r: pb::DeleteToolsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integration: r.integration,
            names: r.names,
        }
    }
}

impl From<GetToolsRequest> for pb::GetToolsRequest {
    fn from(r: GetToolsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integration: r.integration,
            names: r.names,
        }
    }
}

impl From<pb::GetToolsRequest> for GetToolsRequest {
    fn from(r: pb::GetToolsRequest) -> Self {
        Self {
            project_id: r.project_id,
            integration: r.integration,
            names: r.names,
        }
    }
}

impl From<GetToolsResponse> for pb::GetToolsResponse {
    fn from(r: GetToolsResponse) -> Self {
        Self {
            tools: r.tools.into_iter().map(Into::into).collect(),
            generation: r.generation,
        }
    }
}

impl TryFrom<pb::GetToolsResponse> for GetToolsResponse {
    type Error = Error;

    fn try_from(r: pb::GetToolsResponse) -> Result<Self, Error> {
        Ok(Self {
            tools: r
                .tools
                .into_iter()
                .map(ToolRecord::try_from)
                .collect::<Result<_, _>>()?,
            generation: r.generation,
        })
    }
}

impl From<ShardWriteResponse> for pb::WriteResponse {
    fn from(r: ShardWriteResponse) -> Self {
        Self {
            affected: r.affected,
            generation: r.generation,
            fields_indexed: r.fields_indexed,
        }
    }
}

impl From<pb::WriteResponse> for ShardWriteResponse {
    fn from(r: pb::WriteResponse) -> Self {
        Self {
            affected: r.affected,
            generation: r.generation,
            fields_indexed: r.fields_indexed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_request_round_trips() {
        let mut stats = TermStats::default();
        stats.total_docs = 3;
        stats.field_tokens.insert("name".into(), 9);
        stats.doc_freqs.insert(("name".into(), "slack".into()), 2);
        let request = ShardSearchRequest {
            project_id: "p".into(),
            integrations: vec!["slack".into()],
            query: "q".into(),
            vector: Some(vec![0.5, 0.25]),
            categories: vec!["messaging".into()],
            max_side_effect: Some(SideEffect::Write),
            limit: 50,
            lexical: true,
            stats: Some(stats),
            structured: Some(r#"{"v":1,"filter":{"type":"exists","field":"category"}}"#.into()),
            records: Some(16),
        };
        let wire: pb::SearchToolsRequest = request.clone().into();
        assert_eq!(ShardSearchRequest::try_from(wire).unwrap(), request);
    }

    #[test]
    fn records_go_on_the_wire_for_the_hits_asked_for() {
        use std::sync::Arc;
        let hit = |name: &str| Hit {
            name: name.into(),
            integration: "i".into(),
            score: 1.0,
        };
        let record = |name: &str| {
            Arc::new(ToolRecord {
                name: name.into(),
                integration: "i".into(),
                category: String::new(),
                side_effect: SideEffect::Read,
                description: "d".into(),
                parameters: "{}".into(),
                tokens: 3,
            })
        };
        let response = ShardSearchResponse {
            lexical: ["a", "b", "c"].map(hit).to_vec(),
            dense: ["d", "a", "e"].map(hit).to_vec(),
            tools: ["a", "b", "c", "d", "e"].map(record).to_vec(),
            ..Default::default()
        };
        let sent = |records| {
            let wire = search_response_to_wire(response.clone(), records);
            assert_eq!(wire.lexical.len(), 3);
            assert_eq!(wire.dense.len(), 3);
            wire.tools.into_iter().map(|t| t.name).collect::<Vec<_>>()
        };
        assert_eq!(sent(None), ["a", "b", "c", "d", "e"]);
        assert_eq!(sent(Some(2)), ["a", "b", "d"]);
        assert_eq!(sent(Some(1)), ["a", "d"]);
        assert_eq!(sent(Some(0)), Vec::<String>::new());
    }

    #[test]
    fn inline_request_round_trips() {
        let mut stats = TermStats {
            total_docs: 7,
            ..Default::default()
        };
        stats
            .doc_freqs
            .insert(("description".into(), "ticket".into()), 3);
        let request = InlineSearchRequest {
            project_id: "p".into(),
            tools: vec![IndexedTool {
                record: ToolRecord {
                    name: "MY_CREATE_TICKET".into(),
                    integration: "inline".into(),
                    category: "support".into(),
                    side_effect: SideEffect::Write,
                    description: "Create a ticket.".into(),
                    parameters: r#"{"type":"object"}"#.into(),
                    tokens: 12,
                },
                vector: vec![0.6, 0.8],
            }],
            query: "open a ticket".into(),
            vector: Some(vec![1.0, 0.0]),
            categories: vec!["support".into()],
            max_side_effect: Some(SideEffect::Send),
            limit: 20,
            lexical: true,
            stats: Some(stats),
        };
        let wire: pb::SearchInlineRequest = request.clone().into();
        assert_eq!(InlineSearchRequest::try_from(wire).unwrap(), request);

        let bare = InlineSearchRequest {
            limit: 5,
            ..Default::default()
        };
        let wire: pb::SearchInlineRequest = bare.clone().into();
        assert_eq!(InlineSearchRequest::try_from(wire).unwrap(), bare);
    }

    #[test]
    fn inline_tool_without_record_names_the_field() {
        let wire = pb::SearchInlineRequest {
            tools: vec![pb::IndexedTool {
                record: None,
                vector: vec![1.0],
            }],
            ..Default::default()
        };
        let err = InlineSearchRequest::try_from(wire).unwrap_err();
        let Error::InvalidArgument { violations, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!(violations[0].field, "tools[0].record");
    }

    #[test]
    fn search_response_round_trips_with_generations() {
        let response = ShardSearchResponse {
            lexical: vec![Hit {
                name: "SLACK_POST_MESSAGE".into(),
                integration: "slack".into(),
                score: 2.5,
            }],
            generations: [("slack".to_string(), 7u64), ("github".to_string(), 0)]
                .into_iter()
                .collect(),
            stamp: Some(u64::MAX),
            ..Default::default()
        };
        let wire: pb::SearchToolsResponse = response.clone().into();
        assert_eq!(wire.generations.get("slack"), Some(&7));
        assert_eq!(ShardSearchResponse::try_from(wire).unwrap(), response);
    }

    #[test]
    fn scope_stats_round_trip_with_or_without_a_stamp() {
        for stamp in [None, Some(0), Some(u64::MAX)] {
            let counted = ScopeStats {
                stats: TermStats {
                    total_docs: 12,
                    field_tokens: [("name".to_string(), 40u64)].into_iter().collect(),
                    doc_freqs: [(("name".to_string(), "send".to_string()), 3u64)]
                        .into_iter()
                        .collect(),
                },
                stamp,
            };
            let wire: pb::TermStatsResponse = counted.clone().into();
            assert_eq!(wire.stamp, stamp);
            assert_eq!(ScopeStats::from(wire), counted);
        }
        // Statistics sent with a search carry no stamp.
        let wire: pb::TermStatsResponse = TermStats::default().into();
        assert_eq!(wire.stamp, None);
    }

    #[test]
    fn bad_side_effect_names_the_field() {
        let wire = pb::SearchToolsRequest {
            max_side_effect: "admin".into(),
            ..Default::default()
        };
        let err = ShardSearchRequest::try_from(wire).unwrap_err();
        assert!(
            err.to_string().contains("validation") || matches!(err, Error::InvalidArgument { .. })
        );
    }
}
