//! Conversions between the internal context-search messages and the domain types of
//! `agentsearch_common::shard`. Plain field-for-field mappings in both directions.

use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, ExportRecordsRequest,
    FieldData, FieldDecl, FieldValue, IndexedRecord, IndexedSegment, ListRecordsRequest,
    ReadSegmentsRequest, ReadSegmentsResponse, RecordDeleteRequest, RecordInfo, RecordVersion,
    SegmentData, SegmentFetchRequest, SegmentFetchResponse, SegmentHit, SegmentRef,
    SegmentUpsertRequest, ShardTimings, SyncScope,
};

use crate::shard_v1 as pb;

fn all<T, U: From<T>>(v: Vec<T>) -> Vec<U> {
    v.into_iter().map(Into::into).collect()
}

/// Generates `From` both ways between a domain struct and a message with the same field names.
macro_rules! same_fields {
    ($domain:ty, $message:ty, [$($field:ident),*], [$($list:ident),*]) => {
        impl From<$domain> for $message {
            fn from(v: $domain) -> Self {
                Self { $($field: v.$field,)* $($list: all(v.$list),)* }
            }
        }
        impl From<$message> for $domain {
            fn from(v: $message) -> Self {
                Self { $($field: v.$field,)* $($list: all(v.$list),)* }
            }
        }
    };
}

same_fields!(
    ContextStatsRequest,
    pb::ContextStatsRequest,
    [project_id, sync_ids, query],
    []
);
same_fields!(SyncScope, pb::SyncScope, [sync_id, principals, source], []);
same_fields!(FieldDecl, pb::FieldDecl, [name, kind], []);
same_fields!(
    SegmentRef,
    pb::SegmentRef,
    [sync_id, record_id, ordinal, generation],
    []
);
same_fields!(
    SegmentFetchRequest,
    pb::FetchSegmentsRequest,
    [project_id],
    [syncs, segments]
);
same_fields!(
    SegmentFetchResponse,
    pb::FetchSegmentsResponse,
    [],
    [segments, failures]
);
same_fields!(
    SegmentHit,
    pb::SegmentHit,
    [sync_id, record_id, ordinal, score],
    []
);
same_fields!(
    SegmentData,
    pb::SegmentData,
    [sync_id, record_id, ordinal, text, highlights],
    []
);
same_fields!(
    RecordInfo,
    pb::RecordInfo,
    [sync_id, record_id, display_name, generation, segments],
    []
);
same_fields!(
    IndexedSegment,
    pb::IndexedSegment,
    [ordinal, text, vector],
    []
);
same_fields!(
    IndexedRecord,
    pb::IndexedRecord,
    [record_id, display_name, generation, principals],
    [segments, fields]
);
same_fields!(
    SegmentUpsertRequest,
    pb::UpsertSegmentsRequest,
    [project_id, sync_id],
    [records, fields]
);
same_fields!(
    ListRecordsRequest,
    pb::ListRecordsRequest,
    [project_id, sync_id, after, limit],
    []
);
same_fields!(
    RecordVersion,
    pb::RecordVersion,
    [record_id, generation],
    []
);
same_fields!(
    ExportRecordsRequest,
    pb::ExportRecordsRequest,
    [project_id, sync_id, record_ids],
    []
);
same_fields!(
    RecordDeleteRequest,
    pb::DeleteRecordsRequest,
    [project_id, sync_id, record_ids],
    []
);
same_fields!(
    ReadSegmentsRequest,
    pb::ReadSegmentsRequest,
    [
        project_id, sync_id, record_id, ordinal, before, after, principals
    ],
    []
);

impl From<ContextSearchRequest> for pb::SearchSegmentsRequest {
    fn from(r: ContextSearchRequest) -> Self {
        Self {
            project_id: r.project_id,
            syncs: all(r.syncs),
            query: r.query,
            vector: r.vector.unwrap_or_default(),
            limit: r.limit,
            lexical: r.lexical,
            stats: r.stats.map(Into::into),
            structured: r.structured,
            fields: all(r.fields),
            defer_texts: r.defer_texts,
            texts_head: r.texts_head,
        }
    }
}

impl From<pb::SearchSegmentsRequest> for ContextSearchRequest {
    fn from(r: pb::SearchSegmentsRequest) -> Self {
        Self {
            project_id: r.project_id,
            syncs: all(r.syncs),
            query: r.query,
            vector: (!r.vector.is_empty()).then_some(r.vector),
            limit: r.limit,
            lexical: r.lexical,
            stats: r.stats.map(Into::into),
            structured: r.structured,
            fields: all(r.fields),
            defer_texts: r.defer_texts,
            texts_head: r.texts_head,
        }
    }
}

impl From<ContextSearchResponse> for pb::SearchSegmentsResponse {
    fn from(r: ContextSearchResponse) -> Self {
        Self {
            lexical: all(r.lexical),
            dense: all(r.dense),
            lexical_matched: r.lexical_matched,
            segments: all(r.segments),
            records: all(r.records),
            failures: all(r.failures),
            visible_generation: r.visible_generation,
            prepare_ms: r.timings.prepare_ms,
            lexical_ms: r.timings.lexical_ms,
            dense_ms: r.timings.dense_ms,
            assemble_ms: r.timings.assemble_ms,
            structured: r.structured,
            matched: r.matched,
        }
    }
}

impl From<pb::SearchSegmentsResponse> for ContextSearchResponse {
    fn from(r: pb::SearchSegmentsResponse) -> Self {
        Self {
            lexical: all(r.lexical),
            dense: all(r.dense),
            lexical_matched: r.lexical_matched,
            segments: all(r.segments),
            records: all(r.records),
            failures: all(r.failures),
            visible_generation: r.visible_generation,
            timings: ShardTimings {
                prepare_ms: r.prepare_ms,
                lexical_ms: r.lexical_ms,
                dense_ms: r.dense_ms,
                assemble_ms: r.assemble_ms,
            },
            structured: r.structured,
            matched: r.matched,
        }
    }
}

impl From<FieldValue> for pb::FieldValue {
    fn from(v: FieldValue) -> Self {
        use pb::field_value::Value;
        Self {
            name: v.name,
            value: Some(match v.value {
                FieldData::Keyword(s) => Value::Keyword(s),
                FieldData::Text(s) => Value::Text(s),
                FieldData::Number(x) => Value::Number(x),
                FieldData::Date(ms) => Value::DateMs(ms),
                FieldData::Flag(b) => Value::Flag(b),
            }),
        }
    }
}

/// A value the sender left empty becomes an empty keyword, which the index refuses by name.
impl From<pb::FieldValue> for FieldValue {
    fn from(v: pb::FieldValue) -> Self {
        use pb::field_value::Value;
        Self {
            name: v.name,
            value: match v.value {
                Some(Value::Keyword(s)) => FieldData::Keyword(s),
                Some(Value::Text(s)) => FieldData::Text(s),
                Some(Value::Number(x)) => FieldData::Number(x),
                Some(Value::DateMs(ms)) => FieldData::Date(ms),
                Some(Value::Flag(b)) => FieldData::Flag(b),
                None => FieldData::Keyword(String::new()),
            },
        }
    }
}

impl From<Option<ReadSegmentsResponse>> for pb::ReadSegmentsResponse {
    fn from(r: Option<ReadSegmentsResponse>) -> Self {
        match r {
            Some(r) => Self {
                record: Some(r.record.into()),
                segments: all(r.segments),
            },
            None => Self::default(),
        }
    }
}

impl From<pb::ReadSegmentsResponse> for Option<ReadSegmentsResponse> {
    fn from(r: pb::ReadSegmentsResponse) -> Self {
        Some(ReadSegmentsResponse {
            record: r.record?.into(),
            segments: all(r.segments),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_round_trips_through_the_wire() {
        let request = ContextSearchRequest {
            project_id: "p".into(),
            syncs: vec![SyncScope {
                sync_id: "s".into(),
                principals: vec!["anyone".into()],
                source: "box".into(),
            }],
            query: "q".into(),
            vector: Some(vec![0.5, 0.5]),
            limit: 7,
            lexical: true,
            stats: None,
            structured: Some(r#"{"v":1}"#.into()),
            fields: vec![FieldDecl {
                name: "size".into(),
                kind: "numeric".into(),
            }],
            defer_texts: true,
            texts_head: 3,
        };
        let wire: pb::SearchSegmentsRequest = request.clone().into();
        assert_eq!(ContextSearchRequest::from(wire), request);
        let fetch = SegmentFetchRequest {
            project_id: "p".into(),
            syncs: request.syncs.clone(),
            segments: vec![SegmentRef {
                sync_id: "s".into(),
                record_id: "r".into(),
                ordinal: 3,
                generation: 2,
            }],
        };
        let wire: pb::FetchSegmentsRequest = fetch.clone().into();
        assert_eq!(SegmentFetchRequest::from(wire), fetch);
        let none: Option<ReadSegmentsResponse> = pb::ReadSegmentsResponse::default().into();
        assert_eq!(none, None);
    }
}
