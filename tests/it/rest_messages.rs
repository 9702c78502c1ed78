//! What REST errors echo and say: bounded pieces of what the caller sent (a huge unknown key
//! costs a small error naming it once), and messages that say what was wrong with a number or an
//! identity (snapshots of each envelope).

use agentsearch_router::RestAccess;
use agentsearch_router::auth::Auth;

use crate::rest_guard::{CONTEXT, JSON, TOOLS, USERS, request, start};

/// How many times `needle` occurs in `haystack`.
fn occurrences(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_unknown_keys_get_small_errors() {
    let rest = start(Auth::default(), RestAccess::default()).await;
    let sync = "11111111-1111-4111-8111-111111111111";
    let key = |len: usize| "k".repeat(len);
    let truncated = format!("{}…", "k".repeat(64));
    let cases: Vec<(&str, String, String)> = vec![
        (
            "PUT",
            TOOLS.to_string(),
            format!(r#"{{"tools": [], "{}": 1}}"#, key(5_000_000)),
        ),
        (
            "PUT",
            TOOLS.to_string(),
            format!(
                r#"{{"tools": [{{"name": "A_B", "integration": "a", "{}": 1}}]}}"#,
                key(5_000_000)
            ),
        ),
        (
            "PUT",
            format!("{CONTEXT}/syncs/{sync}/records"),
            format!(r#"{{"records": [], "{}": 1}}"#, key(5_000_000)),
        ),
        (
            "PUT",
            format!("{CONTEXT}/syncs/{sync}/groups"),
            format!(r#"{{"groups": [{{"id": "g", "{}": 1}}]}}"#, key(5_000_000)),
        ),
        (
            "POST",
            format!("{TOOLS}/search:batch"),
            format!(r#"{{"queries": [{{"{}": "x"}}]}}"#, key(3_000_000)),
        ),
        (
            "POST",
            format!("{TOOLS}/search"),
            format!(r#"{{"query": "x", "{}": 1}}"#, key(200_000)),
        ),
        (
            "POST",
            format!("{CONTEXT}/search"),
            format!(r#"{{"query": "x", "{}": 1}}"#, key(200_000)),
        ),
        (
            "PUT",
            format!("{USERS}/u1/connections"),
            format!(r#"{{"connections": [], "{}": 1}}"#, key(500_000)),
        ),
    ];
    for (method, path, body) in cases {
        let reply = request(rest.addr, method, &path, &[JSON], &body).await;
        assert_eq!(
            reply.status,
            400,
            "{path}: {}",
            &reply.body[..reply.body.len().min(300)]
        );
        assert!(
            reply.body.len() < 1024,
            "{path}: {} bytes",
            reply.body.len()
        );
        assert_eq!(
            occurrences(&reply.body, &truncated),
            1,
            "{path}: {}",
            reply.body
        );
        assert_eq!(occurrences(&reply.body, &key(65)), 0, "{path}");
    }
    // Long values quoted in messages are cut too.
    let long = "v".repeat(100_000);
    let reply = request(
        rest.addr,
        "PUT",
        TOOLS,
        &[JSON],
        &format!(r#"{{"tools": [{{"name": "A_B", "integration": "a", "sideEffect": "{long}"}}]}}"#),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.len() < 1024, "{} bytes", reply.body.len());
    let reply = request(
        rest.addr,
        "PUT",
        TOOLS,
        &[JSON],
        &format!(r#"{{"tools": [{{"name": "A_B", "integration": "{long}"}}]}}"#),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.len() < 1024, "{} bytes", reply.body.len());
    let kit = "t".repeat(3_000_000);
    let reply = request(
        rest.addr,
        "POST",
        &format!("{TOOLS}/search:batch"),
        &[JSON],
        &format!(
            r#"{{"queries": [{{"useCase": "x"}}], "customToolkits": [{{"slug": "{kit}", "name": "T",
                "description": "d", "tools": [{{"slug": "a", "name": "A", "description": "d",
                "inputSchema": {{"type": "object", "properties": {{}}}}}}]}}]}}"#
        ),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.len() < 2048, "{} bytes", reply.body.len());
    let reply = request(
        rest.addr,
        "DELETE",
        &format!("{USERS}/u1/connections/slack/{}", "a".repeat(10_000)),
        &[],
        "",
    )
    .await;
    assert_eq!(reply.status, 404);
    assert!(reply.body.len() < 1024, "{} bytes", reply.body.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_messages_say_what_was_sent() {
    let rest = start(Auth::default(), RestAccess::default()).await;
    let search = format!("{TOOLS}/search");
    let context = format!("{CONTEXT}/search");
    let sync = "11111111-1111-4111-8111-111111111111";
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "top_k_23_digits",
            "POST",
            search.clone(),
            r#"{"query": "x", "topK": 12345678901234567890123}"#,
        ),
        (
            "top_k_u64_max",
            "POST",
            search.clone(),
            r#"{"query": "x", "topK": 18446744073709551615}"#,
        ),
        (
            "max_tool_tokens_negative_23_digits",
            "POST",
            search.clone(),
            r#"{"query": "x", "maxToolTokens": -12345678901234567890123}"#,
        ),
        (
            "context_top_k_23_digits",
            "POST",
            context.clone(),
            r#"{"query": "x", "topK": 12345678901234567890123}"#,
        ),
        (
            "context_top_k_u64_max",
            "POST",
            context.clone(),
            r#"{"query": "x", "topK": 18446744073709551615}"#,
        ),
        (
            "context_top_k_fraction",
            "POST",
            context.clone(),
            r#"{"query": "x", "topK": 2.5}"#,
        ),
        (
            "read_before_23_digits",
            "POST",
            format!("{CONTEXT}/segments:read"),
            r#"{"pointer": "seg_x", "before": 12345678901234567890123}"#,
        ),
        (
            "identity_number",
            "POST",
            context.clone(),
            r#"{"query": "x", "identity": 5}"#,
        ),
        (
            "identity_object",
            "POST",
            context.clone(),
            r#"{"query": "x", "identity": {"a": 1}}"#,
        ),
        (
            "identity_item_number",
            "POST",
            context.clone(),
            r#"{"query": "x", "identity": [{"principal": "a@x.com"}, 5]}"#,
        ),
        (
            "identity_item_unknown",
            "POST",
            context.clone(),
            r#"{"query": "x", "identity": [{"principal": "a@x.com", "sorce": "box"}]}"#,
        ),
        (
            "batch_top_k_23_digits",
            "POST",
            format!("{search}:batch"),
            r#"{"queries": [{"useCase": "x"}], "topK": 12345678901234567890123}"#,
        ),
        (
            "batch_related_k_u64_max",
            "POST",
            format!("{search}:batch"),
            r#"{"queries": [{"useCase": "x"}], "relatedK": 18446744073709551615}"#,
        ),
        (
            "embedding_dimension_23_digits",
            "PUT",
            format!("{CONTEXT}/syncs/{sync}/records"),
            r#"{"embedding": {"model": "m", "dimension": 12345678901234567890123}, "records": []}"#,
        ),
        (
            "context_unknown_property",
            "POST",
            context.clone(),
            r#"{"query": "x", "topk": 3}"#,
        ),
    ];
    for (name, method, path, body) in cases {
        let reply = request(rest.addr, method, &path, &[JSON], body).await;
        insta::assert_json_snapshot!(name, reply.snapshot());
    }
}
