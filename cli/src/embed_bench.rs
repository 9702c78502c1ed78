//! `agentsearch embed-bench`: the ingest-side cost of context search without the index write,
//! measured on a BEIR corpus: documents are segmented as records are, each passage's embedding
//! text is built as ingest builds it, and all of them are embedded in batches by the deployment's
//! model. Prints passages/s (text in) and writes the passages, so another embedder can be timed on
//! exactly the same texts (`load/peer/embed_compare.sh`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use agentsearch_common::config::Config;
use agentsearch_common::context::segment_embedding_text;
use agentsearch_common::segment::{SegmentParams, segment};
use agentsearch_eval::beir::Doc;
use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct EmbedBenchArgs {
    /// Folder with a BEIR `corpus.jsonl`.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Passages to embed (documents are taken in file order until there are this many).
    #[arg(long, default_value_t = 10_000)]
    pub passages: usize,
    /// Write the embedded texts here, one JSON string per line.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: EmbedBenchArgs, config: Config) -> anyhow::Result<()> {
    let path = args.dataset.join("corpus.jsonl");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Doc> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing {}", path.display()))?;
    let embedder = crate::node::load_embedder(&config)?;
    let params = SegmentParams::from(&config.context);

    let started = Instant::now();
    let mut texts: Vec<String> = Vec::new();
    let mut input_bytes = 0usize;
    for doc in &docs {
        if texts.len() >= args.passages {
            break;
        }
        input_bytes += doc.title.len() + doc.text.len();
        let title = (!doc.title.trim().is_empty()).then_some(doc.title.as_str());
        for passage in segment(&doc.text, params) {
            texts.push(segment_embedding_text(title, &passage));
        }
    }
    texts.truncate(args.passages);
    let segmented = started.elapsed();
    let vectors = agentsearch_embed::embed_batched(
        embedder.as_ref(),
        &texts,
        config.embed.batch_size,
        |done| eprint!("\rembedded {done} / {}", texts.len()),
    )?;
    eprintln!();
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(vectors.len() == texts.len(), "one vector per passage");
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    println!(
        "{}",
        serde_json::json!({
            "embedder": "agentsearch (own CPU kernels, all-MiniLM-L6-v2)",
            "passages": texts.len(),
            "words": words,
            "inputBytes": input_bytes,
            "batchSize": config.embed.batch_size,
            "segmentMs": segmented.as_secs_f64() * 1e3,
            "secs": secs,
            "passagesPerSec": texts.len() as f64 / secs,
        })
    );
    if let Some(out) = &args.out {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?,
        );
        for t in &texts {
            writeln!(file, "{}", serde_json::to_string(t)?)?;
        }
        file.flush()?;
    }
    Ok(())
}
