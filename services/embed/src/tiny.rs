//! A tiny BERT cross-encoder with seeded random weights, written to a folder in the layout of a
//! Hugging Face `BertForSequenceClassification` export (`config.json`, a WordPiece
//! `tokenizer.json`, `model.safetensors`), so tests here, in agentsearch-rerank and in the router
//! can load a [`crate::CrossEncoder`] without downloading a model. Its scores mean nothing; they
//! are only deterministic in the seed.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use agentsearch_common::splitmix::SplitMix64;
use serde_json::{Value, json};

/// Hidden units of the tiny model.
pub(crate) const HIDDEN: usize = 32;
/// Transformer blocks.
pub(crate) const LAYERS: usize = 2;
/// Attention heads (8 units each).
pub(crate) const HEADS: usize = 4;
/// Units of each block's feed-forward layer.
pub(crate) const INTERMEDIATE: usize = 64;
/// Positions, so pairs longer than 64 word pieces are truncated.
pub(crate) const POSITIONS: usize = 64;
/// BERT's layer-norm epsilon.
pub(crate) const EPS: f64 = 1e-12;

/// The WordPiece vocabulary, id = index: the five BERT specials, then a few words of the tests.
pub(crate) const VOCAB: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "to", "of", "and", "how", "do", "i",
    "my", "is", "refund", "payment", "invoice", "send", "message", "slack", "channel", "post",
    "order", "ship", "track", "cancel", "account", "password", "reset", "email", "search", "tool",
    "user", "file", "open", "list", "create", "##s", "##ed", "##ing", "?", ".", ",",
];

/// f32 tensors by name: shape and values (row-major).
pub(crate) type Weights = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

/// Writes a tiny random-weight cross-encoder (one label, 32 hidden units, 2 layers, 4 heads, 64
/// positions, a 44-piece WordPiece vocabulary) to `dir`, created if missing; the same `seed`
/// writes the same model. For tests only.
///
/// # Panics
///
/// When `dir` cannot be written.
#[doc(hidden)]
pub fn write_tiny_model(dir: &Path, seed: u64) {
    if let Err(e) = write_model(dir, 1, &weights(seed, 1)) {
        panic!("cannot write the tiny model to {}: {e}", dir.display());
    }
}

/// Writes `config.json` (with `labels` labels), `tokenizer.json` and `weights` as
/// `model.safetensors` (plus the int64 `position_ids` buffer older exports carry) to `dir`.
pub(crate) fn write_model(dir: &Path, labels: usize, weights: &Weights) -> io::Result<()> {
    let json = |value: &Value| serde_json::to_vec_pretty(value).map_err(io::Error::other);
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), json(&config(labels))?)?;
    std::fs::write(dir.join("tokenizer.json"), json(&tokenizer())?)?;
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = weights
        .iter()
        .map(|(name, (shape, values))| {
            let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.clone(), shape.clone(), data)
        })
        .collect();
    let positions: Vec<u8> = (0..POSITIONS as i64).flat_map(i64::to_le_bytes).collect();
    let mut views = Vec::with_capacity(bytes.len() + 1);
    for (name, shape, data) in &bytes {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                .map_err(io::Error::other)?;
        views.push((name.clone(), view));
    }
    let view = safetensors::tensor::TensorView::new(
        safetensors::Dtype::I64,
        vec![1, POSITIONS],
        &positions,
    )
    .map_err(io::Error::other)?;
    views.push(("bert.embeddings.position_ids".to_string(), view));
    let file = safetensors::serialize(views, None).map_err(io::Error::other)?;
    std::fs::write(dir.join("model.safetensors"), file)
}

/// A `config.json` as transformers writes it for a BERT sequence classifier.
fn config(labels: usize) -> Value {
    let id2label: BTreeMap<String, String> = (0..labels)
        .map(|i| (i.to_string(), format!("LABEL_{i}")))
        .collect();
    json!({
        "architectures": ["BertForSequenceClassification"],
        "model_type": "bert",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "hidden_act": "gelu",
        "layer_norm_eps": EPS,
        "max_position_embeddings": POSITIONS,
        "vocab_size": VOCAB.len(),
        "type_vocab_size": 2,
        "position_embedding_type": "absolute",
        "id2label": id2label,
    })
}

/// A BERT `tokenizer.json`: lower-casing normaliser, WordPiece over [`VOCAB`], and the
/// `[CLS] A [SEP] B [SEP]` template with segment ids 0 and 1.
fn tokenizer() -> Value {
    let vocab: BTreeMap<&str, usize> = VOCAB.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let added: Vec<Value> = VOCAB[..5]
        .iter()
        .enumerate()
        .map(|(id, content)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let special = |id: &str, type_id: u32| json!({"SpecialToken": {"id": id, "type_id": type_id}});
    let sequence = |id: &str, type_id: u32| json!({"Sequence": {"id": id, "type_id": type_id}});
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)],
            "pair": [special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0),
                     sequence("B", 1), special("[SEP]", 1)],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
            }
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

/// Uniform in `[-scale, scale)`.
fn uniform(rng: &mut SplitMix64, scale: f32) -> f32 {
    (2.0 * rng.unit() as f32 - 1.0) * scale
}

/// The tensors of a tiny `BertForSequenceClassification` with `labels` labels, their values
/// drawn from `seed`. Linear weights are scaled so activations stay near unit variance and the
/// scores spread out.
pub(crate) fn weights(seed: u64, labels: usize) -> Weights {
    let mut rng = SplitMix64(seed ^ 0x005e_ed0f_7e57);
    let mut out = Weights::new();
    let mut put = |name: String, shape: Vec<usize>, scale: f32, offset: f32| {
        let count = shape.iter().product();
        let values = (0..count)
            .map(|_| offset + uniform(&mut rng, scale))
            .collect();
        out.insert(name, (shape, values));
    };
    let linear = |inputs: usize| (3.0 / inputs as f32).sqrt();
    let (h, i) = (HIDDEN, INTERMEDIATE);
    put(
        "bert.embeddings.word_embeddings.weight".into(),
        vec![VOCAB.len(), h],
        1.0,
        0.0,
    );
    put(
        "bert.embeddings.position_embeddings.weight".into(),
        vec![POSITIONS, h],
        0.5,
        0.0,
    );
    put(
        "bert.embeddings.token_type_embeddings.weight".into(),
        vec![2, h],
        0.5,
        0.0,
    );
    let norm = |put: &mut dyn FnMut(String, Vec<usize>, f32, f32), prefix: &str| {
        put(format!("{prefix}.weight"), vec![h], 0.2, 1.0);
        put(format!("{prefix}.bias"), vec![h], 0.2, 0.0);
    };
    norm(&mut put, "bert.embeddings.LayerNorm");
    for l in 0..LAYERS {
        let p = format!("bert.encoder.layer.{l}");
        for part in ["query", "key", "value"] {
            put(
                format!("{p}.attention.self.{part}.weight"),
                vec![h, h],
                linear(h),
                0.0,
            );
            put(format!("{p}.attention.self.{part}.bias"), vec![h], 0.1, 0.0);
        }
        put(
            format!("{p}.attention.output.dense.weight"),
            vec![h, h],
            linear(h),
            0.0,
        );
        put(
            format!("{p}.attention.output.dense.bias"),
            vec![h],
            0.1,
            0.0,
        );
        norm(&mut put, &format!("{p}.attention.output.LayerNorm"));
        put(
            format!("{p}.intermediate.dense.weight"),
            vec![i, h],
            linear(h),
            0.0,
        );
        put(format!("{p}.intermediate.dense.bias"), vec![i], 0.1, 0.0);
        put(
            format!("{p}.output.dense.weight"),
            vec![h, i],
            linear(i),
            0.0,
        );
        put(format!("{p}.output.dense.bias"), vec![h], 0.1, 0.0);
        norm(&mut put, &format!("{p}.output.LayerNorm"));
    }
    put(
        "bert.pooler.dense.weight".into(),
        vec![h, h],
        linear(h),
        0.0,
    );
    put("bert.pooler.dense.bias".into(), vec![h], 0.1, 0.0);
    put(
        "classifier.weight".into(),
        vec![labels, h],
        2.0 * linear(h),
        0.0,
    );
    put("classifier.bias".into(), vec![labels], 0.1, 0.0);
    out
}
