//! `HttpHydrator` against a real local provider: the request it sends and each kind of answer.

use std::sync::Arc;
use std::time::Duration;

use agentsearch_hydrate::{HttpHydrator, HydrateError, HydrationService, Hydrator, Outcome};
use serde_json::json;

use crate::support::{closed_port_url, request, start_provider, static_parameters, unique_project};

const TOOL: &str = "SALESFORCE_CREATE_LEAD";

fn hydrator(url: &str, timeout: Duration) -> HttpHydrator {
    HttpHydrator::new(url, timeout).unwrap()
}

#[tokio::test]
async fn http_provider_receives_the_request_and_hydrates() {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let project = unique_project();
    let req = request(&project, "alice@example.com", TOOL);
    let schema = hydrator(&format!("{base}/hydrate"), Duration::from_secs(2))
        .hydrate(&req)
        .await
        .unwrap()
        .expect("a schema");
    assert_eq!(
        provider.last_body().unwrap(),
        json!({
            "projectId": project,
            "userId": "alice@example.com",
            "integration": "salesforce",
            "tool": TOOL,
            "catalogVersion": 3,
            "parameters": static_parameters(),
        })
    );
    let parameters: serde_json::Value = serde_json::from_str(&schema.parameters_json).unwrap();
    assert_eq!(
        parameters["properties"]["last_name"],
        static_parameters()["properties"]["last_name"]
    );
    assert_eq!(parameters["properties"]["Region__c"]["type"], "string");
    assert_eq!(
        schema.description.as_deref(),
        Some("Adds a lead with your org's fields.")
    );
}

#[tokio::test]
async fn http_404_and_204_mean_the_static_schema_stands() {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let req = request(&unique_project(), "alice@example.com", TOOL);
    for code in [404, 204] {
        let answer = hydrator(&format!("{base}/status/{code}"), Duration::from_secs(2))
            .hydrate(&req)
            .await
            .unwrap();
        assert_eq!(answer, None, "HTTP {code}");
    }
    assert_eq!(provider.requests(), 2);

    let service = HydrationService::builder()
        .integration(
            "salesforce",
            Arc::new(hydrator(
                &format!("{base}/status/404"),
                Duration::from_secs(2),
            )),
            Duration::from_secs(2),
        )
        .build();
    assert_eq!(service.hydrate(req).await, Outcome::Static);
    assert_eq!(service.stats().provider_failures, 0);
}

#[tokio::test]
async fn http_500_bad_json_and_non_object_schemas_fail() {
    let (base, _provider) = start_provider(Duration::ZERO).await;
    let req = request(&unique_project(), "alice@example.com", TOOL);
    let cases = [
        ("status/500", "provider answered HTTP 500"),
        ("status/201", "provider answered HTTP 201"),
        ("bad-json", "provider answered invalid JSON"),
        (
            "not-object",
            "not an object schema: `type` must be \"object\"",
        ),
    ];
    for (path, expected) in cases {
        let err = hydrator(&format!("{base}/{path}"), Duration::from_secs(2))
            .hydrate(&req)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{path}: {err}");

        let service = HydrationService::builder()
            .integration(
                "salesforce",
                Arc::new(hydrator(&format!("{base}/{path}"), Duration::from_secs(2))),
                Duration::from_secs(2),
            )
            .build();
        match service.hydrate(req.clone()).await {
            Outcome::Failed(message) => assert!(message.contains(expected), "{path}: {message}"),
            other => panic!("{path}: expected a failure, got {other:?}"),
        }
        assert_eq!(service.stats().provider_failures, 1);
    }
}

#[tokio::test]
async fn http_provider_timeout_fails() {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let req = request(&unique_project(), "alice@example.com", TOOL);
    let timeout = Duration::from_millis(300);
    let err = hydrator(&format!("{base}/hang"), timeout)
        .hydrate(&req)
        .await
        .unwrap_err();
    assert!(
        matches!(err, HydrateError::Timeout(t) if t == timeout),
        "{err}"
    );
    assert_eq!(err.to_string(), "provider timed out after 300 ms");

    // Through the service, with a provider whose own bound is longer than the integration's.
    let service = HydrationService::builder()
        .cache(Arc::new(agentsearch_hydrate::MemoryCache::default()))
        .integration(
            "salesforce",
            Arc::new(hydrator(&format!("{base}/hang"), Duration::from_secs(60))),
            timeout,
        )
        .build();
    let outcome = tokio::time::timeout(Duration::from_secs(10), service.hydrate(req.clone()))
        .await
        .expect("the integration's timeout bounds the call");
    assert_eq!(
        outcome,
        Outcome::Failed("provider timed out after 300 ms".to_string())
    );
    // A failure is not cached: the next call asks again.
    assert!(matches!(service.hydrate(req).await, Outcome::Failed(_)));
    assert_eq!(provider.requests(), 3);
    assert_eq!(service.stats().provider_failures, 2);
}

#[tokio::test]
async fn unreachable_provider_fails() {
    let url = format!("{}/hydrate", closed_port_url("http").await);
    let req = request(&unique_project(), "alice@example.com", TOOL);
    let err = hydrator(&url, Duration::from_secs(2))
        .hydrate(&req)
        .await
        .unwrap_err();
    assert!(matches!(err, HydrateError::Unavailable(_)), "{err}");
    assert!(err.to_string().starts_with("provider unreachable"), "{err}");
}

#[tokio::test]
async fn a_static_schema_that_is_not_an_object_is_not_sent() {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let mut req = request(&unique_project(), "alice@example.com", TOOL);
    req.parameters_json = "[1, 2]".to_string();
    let err = hydrator(&format!("{base}/hydrate"), Duration::from_secs(2))
        .hydrate(&req)
        .await
        .unwrap_err();
    assert!(matches!(err, HydrateError::InvalidRequest(_)), "{err}");
    assert_eq!(provider.requests(), 0);
}
