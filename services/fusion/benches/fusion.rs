//! The router's per-query fusion work: merging 3 shards' lists per retriever, RRF of two 50-item
//! lists, packing 100 candidates under a budget, and the coverage adaptive fusion measures (the
//! query analyzed, then three candidates of each list read).

use agentsearch_common::shard::Hit;
use agentsearch_common::tool::{SideEffect, ToolRecord};
use agentsearch_fusion::{
    QueryTerms, RankedList, merge_ranked, pack, reciprocal_rank_fusion, tool_coverage,
};
use criterion::{Criterion, criterion_group, criterion_main};

fn lists(offset: usize) -> Vec<Vec<Hit>> {
    (0..3)
        .map(|shard| {
            (0..50)
                .map(|i| Hit {
                    name: format!("TOOL_{}", (i * 7 + shard * 13 + offset) % 400),
                    integration: format!("app{shard}"),
                    score: 100.0 - i as f32 - shard as f32 * 0.1,
                })
                .collect()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let lexical = lists(0);
    let dense = lists(5);
    c.bench_function("merge_3x50", |b| {
        b.iter(|| merge_ranked(lexical.clone(), 50))
    });
    let l = merge_ranked(lexical.clone(), 50);
    let d = merge_ranked(dense.clone(), 50);
    let lk: Vec<&str> = l.iter().map(|h| h.name.as_str()).collect();
    let dk: Vec<&str> = d.iter().map(|h| h.name.as_str()).collect();
    c.bench_function("rrf_2x50", |b| {
        b.iter(|| {
            reciprocal_rank_fusion(
                &[
                    RankedList {
                        weight: 1.0,
                        keys: &lk[..],
                    },
                    RankedList {
                        weight: 1.0,
                        keys: &dk[..],
                    },
                ],
                60.0,
            )
        })
    });
    let tokens: Vec<u32> = (0..100).map(|i| 80 + (i * 37) % 900).collect();
    c.bench_function("pack_100_budget", |b| {
        b.iter(|| pack(&tokens, 50, Some(4000)))
    });
    // Six tools as the router reads them (three per list): name words, description, and the
    // parameters (the schema parsed) when those leave query terms missing.
    let tools: Vec<ToolRecord> = (0..6)
        .map(|i| ToolRecord {
            name: format!("GMAIL_SEND_EMAIL_{i}"),
            integration: "gmail".into(),
            category: "email".into(),
            side_effect: SideEffect::Send,
            description: "Sends an email message to one or more recipients, with optional CC, \
                          BCC, attachments and a reply-to address; the body may be plain text \
                          or HTML."
                .into(),
            parameters: r#"{"type":"object","properties":{
                "recipient_email":{"type":"string","description":"The address the message is sent to."},
                "subject":{"type":"string","description":"Subject line of the email."},
                "body":{"type":"string","description":"Content of the message, text or HTML."},
                "cc":{"type":"array","items":{"type":"string"},"description":"Addresses copied."},
                "attachments":{"type":"array","items":{"type":"string"},"description":"Files to attach, by id."}
            },"required":["recipient_email","body"]}"#
                .into(),
            tokens: 120,
        })
        .collect();
    c.bench_function("coverage_query_and_2x3_tools", |b| {
        b.iter(|| {
            let terms = QueryTerms::new("send a weekly status email to the whole team");
            let best = |tools: &[ToolRecord]| {
                tools
                    .iter()
                    .map(|t| tool_coverage(&terms, t))
                    .fold(0.0, f64::max)
            };
            [best(&tools[..3]), best(&tools[3..])]
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
