//! Recorded plans end to end, on PostgreSQL and SQLite: recording (service credential only, every
//! bad field named, tools checked against the catalog), recommendations to paraphrased use cases
//! in multi-query searches (REST camelCase, gRPC and the tool router's snake_case route), the
//! similarity threshold (`plans.min_similarity`), outcomes accumulating into the difficulty,
//! failure-only plans, the request's filters, deletion with the plan's tools, and projects kept
//! apart.
//!
//! Expectations are written from the documented contract (README, "Recorded plans").

use std::net::SocketAddr;

use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use agentsearch_tests::*;
use serde_json::{Value, json};

/// A second project with the same catalog: plans never cross between the two.
const OTHER: &str = "00000000-0000-4000-8000-0000000000f9";
const ALICE: &str = "alice@example.com";

const TRIAGE_STEPS: [&str; 3] = [
    "TICKETEER_LIST_TICKETS",
    "TICKETEER_ADD_INTERNAL_NOTE",
    "TICKETEER_REPLY_TO_TICKET",
];
const TRIAGE: &str = "Reply to a customer's complaint and note it on their support ticket";
/// A paraphrase of [`TRIAGE`] close enough for the default `plans.min_similarity`.
const TRIAGE_PARAPHRASE: &str =
    "respond to a customer complaint and add a note to their support ticket";
const EMAIL: &str = "Send an email to the customer";
const EMAIL_PARAPHRASE: &str = "email the customer";
const SHARE: &str = "Share a file with a colleague";
const SHARE_PARAPHRASE: &str = "share the file with my colleague";
/// A use case far from every recorded plan.
const UNRELATED: &str = "merge the open pull request of the repository";

fn plans_path(project: &str) -> String {
    format!("/api/tools/projects/{project}/plans")
}

fn batch_path(project: &str) -> String {
    format!("/api/tools/projects/{project}/tools/search:batch")
}

async fn post(addr: SocketAddr, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    rest_json(addr, "POST", path, token, &body.to_string()).await
}

/// Records a plan outcome as the service; the answer.
async fn record(addr: SocketAddr, project: &str, body: Value) -> Value {
    let (status, answer) = post(addr, &plans_path(project), Some(SERVICE_TOKEN), body).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// A multi-query search of `use_cases` as the service, with `extra` fields; the answer's results.
async fn batch(addr: SocketAddr, project: &str, use_cases: &[&str], extra: Value) -> Vec<Value> {
    let mut body = json!({
        "queries": use_cases.iter().map(|u| json!({"useCase": u})).collect::<Vec<_>>()
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let (status, answer) = post(addr, &batch_path(project), Some(SERVICE_TOKEN), body).await;
    assert_eq!(status, 200, "{answer}");
    answer["results"].as_array().unwrap().clone()
}

/// The plan recommended to the one query `use_case`, if any: (planId, steps, difficulty).
async fn recommended(
    addr: SocketAddr,
    project: &str,
    use_case: &str,
    extra: Value,
) -> Option<(String, Vec<String>, String)> {
    let results = batch(addr, project, &[use_case], extra).await;
    let result = &results[0];
    let id = result.get("planId")?.as_str().unwrap().to_string();
    Some((
        id,
        strings(&result["recommendedPlanSteps"]),
        result["difficulty"].as_str().unwrap().to_string(),
    ))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The fields named by an error envelope, after checking its status and code.
fn refused(status: u16, answer: &Value, want_status: u16, code: &str) -> Vec<String> {
    assert_eq!(status, want_status, "{answer}");
    assert_eq!(answer["error"]["code"], code, "{answer}");
    answer["error"]["details"]
        .as_array()
        .map(|d| {
            d.iter()
                .map(|v| v["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// One shard, `store`, [`PROJECT`] and [`OTHER`] with the fixture catalog; plans recommended from
/// a cosine of `min_similarity`.
async fn start(store: StoreKind, min_similarity: f64) -> Cluster {
    let mut settings = settings();
    settings.plans.min_similarity = min_similarity;
    let cluster = Cluster::start_custom(1, settings, store, keyed_auth(false)).await;
    for project in [PROJECT, OTHER] {
        load_catalog_over(
            channel(cluster.grpc).await,
            project,
            &fixture_catalog(),
            64,
            Some(SERVICE_TOKEN),
        )
        .await;
    }
    cluster
}

fn triage_plan(outcome: &str) -> Value {
    json!({
        "useCase": TRIAGE,
        "steps": TRIAGE_STEPS,
        "notes": "Find the ticket by the requester's email first.",
        "pitfalls": ["Internal notes are not sent to the requester: reply as well."],
        "outcome": outcome,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_are_recorded_and_recommended_to_similar_use_cases() {
    let cluster = start(StoreKind::Postgres, 0.8).await;
    let addr = cluster.http.addr;
    let alice = project_token(ALICE);

    // Recording is for services; so are listing and deleting.
    let (status, answer) = post(
        addr,
        &plans_path(PROJECT),
        Some(&alice),
        triage_plan("success"),
    )
    .await;
    refused(status, &answer, 403, "PERMISSION_DENIED");
    let (status, answer) = rest_json(addr, "GET", &plans_path(PROJECT), Some(&alice), "").await;
    refused(status, &answer, 403, "PERMISSION_DENIED");

    let answer = record(addr, PROJECT, triage_plan("success")).await;
    let triage_id = answer["planId"].as_str().unwrap().to_string();
    assert!(
        triage_id.starts_with("pln_") && triage_id.len() == 36,
        "{triage_id}"
    );
    assert_eq!(
        answer,
        json!({
            "planId": triage_id,
            "useCase": TRIAGE,
            "steps": TRIAGE_STEPS,
            "successes": 1,
            "failures": 0,
            "difficulty": "medium - 3-step plan, succeeded 1 of 1 time",
        })
    );

    // A paraphrase gets the plan; an unrelated use case in the same batch does not.
    let results = batch(addr, PROJECT, &[TRIAGE_PARAPHRASE, UNRELATED], json!({})).await;
    assert_eq!(results[0]["planId"], triage_id.as_str(), "{results:?}");
    assert_eq!(strings(&results[0]["recommendedPlanSteps"]), TRIAGE_STEPS);
    assert_eq!(
        results[0]["difficulty"],
        "medium - 3-step plan, succeeded 1 of 1 time"
    );
    assert_eq!(
        results[0]["planNotes"],
        "Find the ticket by the requester's email first."
    );
    assert_eq!(
        results[0]["planPitfalls"],
        json!(["Internal notes are not sent to the requester: reply as well."])
    );
    for field in [
        "planId",
        "recommendedPlanSteps",
        "difficulty",
        "planNotes",
        "planPitfalls",
    ] {
        assert!(results[1].get(field).is_none(), "{field}: {}", results[1]);
    }

    // The same over gRPC.
    let mut client = ToolSearchClient::new(channel(cluster.grpc).await);
    let answer = client
        .search_tools_batch(bearer(
            pb::SearchToolsBatchRequest {
                project_id: PROJECT.into(),
                queries: vec![
                    pb::BatchQuery {
                        use_case: TRIAGE_PARAPHRASE.into(),
                        known_fields: None,
                    },
                    pb::BatchQuery {
                        use_case: UNRELATED.into(),
                        known_fields: None,
                    },
                ],
                ..Default::default()
            },
            Some(SERVICE_TOKEN),
        ))
        .await
        .unwrap()
        .into_inner();
    let first = &answer.results[0];
    assert_eq!(first.plan_id.as_deref(), Some(triage_id.as_str()));
    assert_eq!(first.recommended_plan_steps, TRIAGE_STEPS);
    assert_eq!(
        first.difficulty.as_deref(),
        Some("medium - 3-step plan, succeeded 1 of 1 time")
    );
    assert_eq!(
        first.plan_pitfalls,
        ["Internal notes are not sent to the requester: reply as well."]
    );
    assert!(answer.results[1].plan_id.is_none());
    assert!(answer.results[1].recommended_plan_steps.is_empty());

    // The tool router's route, in its names: steps, id, difficulty, guidance and pitfalls.
    let (status, session) = post(
        addr,
        "/api/v3.1/tool_router/session",
        Some(&alice),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{session}");
    let search = format!(
        "/api/v3.1/tool_router/session/{}/search",
        session["session_id"].as_str().unwrap()
    );
    let (status, answer) = post(
        addr,
        &search,
        Some(&alice),
        json!({"queries": [{"use_case": TRIAGE_PARAPHRASE}, {"use_case": UNRELATED}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let result = &answer["results"][0];
    assert_eq!(result["plan_id"], triage_id.as_str(), "{answer}");
    assert_eq!(strings(&result["recommended_plan_steps"]), TRIAGE_STEPS);
    assert_eq!(
        result["difficulty"],
        "medium - 3-step plan, succeeded 1 of 1 time"
    );
    assert_eq!(
        result["execution_guidance"],
        "A plan recorded for a similar use case succeeded 1 of 1 time: follow \
         recommended_plan_steps (TICKETEER_LIST_TICKETS, then TICKETEER_ADD_INTERNAL_NOTE, then \
         TICKETEER_REPLY_TO_TICKET). Notes: Find the ticket by the requester's email first."
    );
    assert_eq!(
        result["known_pitfalls"],
        json!(["Internal notes are not sent to the requester: reply as well."])
    );
    let other = &answer["results"][1];
    for field in [
        "plan_id",
        "recommended_plan_steps",
        "difficulty",
        "execution_guidance",
        "known_pitfalls",
    ] {
        assert!(other.get(field).is_none(), "{field}: {other}");
    }

    // The request's filters: every step must be allowed, or the plan is not recommended.
    let ceiling = |max: &str| json!({"maxSideEffect": max});
    assert!(
        recommended(addr, PROJECT, TRIAGE_PARAPHRASE, ceiling("write"))
            .await
            .is_none()
    );
    assert!(
        recommended(addr, PROJECT, TRIAGE_PARAPHRASE, ceiling("send"))
            .await
            .is_some()
    );
    assert!(
        recommended(
            addr,
            PROJECT,
            TRIAGE_PARAPHRASE,
            json!({"integrations": ["crmly"]})
        )
        .await
        .is_none()
    );
    assert!(
        recommended(
            addr,
            PROJECT,
            TRIAGE_PARAPHRASE,
            json!({"categories": ["ticketing"], "integrations": ["ticketeer"]})
        )
        .await
        .is_some()
    );
    assert!(
        recommended(
            addr,
            PROJECT,
            TRIAGE_PARAPHRASE,
            json!({"categories": ["crm"]})
        )
        .await
        .is_none()
    );

    // Outcomes accumulate on one plan (case and whitespace do not make another) and move its
    // difficulty; more failures than successes and it is not recommended any more.
    let email = |outcome: &str, use_case: &str| json!({"useCase": use_case, "steps": ["ACME_MAIL_SEND_EMAIL"], "outcome": outcome});
    let first = record(addr, PROJECT, email("success", EMAIL)).await;
    let email_id = first["planId"].as_str().unwrap().to_string();
    assert_eq!(
        first["difficulty"],
        "easy - single-tool plan, succeeded 1 of 1 time"
    );
    let (id, steps, difficulty) = recommended(addr, PROJECT, EMAIL_PARAPHRASE, json!({}))
        .await
        .expect("the email plan is recommended");
    assert_eq!(
        (id.as_str(), steps),
        (email_id.as_str(), vec!["ACME_MAIL_SEND_EMAIL".to_string()])
    );
    assert_eq!(difficulty, "easy - single-tool plan, succeeded 1 of 1 time");
    let second = record(
        addr,
        PROJECT,
        email("failure", "  SEND an email\tto the   Customer "),
    )
    .await;
    assert_eq!(second["planId"], email_id.as_str());
    assert_eq!(
        (second["successes"].as_u64(), second["failures"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        second["difficulty"],
        "hard - single-tool plan, succeeded 1 of 2 times"
    );
    let (_, _, difficulty) = recommended(addr, PROJECT, EMAIL_PARAPHRASE, json!({}))
        .await
        .expect("as many successes as failures: still recommended");
    assert_eq!(
        difficulty,
        "hard - single-tool plan, succeeded 1 of 2 times"
    );
    record(addr, PROJECT, email("failure", EMAIL)).await;
    assert!(
        recommended(addr, PROJECT, EMAIL_PARAPHRASE, json!({}))
            .await
            .is_none()
    );

    // A plan that only failed is never recommended, not even to its own use case.
    let failed = record(
        addr,
        PROJECT,
        json!({"useCase": "Upload the quarterly report to the finance folder",
               "steps": ["FILEVAULT_UPLOAD_FILE"], "outcome": "failure"}),
    )
    .await;
    assert_eq!(
        failed["difficulty"],
        "hard - single-tool plan, succeeded 0 of 1 time"
    );
    assert!(
        recommended(
            addr,
            PROJECT,
            "Upload the quarterly report to the finance folder",
            json!({})
        )
        .await
        .is_none()
    );

    // Projects are apart: the other project has none of these plans, and its own plan of the
    // same use case and steps is another plan.
    assert!(
        recommended(addr, OTHER, TRIAGE_PARAPHRASE, json!({}))
            .await
            .is_none()
    );
    let (status, listed) =
        rest_json(addr, "GET", &plans_path(OTHER), Some(SERVICE_TOKEN), "").await;
    assert_eq!((status, listed), (200, json!({"plans": []})));
    let theirs = record(addr, OTHER, triage_plan("success")).await;
    assert_ne!(theirs["planId"], triage_id.as_str());
    assert_eq!(theirs["successes"], 1);
    let (id, _, difficulty) = recommended(addr, PROJECT, TRIAGE_PARAPHRASE, json!({}))
        .await
        .unwrap();
    assert_eq!(
        (id.as_str(), difficulty.as_str()),
        (
            triage_id.as_str(),
            "medium - 3-step plan, succeeded 1 of 1 time"
        )
    );

    // The list: every plan of the project, by id, with notes, pitfalls and times.
    let (status, listed) =
        rest_json(addr, "GET", &plans_path(PROJECT), Some(SERVICE_TOKEN), "").await;
    assert_eq!(status, 200, "{listed}");
    let plans = listed["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 3, "{listed}");
    let ids: Vec<&str> = plans
        .iter()
        .map(|p| p["planId"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    let triage = plans
        .iter()
        .find(|p| p["planId"] == triage_id.as_str())
        .unwrap();
    assert_eq!(
        triage["notes"],
        "Find the ticket by the requester's email first."
    );
    assert_eq!(
        triage["pitfalls"],
        json!(["Internal notes are not sent to the requester: reply as well."])
    );
    assert!(
        triage["createdAt"].as_str().unwrap().ends_with('Z'),
        "{triage}"
    );
    let email = plans
        .iter()
        .find(|p| p["planId"] == email_id.as_str())
        .unwrap();
    assert_eq!(email["useCase"], EMAIL, "the latest text is kept");
    assert_eq!(
        (email["successes"].as_u64(), email["failures"].as_u64()),
        (Some(1), Some(2))
    );

    // A plan leaves with any of its tools; the other project's copy stays with its own tools.
    let share = record(
        addr,
        PROJECT,
        json!({"useCase": SHARE, "steps": ["FILEVAULT_SEARCH_FILES", "FILEVAULT_SHARE_FILE"],
               "outcome": "success"}),
    )
    .await;
    let share_id = share["planId"].as_str().unwrap().to_string();
    let (id, _, _) = recommended(addr, PROJECT, SHARE_PARAPHRASE, json!({}))
        .await
        .expect("the share plan is recommended");
    assert_eq!(id, share_id);
    let (status, deleted) = post(
        addr,
        &format!("/api/tools/projects/{PROJECT}/tools:delete"),
        Some(SERVICE_TOKEN),
        json!({"names": ["FILEVAULT_SHARE_FILE"]}),
    )
    .await;
    assert_eq!(
        (status, deleted),
        (200, json!({"deleted": 1, "notFound": 0, "plansDeleted": 1}))
    );
    assert!(
        recommended(addr, PROJECT, SHARE_PARAPHRASE, json!({}))
            .await
            .is_none()
    );
    let (_, listed) = rest_json(addr, "GET", &plans_path(PROJECT), Some(SERVICE_TOKEN), "").await;
    assert!(
        listed["plans"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["planId"] != share_id.as_str()),
        "{listed}"
    );
    // A plan cannot name the deleted tool any more.
    let (status, answer) = post(
        addr,
        &plans_path(PROJECT),
        Some(SERVICE_TOKEN),
        json!({"useCase": SHARE, "steps": ["FILEVAULT_SEARCH_FILES", "FILEVAULT_SHARE_FILE"],
               "outcome": "success"}),
    )
    .await;
    assert_eq!(
        refused(status, &answer, 400, "REQUEST_INVALID"),
        ["steps[1]"]
    );

    // Deleting by id: once, then NOT_FOUND in the envelope (as for an id of another shape).
    let path = format!("{}/{triage_id}", plans_path(PROJECT));
    let (status, answer) = rest_json(addr, "DELETE", &path, Some(&alice), "").await;
    refused(status, &answer, 403, "PERMISSION_DENIED");
    let (status, answer) = rest_json(addr, "DELETE", &path, Some(SERVICE_TOKEN), "").await;
    assert_eq!((status, answer), (200, json!({"deleted": true})));
    assert!(
        recommended(addr, PROJECT, TRIAGE_PARAPHRASE, json!({}))
            .await
            .is_none()
    );
    for missing in [path.clone(), format!("{}/plan-1", plans_path(PROJECT))] {
        let (status, answer) = rest_json(addr, "DELETE", &missing, Some(SERVICE_TOKEN), "").await;
        refused(status, &answer, 404, "NOT_FOUND");
        assert!(answer["error"]["requestId"].is_string(), "{answer}");
    }
    // The other project's plan is still there.
    assert!(
        recommended(addr, OTHER, TRIAGE_PARAPHRASE, json!({}))
            .await
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_bodies_are_checked_and_every_bad_field_named() {
    let cluster = start(StoreKind::Sqlite, 0.95).await;
    let addr = cluster.http.addr;
    let path = plans_path(PROJECT);
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({}), vec!["useCase", "steps", "outcome"]),
        (
            json!({"useCase": " ", "steps": [], "outcome": "maybe"}),
            vec!["useCase", "steps", "outcome"],
        ),
        (
            json!({"useCase": "u".repeat(1025), "steps": ["ACME_MAIL_SEND_EMAIL", ""],
                   "notes": "n".repeat(2001), "pitfalls": ["ok", " "], "outcome": "success"}),
            vec!["useCase", "steps[1]", "notes", "pitfalls[1]"],
        ),
        (
            json!({"useCase": "x", "steps": "ACME_MAIL_SEND_EMAIL", "outcome": "success"}),
            vec!["steps"],
        ),
        // NUL (which PostgreSQL refuses in text) and other control characters, by field.
        (
            json!({"useCase": "send\u{0}it", "steps": ["ACME_MAIL_SEND_EMAIL"],
                   "notes": "beep\u{7}", "pitfalls": ["tabs\tand\nnewlines are fine"],
                   "outcome": "success"}),
            vec!["useCase", "notes"],
        ),
        (
            json!({"usecase": "x", "steps": ["ACME_MAIL_SEND_EMAIL"], "outcome": "success"}),
            vec!["usecase"],
        ),
        // Tools the catalog does not have, each named by its position.
        (
            json!({"useCase": "x", "outcome": "success",
                   "steps": ["ACME_MAIL_SEND_EMAIL", "ACME_MAIL_SEND_FAX", "ACME_MAIL_LIST_INBOX",
                             "acme_mail_send_email"]}),
            vec!["steps[1]", "steps[3]"],
        ),
    ];
    for (body, want) in cases {
        let (status, answer) = post(addr, &path, Some(SERVICE_TOKEN), body.clone()).await;
        assert_eq!(
            refused(status, &answer, 400, "REQUEST_INVALID"),
            want,
            "{body}: {answer}"
        );
    }
    let (status, answer) = post(
        addr,
        &path,
        Some(SERVICE_TOKEN),
        json!({"useCase": "x", "steps": ["ACME_MAIL_SEND_FAX"], "outcome": "success"}),
    )
    .await;
    refused(status, &answer, 400, "REQUEST_INVALID");
    assert_eq!(
        answer["error"]["details"][0]["issue"],
        "the project's catalog has no tool named `ACME_MAIL_SEND_FAX`"
    );
    let (status, answer) = post(
        addr,
        &path,
        Some(SERVICE_TOKEN),
        json!({"useKase": "x", "steps": ["A"], "outcome": "success"}),
    )
    .await;
    refused(status, &answer, 400, "REQUEST_INVALID");
    assert!(
        answer["error"]["details"][0]["issue"]
            .as_str()
            .unwrap()
            .contains("did you mean `useCase`?"),
        "{answer}"
    );
    // Nothing was recorded by any of these.
    let (status, listed) = rest_json(addr, "GET", &path, Some(SERVICE_TOKEN), "").await;
    assert_eq!((status, listed), (200, json!({"plans": []})));

    // On SQLite too: recorded, recommended, deleted with its tool. Under a `min_similarity` of
    // 0.95 the recorded use case itself is recommended, not a paraphrase (a cosine of about 0.9).
    let answer = record(addr, PROJECT, triage_plan("success")).await;
    let id = answer["planId"].as_str().unwrap().to_string();
    let (got, steps, _) = recommended(addr, PROJECT, TRIAGE, json!({}))
        .await
        .expect("recommended on SQLite");
    assert_eq!((got, steps), (id, TRIAGE_STEPS.map(String::from).to_vec()));
    assert!(
        recommended(addr, PROJECT, TRIAGE_PARAPHRASE, json!({}))
            .await
            .is_none()
    );
    let (status, deleted) = post(
        addr,
        &format!("/api/tools/projects/{PROJECT}/tools:delete"),
        Some(SERVICE_TOKEN),
        json!({"names": ["TICKETEER_ADD_INTERNAL_NOTE", "NOT_A_TOOL"]}),
    )
    .await;
    assert_eq!(
        (status, deleted),
        (200, json!({"deleted": 1, "notFound": 1, "plansDeleted": 1}))
    );
    assert!(
        recommended(addr, PROJECT, TRIAGE, json!({}))
            .await
            .is_none()
    );
}
