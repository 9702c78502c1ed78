//! Text embeddings for agentsearch: the [`Embedder`] trait, all-MiniLM-L6-v2 run on CPU with candle
//! ([`MiniLm`]), and a cache of query embeddings ([`CachedEmbedder`]). It does not know about
//! indexes or requests; callers run it off the async executor (it is CPU-bound).

mod minilm;

use std::sync::Arc;

pub use minilm::MiniLm;

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

/// Wraps an embedder with an in-memory cache of single-text (query) embeddings.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Option<moka::sync::Cache<String, Arc<Vec<f32>>>>,
}

impl CachedEmbedder {
    /// `capacity` = 0 disables the cache.
    pub fn new(inner: Arc<dyn Embedder>, capacity: u64) -> Self {
        let cache = (capacity > 0).then(|| moka::sync::Cache::new(capacity));
        Self { inner, cache }
    }

    pub fn inner(&self) -> &Arc<dyn Embedder> {
        &self.inner
    }

    /// The cached embedding of `text`, if any (cheap: callers try it before a blocking embed).
    pub fn cached(&self, text: &str) -> Option<Arc<Vec<f32>>> {
        self.cache.as_ref().and_then(|c| c.get(text))
    }

    /// The embedding of one query, from the cache when it was embedded before.
    /// Returns whether it was a cache hit.
    pub fn embed_query(&self, text: &str) -> Result<(Arc<Vec<f32>>, bool)> {
        if let Some(cache) = &self.cache
            && let Some(hit) = cache.get(text)
        {
            return Ok((hit, true));
        }
        let vector = Arc::new(
            self.inner
                .embed(&[text])?
                .pop()
                .ok_or_else(|| EmbedError::Failed("no output".into()))?,
        );
        if let Some(cache) = &self.cache {
            cache.insert(text.to_string(), vector.clone());
        }
        Ok((vector, false))
    }
}

impl CachedEmbedder {
    /// Embeddings of several texts: cached ones from the cache, the others in one batch (then
    /// cached). In input order.
    pub fn embed_many(&self, texts: &[&str]) -> Result<Vec<Arc<Vec<f32>>>> {
        let mut out: Vec<Option<Arc<Vec<f32>>>> = texts.iter().map(|t| self.cached(t)).collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let vectors = self.inner.embed(&batch)?;
            if vectors.len() != batch.len() {
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
        Ok(out
            .into_iter()
            .map(|v| v.expect("every text embedded"))
            .collect())
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
        let vectors = embedder.embed(&batch)?;
        for (&i, v) in chunk.iter().zip(vectors) {
            out[i] = v;
        }
        done += chunk.len();
        progress(done);
    }
    Ok(out)
}
