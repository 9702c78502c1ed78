//! One suite run against every `SchemaCache`: read-through, expiry, cached "nothing for this user",
//! plus Redis specifics (what is stored, a Redis that is down).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsearch_hydrate::{
    CachedValue, HttpHydrator, HydrationService, HydrationStats, MemoryCache, Outcome, RedisCache,
    SchemaCache,
};
use redis::AsyncCommands;

use crate::support::{
    closed_port_url, redis_cache, redis_connection, request, start_provider, unique_project,
};

const TOOL: &str = "SALESFORCE_CREATE_LEAD";
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(2);

fn service(cache: Arc<dyn SchemaCache>, url: &str, ttl: Duration) -> HydrationService {
    let hydrator = HttpHydrator::new(url, PROVIDER_TIMEOUT).unwrap();
    HydrationService::builder()
        .cache(cache)
        .ttl(ttl)
        .integration("salesforce", Arc::new(hydrator), PROVIDER_TIMEOUT)
        .build()
}

fn hydrated(outcome: &Outcome) -> (bool, serde_json::Value) {
    match outcome {
        Outcome::Hydrated { schema, cached } => (
            *cached,
            serde_json::from_str(&schema.parameters_json).unwrap(),
        ),
        other => panic!("expected a hydrated schema, got {other:?}"),
    }
}

async fn miss_then_hit(cache: Arc<dyn SchemaCache>) {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let service = service(cache, &format!("{base}/hydrate"), Duration::from_secs(300));
    let req = request(&unique_project(), "alice@example.com", TOOL);

    let (cached, schema) = hydrated(&service.hydrate(req.clone()).await);
    assert!(!cached);
    assert_eq!(
        schema["properties"]["Region__c"]["description"],
        "Region of alice@example.com."
    );
    let (cached, again) = hydrated(&service.hydrate(req.clone()).await);
    assert!(cached);
    assert_eq!(again, schema);
    assert_eq!(provider.requests(), 1);
    assert_eq!(
        service.stats(),
        HydrationStats {
            cache_hits: 1,
            cache_misses: 1,
            cache_errors: 0,
            provider_calls: 1,
            provider_failures: 0,
        }
    );

    // Another user, or another catalog version, is another key.
    let (cached, _) = hydrated(&service.hydrate(request(&req.project_id, "bob", TOOL)).await);
    assert!(!cached);
    let mut next_version = req.clone();
    next_version.catalog_version += 1;
    let (cached, _) = hydrated(&service.hydrate(next_version).await);
    assert!(!cached);
    assert_eq!(provider.requests(), 3);
}

async fn entries_expire_after_the_ttl(cache: Arc<dyn SchemaCache>) {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let service = service(cache, &format!("{base}/hydrate"), Duration::from_secs(1));
    let req = request(&unique_project(), "alice@example.com", TOOL);

    assert!(!hydrated(&service.hydrate(req.clone()).await).0);
    assert!(hydrated(&service.hydrate(req.clone()).await).0);
    assert_eq!(provider.requests(), 1);
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    assert!(!hydrated(&service.hydrate(req.clone()).await).0);
    assert_eq!(provider.requests(), 2);
    assert!(hydrated(&service.hydrate(req).await).0);
    assert_eq!(provider.requests(), 2);
}

async fn static_answers_are_cached(cache: Arc<dyn SchemaCache>) {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let service = service(
        cache,
        &format!("{base}/status/404"),
        Duration::from_secs(300),
    );
    let req = request(&unique_project(), "alice@example.com", TOOL);
    assert_eq!(service.hydrate(req.clone()).await, Outcome::Static);
    assert_eq!(service.hydrate(req).await, Outcome::Static);
    assert_eq!(provider.requests(), 1);
    assert_eq!(service.stats().cache_hits, 1);
}

async fn failures_are_not_cached(cache: Arc<dyn SchemaCache>) {
    let (base, provider) = start_provider(Duration::ZERO).await;
    let service = service(
        cache,
        &format!("{base}/status/500"),
        Duration::from_secs(300),
    );
    let req = request(&unique_project(), "alice@example.com", TOOL);
    for _ in 0..2 {
        match service.hydrate(req.clone()).await {
            Outcome::Failed(message) => assert!(message.contains("HTTP 500"), "{message}"),
            other => panic!("expected a failure, got {other:?}"),
        }
    }
    assert_eq!(provider.requests(), 2);
    assert_eq!(service.stats().provider_failures, 2);
    assert_eq!(service.stats().cache_hits, 0);
}

/// Redis tests use a generous per-call bound: on 2 busy cores a 50 ms bound could turn a slow
/// round trip into a miss and make the counts flaky. The down-Redis test uses the default.
const TEST_REDIS_TIMEOUT: Duration = Duration::from_secs(1);

async fn redis() -> Arc<dyn SchemaCache> {
    Arc::new(redis_cache(TEST_REDIS_TIMEOUT).await)
}

fn memory() -> Arc<dyn SchemaCache> {
    Arc::new(MemoryCache::default())
}

#[tokio::test]
async fn redis_miss_then_hit_calls_the_provider_once() {
    miss_then_hit(redis().await).await;
}

#[tokio::test]
async fn redis_entries_expire_after_the_ttl() {
    entries_expire_after_the_ttl(redis().await).await;
}

#[tokio::test]
async fn redis_caches_static_answers() {
    static_answers_are_cached(redis().await).await;
}

#[tokio::test]
async fn redis_does_not_cache_failures() {
    failures_are_not_cached(redis().await).await;
}

#[tokio::test]
async fn memory_miss_then_hit_calls_the_provider_once() {
    miss_then_hit(memory()).await;
}

#[tokio::test]
async fn memory_entries_expire_after_the_ttl() {
    entries_expire_after_the_ttl(memory()).await;
}

#[tokio::test]
async fn memory_caches_static_answers() {
    static_answers_are_cached(memory()).await;
}

#[tokio::test]
async fn memory_does_not_cache_failures() {
    failures_are_not_cached(memory()).await;
}

#[tokio::test]
async fn redis_stores_json_under_the_escaped_key_with_an_expiry() {
    let cache = redis_cache(TEST_REDIS_TIMEOUT).await;
    let mut req = request(&unique_project(), "tenant:alice", TOOL);
    req.catalog_version = 42;
    let key = req.cache_key();
    assert!(
        key.ends_with(":tenant%3Aalice:salesforce:SALESFORCE_CREATE_LEAD:42"),
        "{key}"
    );

    let value = CachedValue::Static;
    cache
        .put(&key, &value, Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(cache.get(&key).await.unwrap(), Some(value));

    let mut connection = redis_connection().await;
    let stored: String = connection.get(&key).await.unwrap();
    assert_eq!(stored, r#"{"kind":"static"}"#);
    let ttl: i64 = connection.ttl(&key).await.unwrap();
    assert!((1..=300).contains(&ttl), "ttl {ttl}");

    // A value this version cannot read is an error (the service treats it as a miss).
    let _: () = connection.set(&key, "garbage").await.unwrap();
    assert!(cache.get(&key).await.is_err());
    assert_eq!(cache.get(&format!("{key}:absent")).await.unwrap(), None);
}

#[tokio::test]
async fn redis_down_still_hydrates_from_the_provider() {
    let url = closed_port_url("redis").await;
    let cache = RedisCache::new(&url, agentsearch_hydrate::DEFAULT_REDIS_TIMEOUT).unwrap();
    let (base, provider) = start_provider(Duration::ZERO).await;
    let service = service(
        Arc::new(cache),
        &format!("{base}/hydrate"),
        Duration::from_secs(300),
    );
    let req = request(&unique_project(), "alice@example.com", TOOL);

    for round in 1..=2u64 {
        let started = Instant::now();
        let outcome = tokio::time::timeout(PROVIDER_TIMEOUT * 3, service.hydrate(req.clone()))
            .await
            .expect("a down Redis must not hold the call");
        let (cached, _) = hydrated(&outcome);
        assert!(!cached);
        let stats = service.stats();
        assert_eq!(stats.provider_calls, round);
        // The read and the write each failed.
        assert_eq!(stats.cache_errors, 2 * round, "{stats:?}");
        assert_eq!(stats.cache_hits + stats.cache_misses, 0);
        eprintln!("round {round} with Redis down took {:?}", started.elapsed());
    }
    assert_eq!(provider.requests(), 2);
}

#[tokio::test]
async fn redis_that_never_answers_costs_at_most_the_cache_timeout() {
    // Accepts connections and never answers: every cache call runs into its timeout.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let cache = RedisCache::new(&url, agentsearch_hydrate::DEFAULT_REDIS_TIMEOUT).unwrap();
    assert!(matches!(
        cache.ping().await,
        Err(agentsearch_hydrate::CacheError::Timeout(_))
    ));
    let (base, provider) = start_provider(Duration::ZERO).await;
    let service = service(
        Arc::new(cache),
        &format!("{base}/hydrate"),
        Duration::from_secs(300),
    );
    let req = request(&unique_project(), "alice@example.com", TOOL);
    for round in 1..=2u64 {
        let outcome = tokio::time::timeout(PROVIDER_TIMEOUT * 3, service.hydrate(req.clone()))
            .await
            .expect("a silent Redis must not hold the call");
        assert!(!hydrated(&outcome).0);
        assert_eq!(service.stats().cache_errors, 2 * round);
    }
    assert_eq!(provider.requests(), 2);
}
