//! A BERT encoder of the shape all-MiniLM-L6-v2 has (absolute positions, post-layer-norm blocks,
//! GELU), run on [`crate::kernels`] with its weights packed once at load.
//!
//! The texts of one pass are not padded to a common length: their word pieces are laid end to end
//! as the rows of one matrix, so every linear layer is one product over all of them, and attention
//! runs per text over exactly its own rows (no mask, no work on padding).

use std::ops::Range;

use agentsearch_common::simd::{self, Build};
use serde::Deserialize;

use crate::kernels::{self, Linear, Mad};
use crate::{EmbedError, Result};

/// The fields of a Hugging Face `config.json` the encoder reads.
#[derive(Debug, Deserialize)]
pub(crate) struct Config {
    pub hidden_size: usize,
    pub max_position_embeddings: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    layer_norm_eps: f64,
    vocab_size: usize,
    type_vocab_size: usize,
    hidden_act: String,
    #[serde(default)]
    position_embedding_type: Option<String>,
}

struct Layer {
    /// Query, key and value projections as one layer of `3 x hidden` outputs.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: (Vec<f32>, Vec<f32>),
    up: Linear,
    down: Linear,
    output_norm: (Vec<f32>, Vec<f32>),
}

pub(crate) struct Bert {
    hidden: usize,
    heads: usize,
    eps: f32,
    vocab: usize,
    types: usize,
    positions: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
    /// The build of the kernels the layers were packed for, and that runs them.
    build: Build,
}

/// How the linear layers' weights are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weights {
    /// As the model file has them.
    F32,
    /// In half precision where the CPU converts it to f32 by instruction (every build but the
    /// portable one, on a CPU with F16C), else f32: half the bytes to read per pass, for a model
    /// whose passes are mostly short inputs (query embedding) and whose outputs tolerate it
    /// (checked against PyTorch's vectors). Products and sums stay f32.
    HalfWhereConverted,
}

/// How the rows of one text's last hidden state become its output vector.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pooling {
    /// Their mean, L2-normalised (sentence embeddings).
    Mean,
    /// The first row as it is (`[CLS]`, for a pooler and a classifier head).
    First,
}

/// One text's word pieces and segment ids.
pub(crate) struct Pieces {
    pub ids: Vec<u32>,
    pub types: Vec<u32>,
}

fn unavailable(message: String) -> EmbedError {
    EmbedError::ModelUnavailable(message)
}

/// Reads the named f32 tensor of `shape` (with or without a `bert.` prefix).
pub(crate) fn tensor(
    weights: &safetensors::SafeTensors<'_>,
    name: &str,
    shape: &[usize],
) -> Result<Vec<f32>> {
    let view = weights
        .tensor(name)
        .or_else(|_| weights.tensor(&format!("bert.{name}")))
        .map_err(|_| unavailable(format!("model.safetensors has no tensor {name}")))?;
    if view.dtype() != safetensors::Dtype::F32 {
        return Err(unavailable(format!(
            "{name} is {:?}, not F32",
            view.dtype()
        )));
    }
    if view.shape() != shape {
        return Err(unavailable(format!(
            "{name} has shape {:?}, the config says {shape:?}",
            view.shape()
        )));
    }
    Ok(view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

impl Bert {
    /// Loads the encoder for the process's build of the kernels, weights in f32.
    pub(crate) fn load(config: &Config, safetensors: &[u8]) -> Result<Self> {
        Self::load_for(config, safetensors, simd::build(), Weights::F32)
    }

    /// Loads the encoder for `build` (the portable one where this CPU cannot run it), the linear
    /// layers' weights kept as `weights` says.
    pub(crate) fn load_for(
        config: &Config,
        safetensors: &[u8],
        build: Build,
        weights: Weights,
    ) -> Result<Self> {
        let build = if build.supported() {
            build
        } else {
            Build::Portable
        };
        let half = weights == Weights::HalfWhereConverted
            && build != Build::Portable
            && simd::half_conversion();
        let pack = |w: &[f32], b: &[f32], outputs: usize, inputs: usize| {
            if half {
                Linear::half(w, b, outputs, inputs)
            } else {
                Linear::new(w, b, outputs, inputs)
            }
        };
        if config.hidden_act != "gelu" {
            return Err(unavailable(format!(
                "hidden_act {:?} is not supported (only \"gelu\")",
                config.hidden_act
            )));
        }
        if config
            .position_embedding_type
            .as_deref()
            .is_some_and(|t| t != "absolute")
        {
            return Err(unavailable(
                "only absolute position embeddings are supported".into(),
            ));
        }
        let (h, i) = (config.hidden_size, config.intermediate_size);
        if config.num_attention_heads == 0 || h % config.num_attention_heads != 0 {
            return Err(unavailable(format!(
                "hidden_size {h} is not a multiple of num_attention_heads {}",
                config.num_attention_heads
            )));
        }
        let weights = safetensors::SafeTensors::deserialize(safetensors)
            .map_err(|e| unavailable(format!("model.safetensors: {e}")))?;
        let t = |name: &str, shape: &[usize]| tensor(&weights, name, shape);
        let norm = |prefix: &str| -> Result<(Vec<f32>, Vec<f32>)> {
            Ok((
                t(&format!("{prefix}.weight"), &[h])?,
                t(&format!("{prefix}.bias"), &[h])?,
            ))
        };
        let linear = |prefix: &str, outputs: usize, inputs: usize| -> Result<Linear> {
            let w = t(&format!("{prefix}.weight"), &[outputs, inputs])?;
            let b = t(&format!("{prefix}.bias"), &[outputs])?;
            Ok(pack(&w, &b, outputs, inputs))
        };
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let mut w = Vec::with_capacity(3 * h * h);
            let mut b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                w.extend(t(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                b.extend(t(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: pack(&w, &b, 3 * h, h),
                attention_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&format!("{p}.intermediate.dense"), i, h)?,
                down: linear(&format!("{p}.output.dense"), h, i)?,
                output_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Self {
            hidden: h,
            heads: config.num_attention_heads,
            eps: config.layer_norm_eps as f32,
            vocab: config.vocab_size,
            types: config.type_vocab_size,
            positions: config.max_position_embeddings,
            word: t("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            position: t(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: t(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, h],
            )?,
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
            build,
        })
    }

    /// Checks that every id indexes the model's tables.
    pub(crate) fn check(&self, pieces: &Pieces) -> Result<()> {
        if pieces.ids.len() > self.positions {
            return Err(EmbedError::Failed(format!(
                "{} word pieces, the model has {} positions",
                pieces.ids.len(),
                self.positions
            )));
        }
        if let Some(id) = pieces.ids.iter().find(|&&id| id as usize >= self.vocab) {
            return Err(EmbedError::Failed(format!(
                "token id {id} is outside the vocabulary"
            )));
        }
        if let Some(t) = pieces.types.iter().find(|&&t| t as usize >= self.types) {
            return Err(EmbedError::Failed(format!(
                "segment id {t} is outside the model's"
            )));
        }
        Ok(())
    }

    /// Mean-pooled, L2-normalised embeddings of `texts`, in order. Ids must have passed
    /// [`Bert::check`].
    pub(crate) fn embed(&self, texts: &[&Pieces]) -> Vec<Vec<f32>> {
        self.run(texts, Pooling::Mean)
    }

    /// The last hidden state of each text's first word piece (`[CLS]`), in order, as the pooler
    /// of a sequence classifier reads it. Ids must have passed [`Bert::check`].
    pub(crate) fn first_rows(&self, texts: &[&Pieces]) -> Vec<Vec<f32>> {
        self.run(texts, Pooling::First)
    }

    fn run(&self, texts: &[&Pieces], pooling: Pooling) -> Vec<Vec<f32>> {
        #[cfg(target_arch = "x86_64")]
        match self.build {
            #[allow(unsafe_code)]
            // SAFETY: `load_for` keeps a build only where the CPU runs it: `Avx512` means AVX-512F,
            // AVX and FMA, the only features `run_avx512` is compiled with.
            Build::Avx512 => unsafe { self.run_avx512(texts, pooling) },
            #[allow(unsafe_code)]
            // SAFETY: likewise, `Fma256` means AVX and FMA, the only features `run_fma` is
            // compiled with.
            Build::Fma256 => unsafe { self.run_fma(texts, pooling) },
            Build::Portable => self.forward::<kernels::Plain>(texts, pooling),
        }
        #[cfg(target_arch = "aarch64")]
        return self.forward::<kernels::Fused>(texts, pooling);
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        self.forward::<kernels::Plain>(texts, pooling)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx,fma")]
    fn run_avx512(&self, texts: &[&Pieces], pooling: Pooling) -> Vec<Vec<f32>> {
        self.forward::<kernels::Wide>(texts, pooling)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,fma")]
    fn run_fma(&self, texts: &[&Pieces], pooling: Pooling) -> Vec<Vec<f32>> {
        self.forward::<kernels::Fused>(texts, pooling)
    }

    #[inline(always)]
    fn forward<M: Mad>(&self, texts: &[&Pieces], pooling: Pooling) -> Vec<Vec<f32>> {
        let h = self.hidden;
        let mut spans: Vec<Range<usize>> = Vec::with_capacity(texts.len());
        let mut rows = 0;
        for p in texts {
            spans.push(rows..rows + p.ids.len());
            rows += p.ids.len();
        }

        let mut x = vec![0.0f32; rows * h];
        for (p, span) in texts.iter().zip(&spans) {
            for (pos, (&id, &ty)) in p.ids.iter().zip(&p.types).enumerate() {
                let row = &mut x[(span.start + pos) * h..(span.start + pos + 1) * h];
                let (id, ty) = (id as usize, ty as usize);
                let word = &self.word[id * h..(id + 1) * h];
                let position = &self.position[pos * h..(pos + 1) * h];
                let segment = &self.token_type[ty * h..(ty + 1) * h];
                for (((v, a), b), c) in row.iter_mut().zip(word).zip(position).zip(segment) {
                    *v = a + b + c;
                }
                let (g, b) = &self.embedding_norm;
                kernels::layer_norm_row::<M>(row, g, b, self.eps);
            }
        }

        let intermediate = self.layers.first().map_or(0, |l| l.up.outputs());
        let mut qkv = vec![0.0f32; rows * 3 * h];
        let mut context = vec![0.0f32; rows * h];
        let mut attended = vec![0.0f32; rows * h];
        let mut up = vec![0.0f32; rows * intermediate];
        let mut scratch = kernels::AttentionScratch::default();
        for layer in &self.layers {
            debug_assert_eq!(layer.qkv.inputs(), h);
            kernels::linear::<M>(&layer.qkv, &x, &mut qkv);
            for span in &spans {
                kernels::attention::<M>(
                    &qkv[span.start * 3 * h..span.end * 3 * h],
                    h,
                    self.heads,
                    &mut context[span.start * h..span.end * h],
                    &mut scratch,
                );
            }
            kernels::linear::<M>(&layer.attention_out, &context, &mut attended);
            let (g, b) = &layer.attention_norm;
            kernels::add_layer_norm::<M>(&mut attended, &x, g, b, self.eps);
            kernels::linear::<M>(&layer.up, &attended, &mut up);
            kernels::gelu::<M>(&mut up);
            kernels::linear::<M>(&layer.down, &up, &mut x);
            let (g, b) = &layer.output_norm;
            kernels::add_layer_norm::<M>(&mut x, &attended, g, b, self.eps);
        }

        if pooling == Pooling::First {
            return spans
                .iter()
                .map(|span| {
                    if span.is_empty() {
                        vec![0.0; h]
                    } else {
                        x[span.start * h..(span.start + 1) * h].to_vec()
                    }
                })
                .collect();
        }
        spans
            .iter()
            .map(|span| {
                let mut mean = vec![0.0f32; h];
                for row in x[span.start * h..span.end * h].chunks_exact(h) {
                    for (m, v) in mean.iter_mut().zip(row) {
                        *m += v;
                    }
                }
                let count = span.len().max(1) as f32;
                let norm = (mean.iter().map(|v| (v / count) * (v / count)).sum::<f32>())
                    .sqrt()
                    .max(1e-12);
                mean.iter().map(|v| v / count / norm).collect()
            })
            .collect()
    }
}
