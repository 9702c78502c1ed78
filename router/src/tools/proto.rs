//! Conversions between the tool search API types shared by both searches ([`crate::tools::api`])
//! and their protobuf messages, for the gRPC adapters of tool and context search.

use agentsearch_proto::v1 as pb;

/// A `query_embedding` as sent over gRPC (the API layer checks it as for JSON).
pub(crate) fn raw_query_embedding(e: pb::QueryEmbedding) -> crate::tools::api::RawQueryEmbedding {
    crate::tools::api::RawQueryEmbedding {
        model: Some(e.model),
        vector: Some(e.vector.into_iter().map(f64::from).collect()),
    }
}

pub(crate) fn explain_to_proto(e: crate::tools::api::Explain) -> pb::Explain {
    let hit = |h: crate::tools::api::RetrieverHit| pb::RetrieverHit {
        rank: h.rank,
        score: h.score,
    };
    pb::Explain {
        lexical: e.lexical.map(hit),
        dense: e.dense.map(hit),
    }
}
