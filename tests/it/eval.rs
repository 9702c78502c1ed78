//! `agentsearch eval` on a tiny BEIR fixture through the real search path: the lexical figures are
//! checked exactly against values computed by hand.

use agentsearch::eval::{EvalArgs, run};
use agentsearch_common::config::Config;
use agentsearch_tests::model_dir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_table_on_a_tiny_dataset() {
    eval_tiny("tools").await;
}

/// The same corpus as passages (records of one sync, searched with context search): one passage
/// per document, title and text in BM25F, so the lexical rankings and figures are the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_table_on_a_tiny_dataset_as_passages() {
    eval_tiny("passages").await;
}

/// Runs `eval --embedded` on `dataset` and returns its JSON report.
async fn eval_report(
    dataset: std::path::PathBuf,
    kind: &str,
    modes: &[&str],
    max_queries: Option<usize>,
) -> serde_json::Value {
    eval_degraded(dataset, kind, modes, max_queries, None).await
}

async fn eval_degraded(
    dataset: std::path::PathBuf,
    kind: &str,
    modes: &[&str],
    max_queries: Option<usize>,
    degrade: Option<&str>,
) -> serde_json::Value {
    eval_with(dataset, kind, modes, max_queries, degrade, false).await
}

async fn eval_with(
    dataset: std::path::PathBuf,
    kind: &str,
    modes: &[&str],
    max_queries: Option<usize>,
    degrade: Option<&str>,
    feedback_half: bool,
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("eval.json");
    let args = EvalArgs {
        dataset,
        split: "test".into(),
        kind: kind.into(),
        modes: modes.iter().map(|m| m.to_string()).collect(),
        server: String::new(),
        embedded: true,
        max_queries,
        dump: None,
        out: Some(out.clone()),
        token: None,
        project: None,
        degrade: degrade.map(|d| d.parse().unwrap()),
        feedback_half,
    };
    let mut config = Config::default();
    config.embed.model_dir = model_dir();
    run(args, config).await.unwrap();
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

async fn eval_tiny(kind: &str) {
    let dataset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/beir-tiny");
    let report = eval_report(dataset, kind, &["lexical", "dense", "hybrid"], None).await;
    assert_eq!(report["dataset"], "beir-tiny");
    assert_eq!(report["split"], "test");
    assert_eq!(report["queries"], 4, "q5 has no judgments in the split");

    // Lexical rankings: q1 "zorblax" -> [t1]; q2 "quasar" -> [t5] (t4 is also relevant, never
    // retrieved); q3 "polish" -> [t2] (t3 relevant); q4 "widget" -> [t2, t3] (t2's description is
    // shorter), t3 relevant.
    let d = |rank: f64| 1.0 / (rank + 1.0).log2();
    let ndcg = [1.0, d(1.0) / (d(1.0) + d(2.0)), 0.0, d(2.0)];
    let expected = [
        ("ndcg@10", ndcg.iter().sum::<f64>() / 4.0),
        ("recall@1", (1.0 + 0.5 + 0.0 + 0.0) / 4.0),
        ("recall@5", (1.0 + 0.5 + 0.0 + 1.0) / 4.0),
        ("recall@10", (1.0 + 0.5 + 0.0 + 1.0) / 4.0),
        ("mrr@10", (1.0 + 1.0 + 0.0 + 0.5) / 4.0),
    ];
    let lexical = &report["modes"]["lexical"];
    for (metric, value) in expected {
        let got = lexical[metric].as_f64().unwrap();
        assert!(
            (got - value).abs() < 1e-12,
            "lexical {metric}: {got} vs {value}"
        );
    }
    for mode in ["dense", "hybrid"] {
        for metric in ["ndcg@10", "recall@1", "recall@5", "recall@10", "mrr@10"] {
            let v = report["modes"][mode][metric].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{mode} {metric} = {v}");
        }
        // Every relevant tool is among the five candidates, so recall@10 is 1 when all five return.
        assert_eq!(
            report["modes"][mode]["recall@10"].as_f64().unwrap(),
            1.0,
            "{mode}"
        );
        assert!(report["modes"][mode]["qps"].as_f64().unwrap() > 0.0);
    }
}

/// `--degrade`: the queries go out with the vector computed by `eval` (`queryEmbedding`), which at
/// level 0 ranks exactly as the service's own; a degraded retriever loses, the other one does not
/// move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn degrading_one_retriever_leaves_the_other_alone() {
    let dataset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/beir-tiny");
    let modes = ["lexical", "dense", "hybrid"];
    let plain = eval_degraded(dataset.clone(), "tools", &modes, None, None).await;
    let figure =
        |report: &serde_json::Value, mode: &str| report["modes"][mode]["ndcg@10"].as_f64().unwrap();
    let dense_zero = eval_degraded(dataset.clone(), "tools", &modes, None, Some("dense=0")).await;
    assert_eq!(dense_zero["degrade"], "dense=0");
    for mode in modes {
        assert!(
            (figure(&plain, mode) - figure(&dense_zero, mode)).abs() < 1e-9,
            "{mode}: {plain} vs {dense_zero}"
        );
    }
    // Every query is one word: at level 1 each is replaced by a random corpus word.
    let lexical = eval_degraded(dataset.clone(), "tools", &modes, None, Some("lexical=1")).await;
    assert!(
        figure(&lexical, "lexical") < figure(&plain, "lexical"),
        "{lexical}"
    );
    assert!((figure(&lexical, "dense") - figure(&plain, "dense")).abs() < 1e-9);
    // Dense by word replacement (the text the model reads) and by rotation (the vector).
    for degrade in ["dense=1", "dense-rotate=1"] {
        let dense = eval_degraded(dataset.clone(), "tools", &modes, None, Some(degrade)).await;
        assert_eq!(dense["degrade"], degrade);
        assert!((figure(&dense, "lexical") - figure(&plain, "lexical")).abs() < 1e-9);
        assert_ne!(figure(&dense, "dense"), figure(&plain, "dense"), "{dense}");
    }
}

/// `--feedback-half`: one half of the queries is scored, the other half's searches get their
/// judged tools as feedback, and once the project's model has been refit the first half is
/// scored again (four judged queries: too few to learn from, so the ranking must not move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_half_scores_the_held_out_half_before_and_after() {
    let dataset = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/beir-tiny");
    let report = eval_with(dataset, "tools", &["hybrid"], None, None, true).await;
    assert_eq!(report["feedbackHalf"], true);
    let held = report["queries"].as_u64().unwrap();
    assert!((1..4).contains(&held), "{report}");
    let figure = |mode: &str| report["modes"][mode]["ndcg@10"].as_f64().unwrap();
    assert_eq!(figure("hybrid"), figure("hybrid+feedback"), "{report}");
}

/// The shared evaluation sets beside the checkout (`../shared/data/eval`), or
/// `AGENTSEARCH_EVAL_DATA`.
fn shared_eval_dir() -> std::path::PathBuf {
    std::env::var_os("AGENTSEARCH_EVAL_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/eval")
        })
}

/// Every shared set becomes a catalog the router accepts: each tool `eval` builds from a corpus
/// passes the same conversion and validation as a `catalog load` (MetaTool has an app named
/// `local`, once a reserved integration).
#[test]
fn every_shared_eval_corpus_is_a_valid_catalog() {
    let root = shared_eval_dir();
    for (name, split) in [
        ("bfcl", "test"),
        ("metatool", "test"),
        ("scifact", "train"),
        ("toollens", "test"),
    ] {
        let dataset = agentsearch_eval::beir::Dataset::load(&root.join(name), split)
            .unwrap_or_else(|e| panic!("{name} at {}: {e}", root.display()));
        let (tools, _) = agentsearch::eval::catalog(&dataset.corpus);
        assert_eq!(tools.len(), dataset.corpus.len(), "{name}");
        let mut problems = Vec::new();
        for (i, tool) in tools.into_iter().enumerate() {
            let integration = tool.integration.clone();
            match agentsearch_router::tools::grpc::definition_from_proto(i, tool) {
                Ok(def) => {
                    if let Err(v) = def.validate(&format!("tools[{i}]")) {
                        problems.push(format!("{integration}: {v:?}"));
                    }
                }
                Err(v) => problems.push(format!("{integration}: {v:?}")),
            }
        }
        assert!(problems.is_empty(), "{name}: {problems:?}");
    }
}

/// MetaTool, whose catalog has an integration named `local`, ingests and scores end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metatool_ingests_and_scores() {
    let dataset = shared_eval_dir().join("metatool");
    let report = eval_report(dataset, "tools", &["lexical", "hybrid"], Some(40)).await;
    assert_eq!(report["queries"], 40);
    for mode in ["lexical", "hybrid"] {
        let ndcg = report["modes"][mode]["ndcg@10"].as_f64().unwrap();
        // EVALUATION.md has 0.7-0.8 on the whole split; far below means the catalog was cut.
        assert!(ndcg > 0.3, "{mode} nDCG@10 = {ndcg}");
    }
}
