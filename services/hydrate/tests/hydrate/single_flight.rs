//! Concurrent calls for one key share one provider call.

use std::sync::Arc;
use std::time::Duration;

use agentsearch_hydrate::{HttpHydrator, HydrationService, Outcome};

use crate::support::{request, start_provider, unique_project};

const TOOL: &str = "SALESFORCE_CREATE_LEAD";

fn service(url: &str) -> HydrationService {
    let timeout = Duration::from_secs(5);
    // No cache: sharing must come from the in-flight map, not from a cache hit.
    HydrationService::builder()
        .integration(
            "salesforce",
            Arc::new(HttpHydrator::new(url, timeout).unwrap()),
            timeout,
        )
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_for_one_key_share_one_provider_call() {
    let (base, provider) = start_provider(Duration::from_millis(200)).await;
    let service = service(&format!("{base}/hydrate"));
    let req = request(&unique_project(), "alice@example.com", TOOL);

    let calls = (0..10).map(|_| {
        let service = service.clone();
        let req = req.clone();
        tokio::spawn(async move { service.hydrate(req).await })
    });
    let outcomes = futures::future::join_all(calls).await;
    let first = outcomes[0].as_ref().unwrap().clone();
    assert!(
        matches!(first, Outcome::Hydrated { cached: false, .. }),
        "{first:?}"
    );
    for outcome in &outcomes {
        assert_eq!(outcome.as_ref().unwrap(), &first);
    }
    assert_eq!(provider.requests(), 1);
    assert_eq!(service.stats().provider_calls, 1);

    // The flight is gone once done: a later call asks again (there is no cache here).
    service.hydrate(req).await;
    assert_eq!(provider.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_keys_do_not_share_a_flight() {
    let (base, provider) = start_provider(Duration::from_millis(200)).await;
    let service = service(&format!("{base}/hydrate"));
    let project = unique_project();
    let (a, b) = tokio::join!(
        service.hydrate(request(&project, "alice@example.com", TOOL)),
        service.hydrate(request(&project, "bob@example.com", TOOL)),
    );
    assert_ne!(a, b);
    assert_eq!(provider.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flight_finishes_when_its_caller_goes_away() {
    let (base, provider) = start_provider(Duration::from_millis(200)).await;
    let cache = Arc::new(agentsearch_hydrate::MemoryCache::default());
    let timeout = Duration::from_secs(5);
    let url = format!("{base}/hydrate");
    let service = HydrationService::builder()
        .cache(cache)
        .integration(
            "salesforce",
            Arc::new(HttpHydrator::new(&url, timeout).unwrap()),
            timeout,
        )
        .build();
    let req = request(&unique_project(), "alice@example.com", TOOL);
    // The caller gives up after 50 ms; the flight still completes and fills the cache.
    let gave_up =
        tokio::time::timeout(Duration::from_millis(50), service.hydrate(req.clone())).await;
    assert!(gave_up.is_err());
    // Later calls join the flight while it runs, then read the cache it filled.
    let mut cached = false;
    for _ in 0..100 {
        if let Outcome::Hydrated { cached: true, .. } = service.hydrate(req.clone()).await {
            cached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cached, "the abandoned flight never filled the cache");
    assert_eq!(provider.requests(), 1);
}
