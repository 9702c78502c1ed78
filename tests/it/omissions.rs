//! Tool search omission counts against values computed here from the fixture catalog (which tools
//! exist, their side effects, integrations and categories) and the user's connections, for
//! requests whose whole scope fits in the candidate window, so every tool in scope is a candidate
//! of the dense retriever (or, in lexical mode, exactly the tools holding the query's word).

use std::collections::{BTreeSet, HashSet};

use agentsearch_common::tool::{SideEffect, ToolDefinition};
use agentsearch_proto::v1 as pb;
use agentsearch_proto::v1::connections_client::ConnectionsClient;
use agentsearch_proto::v1::tool_search_client::ToolSearchClient;
use agentsearch_tests::*;

/// Integrations the user has an active account for.
const ACTIVE: [&str; 3] = ["acme_mail", "crmly", "ticketeer"];

/// One request: the filters that decide the counts.
#[derive(Clone, Debug, Default)]
struct Case {
    query: &'static str,
    lexical: bool,
    integrations: &'static [&'static str],
    categories: &'static [&'static str],
    ceiling: Option<SideEffect>,
    connected_only: bool,
    top_k: Option<u32>,
    max_tokens: Option<u32>,
}

/// The counts a request must report.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    candidates: u32,
    omitted_for_side_effect: u32,
    omitted_not_connected: u32,
    before_filter: u32,
    after_filter: u32,
    entitled: u32,
}

/// Every lowercase word of a tool's searchable text: name, description, parameter names and
/// descriptions.
fn words_of(tool: &ToolDefinition) -> HashSet<String> {
    let mut text = format!("{} {}", tool.name.replace('_', " "), tool.description);
    if let Some(props) = tool
        .parameters
        .as_ref()
        .and_then(|p| p["properties"].as_object())
    {
        for (name, prop) in props {
            text.push_str(&format!(
                " {} {}",
                name.replace('_', " "),
                prop["description"].as_str().unwrap_or("")
            ));
        }
    }
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Allowed under the ceiling: at or below it; `unknown` never once a ceiling is set.
fn allowed(tool: &ToolDefinition, ceiling: Option<SideEffect>) -> bool {
    let order = |s: SideEffect| match s {
        SideEffect::Read => Some(0),
        SideEffect::Write => Some(1),
        SideEffect::Delete => Some(2),
        SideEffect::Send => Some(3),
        _ => None,
    };
    match ceiling {
        None => true,
        Some(ceiling) => tool
            .side_effect
            .and_then(order)
            .is_some_and(|level| level <= order(ceiling).unwrap()),
    }
}

/// The counts of `case`, from the catalog alone.
fn expected(catalog: &[ToolDefinition], case: &Case) -> Expected {
    let requested = |integration: &str| {
        case.integrations.is_empty() || case.integrations.contains(&integration)
    };
    let connected = |integration: &str| !case.connected_only || ACTIVE.contains(&integration);
    let scope: Vec<&ToolDefinition> = catalog
        .iter()
        .filter(|t| requested(&t.integration))
        .filter(|t| {
            case.categories.is_empty()
                || case
                    .categories
                    .contains(&t.category.as_deref().unwrap_or(""))
        })
        .filter(|t| !case.lexical || words_of(t).contains(case.query))
        .collect();
    let count = |keep: &dyn Fn(&ToolDefinition) -> bool| -> u32 {
        scope.iter().filter(|t| keep(t)).count() as u32
    };
    let candidates = count(&|t| allowed(t, case.ceiling) && connected(&t.integration));
    let integrations: BTreeSet<&str> = catalog
        .iter()
        .map(|t| t.integration.as_str())
        .filter(|i| requested(i) && connected(i))
        .collect();
    Expected {
        candidates,
        omitted_for_side_effect: count(&|t| !allowed(t, case.ceiling)),
        omitted_not_connected: count(&|t| allowed(t, case.ceiling) && !connected(&t.integration)),
        before_filter: scope.len() as u32,
        after_filter: candidates,
        entitled: integrations.len() as u32,
    }
}

fn cases() -> Vec<Case> {
    let base = Case {
        query: "send a message to the team",
        top_k: Some(50),
        ..Case::default()
    };
    let zebra = Case {
        query: "zebra",
        lexical: true,
        top_k: Some(50),
        ..Case::default()
    };
    vec![
        base.clone(),
        Case {
            ceiling: Some(SideEffect::Read),
            ..base.clone()
        },
        Case {
            ceiling: Some(SideEffect::Write),
            connected_only: true,
            ..base.clone()
        },
        Case {
            ceiling: Some(SideEffect::Send),
            connected_only: true,
            top_k: Some(3),
            ..base.clone()
        },
        Case {
            query: "delete an old record",
            connected_only: true,
            top_k: None,
            ..base.clone()
        },
        Case {
            integrations: &["acme_chat", "crmly", "codebox", "filevault"],
            categories: &["messaging", "crm", "code_hosting"],
            ceiling: Some(SideEffect::Delete),
            connected_only: true,
            ..base.clone()
        },
        Case {
            query: "email a customer",
            categories: &["email", "crm"],
            connected_only: true,
            top_k: Some(2),
            max_tokens: Some(400),
            ..base.clone()
        },
        Case {
            ceiling: Some(SideEffect::Write),
            connected_only: true,
            ..zebra.clone()
        },
        Case {
            connected_only: true,
            ..zebra.clone()
        },
        Case {
            ceiling: Some(SideEffect::Send),
            ..zebra
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn omission_counts_match_the_catalog_and_connections() {
    let catalog = fixture_catalog();
    let window = settings().search.candidates as usize;
    assert!(
        catalog.len() <= window,
        "the whole catalog fits in the candidate window"
    );
    let cluster = Cluster::start_custom(2, settings(), StoreKind::Sqlite, keyed_auth(true)).await;
    let grpc = cluster.grpc;
    load_catalog(grpc, PROJECT, &catalog, 21).await;
    let user = "dana@example.com";
    let token = project_token(user);
    let account = |integration: &str, status: &str| pb::ConnectionInput {
        integration: integration.into(),
        account_id: format!("{integration}-account"),
        status: Some(status.into()),
        ..Default::default()
    };
    let mut connections: Vec<pb::ConnectionInput> =
        ACTIVE.iter().map(|i| account(i, "active")).collect();
    connections.push(account("codebox", "expired"));
    connections.push(account("filevault", "revoked"));
    ConnectionsClient::new(channel(grpc).await)
        .upsert_connections(bearer(
            pb::UpsertConnectionsRequest {
                project_id: PROJECT.into(),
                user_id: user.into(),
                connections,
            },
            Some(&token),
        ))
        .await
        .unwrap();

    let mut client = ToolSearchClient::new(channel(grpc).await);
    let mut checked_both = 0;
    for case in cases() {
        let want = expected(&catalog, &case);
        let request = pb::SearchToolsRequest {
            project_id: PROJECT.into(),
            query: case.query.into(),
            top_k: case.top_k,
            max_tool_tokens: case.max_tokens,
            integrations: case.integrations.iter().map(|s| s.to_string()).collect(),
            categories: case.categories.iter().map(|s| s.to_string()).collect(),
            max_side_effect: case.ceiling.map(|s| s.as_str().to_string()),
            connected_only: case.connected_only,
            mode: case.lexical.then(|| "lexical".to_string()),
            ..Default::default()
        };
        let response = client
            .search_tools(bearer(request, Some(&token)))
            .await
            .unwrap()
            .into_inner();
        let usage = response.usage.unwrap();
        let visibility = usage.visibility.unwrap();
        let got = Expected {
            candidates: usage.candidates,
            omitted_for_side_effect: usage.omitted_for_side_effect,
            omitted_not_connected: usage.omitted_not_connected,
            before_filter: visibility.candidates_before_filter,
            after_filter: visibility.candidates_after_filter,
            entitled: visibility.entitled_integrations,
        };
        assert_eq!(got, want, "{case:?}");
        assert_eq!(
            usage.returned + usage.omitted_for_budget + usage.omitted_for_top_k,
            usage.candidates,
            "{case:?}"
        );
        let limit = case
            .top_k
            .unwrap_or(if case.max_tokens.is_some() { 50 } else { 8 });
        if case.max_tokens.is_none() {
            assert_eq!(usage.returned, want.candidates.min(limit), "{case:?}");
        }
        for tool in &response.tools {
            let definition = catalog.iter().find(|t| t.name == tool.intent_name).unwrap();
            assert!(
                allowed(definition, case.ceiling),
                "{case:?}: {}",
                tool.intent_name
            );
            assert!(
                !case.connected_only || ACTIVE.contains(&definition.integration.as_str()),
                "{case:?}: {}",
                tool.intent_name
            );
        }
        if want.omitted_for_side_effect > 0 && want.omitted_not_connected > 0 {
            checked_both += 1;
        }
    }
    assert!(
        checked_both >= 3,
        "the cases remove tools by both rules at once"
    );
}
