//! [`CrossEncoder`]: a BERT sequence classifier that scores (query, passage) pairs, such as
//! cross-encoder/ms-marco-MiniLM-L-6-v2, on the encoder of [`crate::bert`].
//!
//! A pair is tokenized as `[CLS] query [SEP] passage [SEP]` (segment ids 0, then 1) and truncated
//! to at most 512 word pieces or the model's positions, the passage first. The last hidden state of
//! `[CLS]` goes through the pooler (`tanh(dense(.))`) and the classifier; one label gives
//! `sigmoid(logit)`, several give the softmax probability of the last label, as
//! text-embeddings-inference reports by default.
//!
//! A batch is split across threads like [`crate::MiniLm`]'s; one pair runs on the calling thread.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use tokenizers::utils::truncation::TruncationError;
use tokenizers::{Encoding, PostProcessor, Tokenizer, TruncationParams, TruncationStrategy};

use crate::bert::{self, Bert, Config, Pieces};
use crate::minilm::in_parallel;
use crate::{EmbedError, Result};

/// Word pieces of a pair at most, `[CLS]` and both `[SEP]` included (fewer when the model has
/// fewer positions).
pub const MAX_PAIR_TOKENS: usize = 512;

/// The classification head's part of `config.json`.
#[derive(Deserialize)]
struct HeadConfig {
    #[serde(default)]
    num_labels: Option<usize>,
    #[serde(default)]
    id2label: Option<BTreeMap<String, serde_json::Value>>,
}

/// A dense layer of the head, `out = W . x + b` with `W` stored `outputs x inputs`.
struct Dense {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl Dense {
    fn apply(&self, x: &[f32]) -> Vec<f32> {
        self.weight
            .chunks_exact(x.len().max(1))
            .zip(&self.bias)
            .map(|(row, b)| b + row.iter().zip(x).map(|(w, v)| w * v).sum::<f32>())
            .collect()
    }
}

/// Scores (query, passage) pairs with a BERT cross-encoder; higher is more relevant.
pub struct CrossEncoder {
    model: Bert,
    pooler: Dense,
    classifier: Dense,
    /// Truncates the passage only: the usual case.
    passage_first: Tokenizer,
    /// Truncates the longer side first: for queries too long to keep whole.
    longest_first: Tokenizer,
    max_tokens: usize,
    labels: usize,
    threads: usize,
}

fn unavailable(message: String) -> EmbedError {
    EmbedError::ModelUnavailable(message)
}

/// `tokenizer` with no padding and truncation of pairs to `max_tokens` by `strategy`.
fn truncating(
    mut tokenizer: Tokenizer,
    max_tokens: usize,
    strategy: TruncationStrategy,
) -> Result<Tokenizer> {
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            strategy,
            ..Default::default()
        }))
        .map_err(|e| unavailable(format!("tokenizer truncation: {e}")))?;
    Ok(tokenizer)
}

impl CrossEncoder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir` (a Hugging Face
    /// `BertForSequenceClassification` export); batches use every core.
    pub fn load(dir: &Path) -> Result<Self> {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|e| unavailable(format!("cannot read {}: {e}", dir.join(name).display())))
        };
        let config_bytes = read("config.json")?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| unavailable(format!("config.json: {e}")))?;
        let head: HeadConfig = serde_json::from_slice(&config_bytes)
            .map_err(|e| unavailable(format!("config.json: {e}")))?;
        let labels = match (&head.id2label, head.num_labels) {
            (Some(id2label), _) if !id2label.is_empty() => id2label.len(),
            (_, Some(labels)) => labels,
            _ => 1,
        };
        if labels == 0 {
            return Err(unavailable("config.json: num_labels is 0".into()));
        }
        let tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| unavailable(format!("tokenizer.json: {e}")))?;
        let max_tokens = MAX_PAIR_TOKENS.min(config.max_position_embeddings);
        let specials = tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(true));
        if max_tokens < specials + 2 {
            return Err(unavailable(format!(
                "{max_tokens} positions leave no room for a query and a passage beside \
                 {specials} special tokens"
            )));
        }
        let passage_first = truncating(
            tokenizer.clone(),
            max_tokens,
            TruncationStrategy::OnlySecond,
        )?;
        let longest_first = truncating(tokenizer, max_tokens, TruncationStrategy::LongestFirst)?;

        let safetensors = read("model.safetensors")?;
        let model = Bert::load(&config, &safetensors)?;
        let weights = safetensors::SafeTensors::deserialize(&safetensors)
            .map_err(|e| unavailable(format!("model.safetensors: {e}")))?;
        let h = config.hidden_size;
        let dense = |prefix: &str, outputs: usize| -> Result<Dense> {
            Ok(Dense {
                weight: bert::tensor(&weights, &format!("{prefix}.weight"), &[outputs, h])?,
                bias: bert::tensor(&weights, &format!("{prefix}.bias"), &[outputs])?,
            })
        };
        let head_error = |e: EmbedError| match e {
            EmbedError::ModelUnavailable(m) => unavailable(format!(
                "{m} (a cross-encoder is a BertForSequenceClassification with a pooler and a \
                 classifier)"
            )),
            other => other,
        };
        let pooler = dense("pooler.dense", h).map_err(head_error)?;
        let classifier = dense("classifier", labels).map_err(head_error)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Self {
            model,
            pooler,
            classifier,
            passage_first,
            longest_first,
            max_tokens,
            labels,
            threads,
        })
    }

    /// Threads a batch may use (at least one).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Word pieces a pair is truncated to.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Labels of the classifier (1 for a relevance score).
    pub fn labels(&self) -> usize {
        self.labels
    }

    /// The relevance of each passage to `query`, in input order: in 0..1, higher is more relevant.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let pieces = passages
            .iter()
            .map(|passage| self.tokenize(query, passage))
            .collect::<Result<Vec<_>>>()?;
        let rows = in_parallel(&pieces, self.threads, |batch| self.model.first_rows(batch))?;
        rows.iter()
            .map(|cls| {
                let score = self.head(cls);
                if score.is_finite() {
                    Ok(score)
                } else {
                    Err(EmbedError::Failed(format!("the model scored {score}")))
                }
            })
            .collect()
    }

    /// The word pieces of one pair, the passage truncated first, both sides when the query alone
    /// is too long.
    fn tokenize(&self, query: &str, passage: &str) -> Result<Pieces> {
        let failed = |e: tokenizers::Error| EmbedError::Failed(format!("tokenize: {e}"));
        let encoding: Encoding = match self.passage_first.encode((query, passage), true) {
            Ok(encoding) => encoding,
            Err(e) if e.downcast_ref::<TruncationError>().is_some() => self
                .longest_first
                .encode((query, passage), true)
                .map_err(failed)?,
            Err(e) => return Err(failed(e)),
        };
        let pieces = Pieces {
            ids: encoding.get_ids().to_vec(),
            types: encoding.get_type_ids().to_vec(),
        };
        self.model.check(&pieces)?;
        Ok(pieces)
    }

    /// The score of one pair from the last hidden state of its `[CLS]`.
    fn head(&self, cls: &[f32]) -> f32 {
        let pooled: Vec<f32> = self.pooler.apply(cls).into_iter().map(f32::tanh).collect();
        let logits = self.classifier.apply(&pooled);
        match logits[..] {
            [logit] => 1.0 / (1.0 + (-logit).exp()),
            _ => {
                let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let total: f32 = logits.iter().map(|l| (l - max).exp()).sum();
                logits.last().map_or(f32::NAN, |l| (l - max).exp() / total)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiny;

    /// erf by its Taylor series (|x| < 5; beyond, erf is ±1 to 1.5e-12).
    fn erf(x: f64) -> f64 {
        if x.abs() >= 5.0 {
            return x.signum();
        }
        let (mut term, mut sum) = (x, x);
        for n in 1..200 {
            term *= -x * x / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    /// The textbook forward pass of the tiny model in f64, one pair: its score.
    fn reference(weights: &tiny::Weights, ids: &[u32], types: &[u32]) -> f64 {
        let w = |name: &str| -> Vec<f64> {
            let (_, values) = weights.get(name).expect(name);
            values.iter().map(|&v| v as f64).collect()
        };
        let (h, n) = (tiny::HIDDEN, ids.len());
        let norm = |x: &mut [f64], prefix: &str| {
            let (g, b) = (w(&format!("{prefix}.weight")), w(&format!("{prefix}.bias")));
            let mean = x.iter().sum::<f64>() / h as f64;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h as f64;
            for (j, v) in x.iter_mut().enumerate() {
                *v = (*v - mean) / (var + tiny::EPS).sqrt() * g[j] + b[j];
            }
        };
        // out[o] = b[o] + sum_i W[o][i] x[i]
        let dense = |x: &[f64], prefix: &str| -> Vec<f64> {
            let (wt, b) = (w(&format!("{prefix}.weight")), w(&format!("{prefix}.bias")));
            (0..b.len())
                .map(|o| {
                    b[o] + (0..x.len())
                        .map(|i| wt[o * x.len() + i] * x[i])
                        .sum::<f64>()
                })
                .collect()
        };
        let (word, pos, ty) = (
            w("bert.embeddings.word_embeddings.weight"),
            w("bert.embeddings.position_embeddings.weight"),
            w("bert.embeddings.token_type_embeddings.weight"),
        );
        let mut x: Vec<Vec<f64>> = (0..n)
            .map(|p| {
                let (id, t) = (ids[p] as usize, types[p] as usize);
                let mut row: Vec<f64> = (0..h)
                    .map(|j| word[id * h + j] + pos[p * h + j] + ty[t * h + j])
                    .collect();
                norm(&mut row, "bert.embeddings.LayerNorm");
                row
            })
            .collect();
        let d = h / tiny::HEADS;
        for l in 0..tiny::LAYERS {
            let p = format!("bert.encoder.layer.{l}");
            let proj = |part: &str| -> Vec<Vec<f64>> {
                x.iter()
                    .map(|row| dense(row, &format!("{p}.attention.self.{part}")))
                    .collect()
            };
            let (q, k, v) = (proj("query"), proj("key"), proj("value"));
            let mut context = vec![vec![0.0; h]; n];
            for head in 0..tiny::HEADS {
                let cols = head * d..(head + 1) * d;
                for i in 0..n {
                    let scores: Vec<f64> = (0..n)
                        .map(|j| {
                            cols.clone().map(|c| q[i][c] * k[j][c]).sum::<f64>() / (d as f64).sqrt()
                        })
                        .collect();
                    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = exps.iter().sum();
                    for c in cols.clone() {
                        context[i][c] = (0..n).map(|j| exps[j] / total * v[j][c]).sum();
                    }
                }
            }
            for i in 0..n {
                let mut attended = dense(&context[i], &format!("{p}.attention.output.dense"));
                for (a, r) in attended.iter_mut().zip(&x[i]) {
                    *a += r;
                }
                norm(&mut attended, &format!("{p}.attention.output.LayerNorm"));
                let up: Vec<f64> = dense(&attended, &format!("{p}.intermediate.dense"))
                    .into_iter()
                    .map(|u| 0.5 * u * (1.0 + erf(u / std::f64::consts::SQRT_2)))
                    .collect();
                let mut out = dense(&up, &format!("{p}.output.dense"));
                for (o, a) in out.iter_mut().zip(&attended) {
                    *o += a;
                }
                norm(&mut out, &format!("{p}.output.LayerNorm"));
                x[i] = out;
            }
        }
        let pooled: Vec<f64> = dense(&x[0], "bert.pooler.dense")
            .into_iter()
            .map(f64::tanh)
            .collect();
        let logits = dense(&pooled, "classifier");
        if let [logit] = logits[..] {
            return 1.0 / (1.0 + (-logit).exp());
        }
        let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = logits.iter().map(|l| (l - max).exp()).sum();
        (logits[logits.len() - 1] - max).exp() / total
    }

    /// The untruncated word pieces of a pair, by the tokenizer file alone.
    fn pieces(dir: &Path, query: &str, passage: &str) -> (Vec<u32>, Vec<u32>) {
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
        let e = tokenizer.encode((query, passage), true).unwrap();
        (e.get_ids().to_vec(), e.get_type_ids().to_vec())
    }

    const QUERY: &str = "how do i refund a payment?";
    const PASSAGES: &[&str] = &[
        "refund the payment to my account.",
        "post a message to a slack channel",
        "",
        "track and cancel orders",
        "reset the password of a user, then email them",
        "zebras graze quietly",
    ];

    fn model(seed: u64, labels: usize) -> (tempfile::TempDir, tiny::Weights) {
        let dir = tempfile::tempdir().unwrap();
        let weights = tiny::weights(seed, labels);
        tiny::write_model(dir.path(), labels, &weights).unwrap();
        (dir, weights)
    }

    #[test]
    fn scores_match_a_naive_reference_forward_pass() {
        for labels in [1, 2] {
            let (dir, weights) = model(7, labels);
            let encoder = CrossEncoder::load(dir.path()).unwrap();
            assert_eq!(
                (encoder.labels(), encoder.max_tokens()),
                (labels, tiny::POSITIONS)
            );
            let scores = encoder.score(QUERY, PASSAGES).unwrap();
            assert_eq!(scores.len(), PASSAGES.len());
            for (passage, got) in PASSAGES.iter().zip(&scores) {
                let (ids, types) = pieces(dir.path(), QUERY, passage);
                let first_sep = ids.iter().position(|&id| id == 3).unwrap();
                assert_eq!(ids[0], 2, "starts with [CLS]");
                assert!(types[..=first_sep].iter().all(|&t| t == 0), "{types:?}");
                assert!(types[first_sep + 1..].iter().all(|&t| t == 1), "{types:?}");
                let want = reference(&weights, &ids, &types);
                assert!(
                    (*got as f64 - want).abs() < 1e-4,
                    "{labels} labels, {passage:?}: {got} vs {want}"
                );
                assert!((0.0..=1.0).contains(got));
            }
            let spread = scores.iter().copied().fold(f32::MIN, f32::max)
                - scores.iter().copied().fold(f32::MAX, f32::min);
            assert!(
                spread > 1e-3,
                "the tiny model scores everything alike: {scores:?}"
            );
        }
    }

    #[test]
    fn a_passage_scores_the_same_wherever_it_is_in_the_batch() {
        let (dir, _) = model(11, 1);
        let one = CrossEncoder::load(dir.path()).unwrap().with_threads(1);
        let four = CrossEncoder::load(dir.path()).unwrap().with_threads(4);
        // Long enough passages that four threads split the batch (256 pieces per thread).
        let long: Vec<String> = (0..12)
            .map(|i| {
                format!(
                    "{} {}",
                    PASSAGES[i % PASSAGES.len()],
                    "send the invoice ".repeat(15)
                )
            })
            .collect();
        let mut batch: Vec<&str> = PASSAGES.to_vec();
        batch.extend(long.iter().map(String::as_str));
        let alone: Vec<f32> = batch
            .iter()
            .map(|p| one.score(QUERY, &[p]).unwrap()[0])
            .collect();
        let reversed: Vec<&str> = batch.iter().rev().copied().collect();
        for scores in [
            one.score(QUERY, &batch).unwrap(),
            four.score(QUERY, &batch).unwrap(),
            four.score(QUERY, &reversed)
                .unwrap()
                .into_iter()
                .rev()
                .collect(),
        ] {
            for (i, (got, want)) in scores.iter().zip(&alone).enumerate() {
                assert!((got - want).abs() < 1e-6, "passage {i}: {got} vs {want}");
            }
        }
        assert!(four.score(QUERY, &[]).unwrap().is_empty());
    }

    #[test]
    fn long_pairs_are_truncated_passage_first() {
        let (dir, weights) = model(3, 1);
        let encoder = CrossEncoder::load(dir.path()).unwrap();
        let passage = "open the file and list the tools of my account ".repeat(30);
        let score = encoder.score(QUERY, &[&passage]).unwrap()[0];
        // Expected: the query whole, the passage cut so the pair is 64 pieces.
        let (ids, types) = pieces(dir.path(), QUERY, &passage);
        let query_end = ids.iter().position(|&id| id == 3).unwrap() + 1;
        let keep = tiny::POSITIONS - query_end - 1;
        let mut cut_ids = ids[..query_end + keep].to_vec();
        cut_ids.push(3);
        let mut cut_types = types[..query_end + keep].to_vec();
        cut_types.push(1);
        let want = reference(&weights, &cut_ids, &cut_types);
        assert!((score as f64 - want).abs() < 1e-4, "{score} vs {want}");
        // A query longer than the model's positions is cut too, not an error.
        let query = "how do i search ".repeat(40);
        let scores = encoder
            .score(&query, &["send a message", &passage, ""])
            .unwrap();
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{scores:?}");
    }

    #[test]
    fn a_missing_head_tensor_is_a_clear_error() {
        for missing in ["classifier.weight", "bert.pooler.dense.bias"] {
            let dir = tempfile::tempdir().unwrap();
            let mut weights = tiny::weights(5, 1);
            weights.remove(missing);
            tiny::write_model(dir.path(), 1, &weights).unwrap();
            let err = CrossEncoder::load(dir.path()).err().unwrap();
            let text = err.to_string();
            assert!(matches!(err, EmbedError::ModelUnavailable(_)), "{text}");
            assert!(text.contains(missing.trim_start_matches("bert.")), "{text}");
        }
        let dir = tempfile::tempdir().unwrap();
        let err = CrossEncoder::load(dir.path()).err().unwrap();
        assert!(err.to_string().contains("config.json"), "{err}");
        // The public helper writes a loadable model.
        tiny::write_tiny_model(dir.path(), 1);
        assert_eq!(CrossEncoder::load(dir.path()).unwrap().labels(), 1);
    }
}
