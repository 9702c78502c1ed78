//! Pure ranking logic of agentsearch: merging one retriever's ranked lists from several shards,
//! score-aware (fixed or per-query weights) or reciprocal rank fusion across retrievers, token counting and budget packing. No index, no I/O:
//! the router links this crate without linking tantivy or FAISS.

pub mod adaptive;
pub mod budget;
pub mod coverage;
pub mod merge;
pub mod rrf;
pub mod score;
pub mod tokens;

pub use adaptive::{AdaptiveParams, adaptive_weights};
pub use budget::{BudgetScope, MultiPacking, Packing, pack, pack_queries};
pub use coverage::{COVERAGE_DEPTH, QueryTerms, coverage_pair, tool_coverage};
pub use merge::merge_ranked;
pub use rrf::{FusedItem, RankedList, reciprocal_rank_fusion};
pub use score::{ScoreFusion, ScoredList, score_fusion};
