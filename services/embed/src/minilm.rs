//! all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) on CPU: WordPiece tokens (at most 256, as
//! sentence-transformers truncates), a 6-layer BERT ([`crate::bert`]), mean pooling over the
//! text's word pieces, L2 normalisation. 384 dimensions.
//!
//! A batch is split across `threads` worker threads by word pieces (longest texts first, each to
//! the least loaded thread); one text, the query path, runs on the calling thread alone.

use std::path::Path;

use tokenizers::{Tokenizer, TruncationParams};

use crate::bert::{Bert, Config, Pieces, Weights};
use crate::{EmbedError, Embedder, Result};

/// Word pieces per text, `[CLS]` and `[SEP]` included, as sentence-transformers truncates.
pub const MAX_TOKENS: usize = 256;

/// Word pieces below which a batch is not worth a second thread.
const MIN_PIECES_PER_THREAD: usize = 256;

pub struct MiniLm {
    model: Bert,
    tokenizer: Tokenizer,
    dim: usize,
    threads: usize,
    id: String,
}

impl MiniLm {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`; batches use every
    /// core.
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_for(dir, agentsearch_common::simd::build())
    }

    /// [`MiniLm::load`] with every weight kept in f32 whatever the build (the vector builds
    /// otherwise keep the linear layers in half precision): the reference for comparisons.
    pub fn load_f32(dir: &Path) -> Result<Self> {
        Self::load_as(dir, agentsearch_common::simd::build(), Weights::F32)
    }

    /// [`MiniLm::load`] for a named build of the kernels (the portable one where this CPU
    /// cannot run it).
    pub(crate) fn load_for(dir: &Path, build: agentsearch_common::simd::Build) -> Result<Self> {
        Self::load_as(dir, build, Weights::HalfWhereConverted)
    }

    fn load_as(
        dir: &Path,
        build: agentsearch_common::simd::Build,
        weights: Weights,
    ) -> Result<Self> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| {
                EmbedError::ModelUnavailable(format!(
                    "cannot read {}: {e}",
                    dir.join(name).display()
                ))
            })
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| EmbedError::ModelUnavailable(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| EmbedError::ModelUnavailable(format!("tokenizer.json: {e}")))?;
        // Every text keeps its own length: the encoder lays them end to end, unpadded.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::ModelUnavailable(format!("tokenizer truncation: {e}")))?;
        let model = Bert::load_for(&config, &read("model.safetensors")?, build, weights)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Self {
            model,
            tokenizer,
            dim: config.hidden_size,
            threads,
            id: "all-MiniLM-L6-v2".to_string(),
        })
    }

    /// Threads a batch may use (at least one).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    fn tokenize(&self, texts: &[&str]) -> Result<Vec<Pieces>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Failed(format!("tokenize: {e}")))?;
        encodings
            .into_iter()
            .map(|e| {
                let pieces = Pieces {
                    ids: e.get_ids().to_vec(),
                    types: e.get_type_ids().to_vec(),
                };
                self.model.check(&pieces)?;
                Ok(pieces)
            })
            .collect()
    }
}

/// Splits texts (by their word-piece counts) into at most `threads` groups of similar work:
/// longest first, each to the group with the least so far. Returns the indices of each group.
fn balance(lengths: &[usize], threads: usize) -> Vec<Vec<usize>> {
    let total: usize = lengths.iter().sum();
    let groups = threads
        .min(lengths.len())
        .min(total / MIN_PIECES_PER_THREAD)
        .max(1);
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    // Attention grows with the square of a text's length: weigh it in.
    let cost = |len: usize| len * (MAX_TOKENS + len);
    let mut load = vec![0usize; groups];
    let mut out = vec![Vec::new(); groups];
    for i in order {
        let g = (0..groups).min_by_key(|&g| load[g]).unwrap_or(0);
        load[g] += cost(lengths[i]);
        out[g].push(i);
    }
    out
}

impl Embedder for MiniLm {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let pieces = self.tokenize(texts)?;
        in_parallel(&pieces, self.threads, |batch| self.model.embed(batch))
    }
}

/// `run` over `pieces` split across at most `threads` scoped threads by [`balance`] (on the
/// calling thread alone when one group suffices); its outputs, one per text, in input order.
pub(crate) fn in_parallel<T: Send>(
    pieces: &[Pieces],
    threads: usize,
    run: impl Fn(&[&Pieces]) -> Vec<T> + Sync,
) -> Result<Vec<T>> {
    let lengths: Vec<usize> = pieces.iter().map(|p| p.ids.len()).collect();
    let groups = balance(&lengths, threads);
    if groups.len() == 1 {
        let all: Vec<&Pieces> = pieces.iter().collect();
        return Ok(run(&all));
    }
    let mut out: Vec<Option<T>> = std::iter::repeat_with(|| None).take(pieces.len()).collect();
    let results: Vec<(Vec<usize>, Vec<T>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|group| {
                let run = &run;
                scope.spawn(move || {
                    let batch: Vec<&Pieces> = group.iter().map(|&i| &pieces[i]).collect();
                    let outputs = run(&batch);
                    (group, outputs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| EmbedError::Failed("an embedding thread panicked".into()))
    })?;
    for (group, outputs) in results {
        for (i, v) in group.into_iter().zip(outputs) {
            out[i] = Some(v);
        }
    }
    out.into_iter()
        .map(|v| v.ok_or_else(|| EmbedError::Failed("a text got no output".into())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_dir() -> Option<std::path::PathBuf> {
        let dir = std::env::var_os("AGENTSEARCH_EMBED__MODEL_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2")
            });
        dir.join("model.safetensors").exists().then_some(dir)
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn embeddings_are_normalised_and_meaningful() {
        let dir = model_dir().expect("model weights missing: run scripts/fetch-model.sh");
        let model = MiniLm::load(&dir).unwrap();
        let v = model
            .embed(&[
                "post a message to a slack channel",
                "send a chat message to a channel",
                "refund a payment",
            ])
            .unwrap();
        assert_eq!(v.len(), 3);
        for x in &v {
            assert_eq!(x.len(), 384);
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4);
        }
        assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2);
        // Batched (padded) and single embeddings agree.
        let single = model.embed(&["refund a payment"]).unwrap();
        assert!(cosine(&single[0], &v[2]) > 0.9999);
    }

    /// Every build of the kernels this CPU runs gives the portable build's vectors, to well within
    /// 1e-4 of cosine, for a short query and a passage of about 200 word pieces (the vector
    /// builds with their weights in half precision where the CPU has F16C).
    #[test]
    fn every_build_of_the_kernels_gives_the_same_embeddings() {
        use agentsearch_common::simd::Build;
        let dir = model_dir().expect("model weights missing: run scripts/fetch-model.sh");
        let passage = "Alterations of the architecture of cerebral white matter in the developing \
            human brain can affect cortical development and result in functional disabilities. "
            .repeat(6);
        let texts = ["post a message to a slack channel now", passage.as_str()];
        let portable = MiniLm::load_for(&dir, Build::Portable).unwrap();
        assert!(
            portable.tokenize(&texts).unwrap()[1].ids.len() > 150,
            "a long passage"
        );
        let want = portable.embed(&texts).unwrap();
        for build in [Build::Fma256, Build::Avx512] {
            if !build.supported() {
                continue;
            }
            let got = MiniLm::load_for(&dir, build)
                .unwrap()
                .embed(&texts)
                .unwrap();
            for (g, w) in got.iter().zip(&want) {
                let c = cosine(g, w);
                assert!(c > 1.0 - 1e-5, "{}: cosine {c}", build.name());
                for (a, b) in g.iter().zip(w) {
                    assert!((a - b).abs() < 3e-4, "{}: {a} vs {b}", build.name());
                }
            }
        }
    }
}
