//! all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) on CPU with candle: WordPiece tokens (at most
//! 256, as sentence-transformers), a 6-layer BERT, mean pooling over the attention mask, L2
//! normalisation. 384 dimensions.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::{EmbedError, Embedder, Result};

/// Word pieces per text, `[CLS]` and `[SEP]` included, as sentence-transformers truncates.
pub const MAX_TOKENS: usize = 256;

pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dim: usize,
    id: String,
}

impl MiniLm {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
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
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::ModelUnavailable(format!("tokenizer truncation: {e}")))?;
        let device = Device::Cpu;
        let vb =
            VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DType::F32, &device)
                .map_err(|e| EmbedError::ModelUnavailable(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| EmbedError::ModelUnavailable(format!("bert weights: {e}")))?;
        Ok(Self {
            model,
            tokenizer,
            device,
            dim: config.hidden_size,
            id: "all-MiniLM-L6-v2".to_string(),
        })
    }

    fn forward(&self, texts: &[&str]) -> candle_core::Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| candle_core::Error::Msg(format!("tokenize: {e}")))?;
        let rows = encodings.len();
        let cols = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(rows * cols);
        let mut types = Vec::with_capacity(rows * cols);
        let mut mask = Vec::with_capacity(rows * cols);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            types.extend_from_slice(e.get_type_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (rows, cols), &self.device)?;
        let types = Tensor::from_vec(types, (rows, cols), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, cols), &self.device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?; // (rows, cols, dim)
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (rows, cols, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (rows, dim)
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?; // (rows, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
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
        self.forward(texts)
            .map_err(|e| EmbedError::Failed(e.to_string()))
    }
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
}
