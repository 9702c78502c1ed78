//! Embedding latency: one short query (the router's per-query cost on a cache miss) and a batch of
//! 32 tool descriptions (ingest). Needs the model: `scripts/fetch-model.sh`.

use std::path::Path;

use agentsearch_embed::{Embedder, MiniLm};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2");
    let model = MiniLm::load(&dir).expect("model weights: run scripts/fetch-model.sh");
    // Three word pieces: what a query costs beyond one pass over the weights.
    c.bench_function("embed_query_1_word", |b| {
        b.iter(|| model.embed(&["slack"]).unwrap())
    });
    c.bench_function("embed_query_8_words", |b| {
        b.iter(|| {
            model
                .embed(&["post a message to a slack channel now"])
                .unwrap()
        })
    });
    // The same queries with every weight in f32 (what the vector builds otherwise read in half
    // precision), measured alternately with the default in one run.
    let full = MiniLm::load_f32(&dir).expect("model weights");
    let mut group = c.benchmark_group("weights");
    for (name, m) in [
        ("half", &model),
        ("f32", &full),
        ("half_again", &model),
        ("f32_again", &full),
    ] {
        group.bench_function(format!("embed_query_8_words_{name}"), |b| {
            b.iter(|| m.embed(&["post a message to a slack channel now"]).unwrap())
        });
    }
    group.finish();
    let docs: Vec<String> = (0..32)
        .map(|i| format!("tool {i}: Creates a record in the CRM with the given fields, owner and pipeline stage."))
        .collect();
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("ingest");
    group.sample_size(10);
    group.bench_function("embed_batch_32_descriptions", |b| {
        b.iter(|| model.embed(&refs).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
