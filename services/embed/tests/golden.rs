//! Golden vectors: [`MiniLm`] reproduces the reference implementation of all-MiniLM-L6-v2
//! (PyTorch sentence-transformers on the same weights) for a short text, a text longer than 256
//! word pieces, non-ASCII text and empty-ish texts, alone and in one padded batch. A pooling,
//! normalisation or tokenizer regression (CLS pooling, no L2 norm, another truncation) fails it.
//!
//! `golden.json` holds the texts and the reference vectors; `golden.py` beside it regenerates it
//! (see its docstring). This test needs the model weights, not Python.

use std::path::{Path, PathBuf};

use agentsearch_embed::{Embedder, MiniLm};
use serde_json::Value;

const GOLDEN: &str = include_str!("golden.json");

/// How close a model's vectors must be to the reference.
struct Bounds {
    /// Largest difference allowed in any component and in the norm.
    component: f32,
    min_cosine: f32,
}

/// Weights in f32: PyTorch's arithmetic up to the order of the sums.
const F32_WEIGHTS: Bounds = Bounds {
    component: 1e-4,
    min_cosine: 0.9999,
};
/// The default load, whose vector builds keep the linear layers' weights in half precision (where
/// the CPU has F16C): the direction of every vector within 1e-5 of cosine of the reference
/// (measured: about 1e-6), a component within 2e-4 (measured: at most 1.5e-4 of components
/// around 0.05).
const DEFAULT_LOAD: Bounds = Bounds {
    component: 2e-4,
    min_cosine: 0.99999,
};
/// Components shown when a vector differs.
const SHOWN: usize = 8;

fn model_dir() -> PathBuf {
    std::env::var_os("AGENTSEARCH_EMBED__MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2")
        })
}

struct Golden {
    name: String,
    text: String,
    pieces: u64,
    norm: f32,
    vector: Vec<f32>,
}

fn golden() -> Vec<Golden> {
    let file: Value = serde_json::from_str(GOLDEN).unwrap();
    assert_eq!(file["maxSeqLength"], 256);
    file["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Golden {
            name: t["name"].as_str().unwrap().to_string(),
            text: t["text"].as_str().unwrap().to_string(),
            pieces: t["pieces"].as_u64().unwrap(),
            norm: t["norm"].as_f64().unwrap() as f32,
            vector: t["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (norm(a) * norm(b))
}

fn assert_matches(got: &[f32], want: &Golden, how: &str, bounds: &Bounds) {
    let what = format!("{} ({how})", want.name);
    assert_eq!(got.len(), want.vector.len(), "{what}: dimensions");
    assert!(
        (norm(got) - want.norm).abs() <= bounds.component,
        "{what}: norm {} instead of {}",
        norm(got),
        want.norm
    );
    let cos = cosine(got, &want.vector);
    assert!(
        cos >= bounds.min_cosine,
        "{what}: cosine {cos} with the reference; first components {:?} instead of {:?}",
        &got[..SHOWN],
        &want.vector[..SHOWN]
    );
    for (i, (g, w)) in got.iter().zip(&want.vector).enumerate() {
        assert!(
            (g - w).abs() <= bounds.component,
            "{what}: component {i} is {g} instead of {w}"
        );
    }
}

#[test]
fn minilm_matches_the_reference_vectors() {
    let golden = golden();
    let names: Vec<&str> = golden.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        ["short", "long", "non_ascii", "empty", "punctuation"]
    );
    let long = &golden[1];
    assert!(
        long.pieces > 300,
        "the long text must exceed the 256 word pieces a text is cut to: {}",
        long.pieces
    );
    assert!(!golden[2].text.is_ascii());

    let dir = model_dir();
    let missing = "model weights missing: run scripts/fetch-model.sh";
    for (model, bounds, how) in [
        (
            MiniLm::load_f32(&dir).expect(missing),
            &F32_WEIGHTS,
            "f32 weights",
        ),
        (
            MiniLm::load(&dir).expect(missing),
            &DEFAULT_LOAD,
            "default load",
        ),
    ] {
        assert_eq!(model.dim(), 384);
        for g in &golden {
            let got = model.embed(&[g.text.as_str()]).unwrap().remove(0);
            assert_matches(&got, g, &format!("{how}, alone"), bounds);
        }
        // One batch: shorter texts are padded to the longest, which must not change them.
        let texts: Vec<&str> = golden.iter().map(|g| g.text.as_str()).collect();
        let batch = model.embed(&texts).unwrap();
        assert_eq!(batch.len(), golden.len());
        for (got, g) in batch.iter().zip(&golden) {
            assert_matches(got, g, &format!("{how}, in a batch"), bounds);
        }
    }
}
