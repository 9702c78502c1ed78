//! Text embeddings for agentsearch: the [`Embedder`] trait, all-MiniLM-L6-v2 run on CPU by its own kernels
//! ([`MiniLm`]), and a cache of query embeddings ([`CachedEmbedder`]); on the same encoder, a BERT
//! cross-encoder that scores (query, passage) pairs ([`CrossEncoder`]). It does not know about
//! indexes, requests or how rerank scores are used; callers run it off the async executor (it is
//! CPU-bound).

mod bert;
mod cross;
pub mod kernels;
mod minilm;
mod tiny;

use std::sync::Arc;

pub use cross::{CrossEncoder, MAX_PAIR_TOKENS};
pub use minilm::MiniLm;
#[doc(hidden)]
pub use tiny::write_tiny_model;

/// Result of embedding.
pub type Result<T> = std::result::Result<T, EmbedError>;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model files are missing or unreadable.
    #[error("embedding model unavailable: {0}")]
    ModelUnavailable(String),
    /// A forward pass or tokenization failed.
    #[error("embedding failed: {0}")]
    Failed(String),
}

/// Turns texts into L2-normalised vectors of [`Embedder::dim`] dimensions.
pub trait Embedder: Send + Sync + 'static {
    /// Identifies the model and its settings; vectors of different ids are not comparable.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    /// One vector per text, in input order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

/// One forward pass of `embedder` over `texts`, timed and counted as `kind` (`query`, `batch`).
fn forward(embedder: &dyn Embedder, texts: &[&str], kind: &'static str) -> Result<Vec<Vec<f32>>> {
    use agentsearch_common::metrics::{EMBED_DURATION, EMBED_IN_FLIGHT, EMBED_TEXTS};
    metrics::gauge!(EMBED_IN_FLIGHT).increment(1.0);
    let started = std::time::Instant::now();
    let result = embedder.embed(texts);
    metrics::gauge!(EMBED_IN_FLIGHT).decrement(1.0);
    metrics::histogram!(EMBED_DURATION, "kind" => kind).record(started.elapsed().as_secs_f64());
    metrics::counter!(EMBED_TEXTS, "kind" => kind).increment(texts.len() as u64);
    result
}

fn cache_lookup(hit: bool) {
    let result = if hit { "hit" } else { "miss" };
    metrics::counter!(agentsearch_common::metrics::EMBED_CACHE, "result" => result).increment(1);
}

/// Bytes a cache entry is charged beyond its key and vector: the map's bookkeeping, the `Arc`
/// and the `String` and `Vec` headers.
const ENTRY_OVERHEAD_BYTES: usize = 128;

/// What one cached embedding costs in memory, in bytes (saturating at `u32::MAX`).
pub fn entry_bytes(text: &str, vector: &[f32]) -> u32 {
    let bytes = text.len() + std::mem::size_of_val(vector) + ENTRY_OVERHEAD_BYTES;
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// Wraps an embedder with an in-memory cache of embeddings by text, bounded in bytes (keys,
/// vectors and overhead), so long texts (inline custom tools) cannot grow it past its budget.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Option<moka::sync::Cache<String, Arc<Vec<f32>>>>,
}

impl CachedEmbedder {
    /// `capacity_bytes` = 0 disables the cache.
    pub fn new(inner: Arc<dyn Embedder>, capacity_bytes: u64) -> Self {
        let cache = (capacity_bytes > 0).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(capacity_bytes)
                .weigher(|text: &String, vector: &Arc<Vec<f32>>| entry_bytes(text, vector))
                .build()
        });
        Self { inner, cache }
    }

    pub fn inner(&self) -> &Arc<dyn Embedder> {
        &self.inner
    }

    /// The cached embedding of `text`, if any (cheap: callers try it before a blocking embed,
    /// whose [`CachedEmbedder::embed_query`] counts the miss). A hit is counted.
    pub fn cached(&self, text: &str) -> Option<Arc<Vec<f32>>> {
        let hit = self.cache.as_ref().and_then(|c| c.get(text));
        if hit.is_some() {
            cache_lookup(true);
        }
        hit
    }

    /// Bytes the cache holds now, as its weigher counts them (after pending evictions are done).
    pub fn cached_bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| {
            c.run_pending_tasks();
            c.weighted_size()
        })
    }

    /// The embedding of one query, from the cache when it was embedded before.
    /// Returns whether it was a cache hit.
    pub fn embed_query(&self, text: &str) -> Result<(Arc<Vec<f32>>, bool)> {
        if let Some(cache) = &self.cache {
            let hit = cache.get(text);
            cache_lookup(hit.is_some());
            if let Some(hit) = hit {
                return Ok((hit, true));
            }
        }
        let vector = Arc::new(
            forward(self.inner.as_ref(), &[text], "query")?
                .pop()
                .ok_or_else(|| EmbedError::Failed("no output".into()))?,
        );
        if let Some(cache) = &self.cache {
            cache.insert(text.to_string(), vector.clone());
        }
        Ok((vector, false))
    }

    /// Embeddings of several texts: cached ones from the cache, the others in forward passes of
    /// at most `batch_size` texts (then cached). In input order. Returns how many were cached.
    pub fn embed_many(
        &self,
        texts: &[&str],
        batch_size: usize,
    ) -> Result<(Vec<Arc<Vec<f32>>>, usize)> {
        let mut out: Vec<Option<Arc<Vec<f32>>>> = texts
            .iter()
            .map(|t| self.cache.as_ref().and_then(|c| c.get(*t)))
            .collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        let hits = texts.len() - missing.len();
        if self.cache.is_some() {
            metrics::counter!(agentsearch_common::metrics::EMBED_CACHE, "result" => "hit")
                .increment(hits as u64);
            metrics::counter!(agentsearch_common::metrics::EMBED_CACHE, "result" => "miss")
                .increment(missing.len() as u64);
        }
        if !missing.is_empty() {
            let batch: Vec<String> = missing.iter().map(|&i| texts[i].to_string()).collect();
            let vectors = embed_batched(self.inner.as_ref(), &batch, batch_size, |_| {})?;
            if vectors.len() != batch.len() || vectors.iter().any(Vec::is_empty) {
                return Err(EmbedError::Failed(
                    "the model returned too few vectors".into(),
                ));
            }
            for (&i, vector) in missing.iter().zip(vectors) {
                let vector = Arc::new(vector);
                if let Some(cache) = &self.cache {
                    cache.insert(texts[i].to_string(), vector.clone());
                }
                out[i] = Some(vector);
            }
        }
        let vectors = out.into_iter().flatten().collect::<Vec<_>>();
        debug_assert_eq!(vectors.len(), texts.len());
        Ok((vectors, hits))
    }
}

/// Embeds many texts in batches of `batch_size`, shortest texts batched together so little padding
/// is computed; vectors come back in input order. `progress` is called with the count done so far.
pub fn embed_batched(
    embedder: &dyn Embedder,
    texts: &[String],
    batch_size: usize,
    mut progress: impl FnMut(usize),
) -> Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
    let mut done = 0;
    for chunk in order.chunks(batch_size.max(1)) {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
        let vectors = forward(embedder, &batch, "batch")?;
        for (&i, v) in chunk.iter().zip(vectors) {
            out[i] = v;
        }
        done += chunk.len();
        progress(done);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Vectors of 384 ones; counts texts and the largest forward pass.
    #[derive(Default)]
    struct Counting {
        texts: AtomicUsize,
        largest_batch: AtomicUsize,
    }

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dim(&self) -> usize {
            384
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            self.largest_batch.fetch_max(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|_| vec![1.0; 384]).collect())
        }
    }

    #[test]
    fn the_cache_is_bounded_by_bytes_not_entries() {
        let capacity = 256 * 1024;
        let cache = CachedEmbedder::new(Arc::new(Counting::default()), capacity);
        // 100 texts of 16 KiB: 1.6 MB of keys alone, far past the budget in few entries.
        for i in 0..100 {
            let text = format!("{i:04}{}", "x".repeat(16 * 1024));
            cache.embed_query(&text).unwrap();
        }
        let held = cache.cached_bytes();
        assert!(held <= capacity, "{held} bytes cached, budget {capacity}");
        // The same budget holds short queries by the hundred (about 1.7 KB each).
        let fresh = CachedEmbedder::new(Arc::new(Counting::default()), capacity);
        for i in 0..100 {
            fresh.embed_query(&format!("query {i}")).unwrap();
        }
        let held = fresh.cached_bytes();
        assert!(held <= capacity, "{held} bytes cached, budget {capacity}");
        let kept = (0..100)
            .filter(|i| fresh.cached(&format!("query {i}")).is_some())
            .count();
        assert_eq!(kept, 100);
    }

    #[test]
    fn many_texts_are_embedded_in_bounded_passes_and_cached() {
        let counting = Arc::new(Counting::default());
        let cache = CachedEmbedder::new(counting.clone(), 64 << 20);
        let texts: Vec<String> = (0..200).map(|i| format!("tool {i}")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (vectors, hits) = cache.embed_many(&refs, 16).unwrap();
        assert_eq!((vectors.len(), hits), (200, 0));
        assert_eq!(counting.texts.load(Ordering::SeqCst), 200);
        assert_eq!(counting.largest_batch.load(Ordering::SeqCst), 16);
        // The same texts again: all from the cache, no forward pass.
        let (vectors, hits) = cache.embed_many(&refs, 16).unwrap();
        assert_eq!((vectors.len(), hits), (200, 200));
        assert_eq!(counting.texts.load(Ordering::SeqCst), 200);
    }
}
