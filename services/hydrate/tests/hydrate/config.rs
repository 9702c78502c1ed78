//! `[hydration]` configuration: the shipped example, validation messages, `from_config`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentsearch_common::config::{
    Config, HydrationCache, HydrationConfig, HydrationIntegrationConfig, HydrationProvider,
};
use agentsearch_hydrate::{HydrationService, Outcome};

use crate::support::{redis_cache, redis_url, request, unique_project};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load(toml: &str) -> Result<Config, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentsearch.toml");
    std::fs::write(&path, toml).unwrap();
    Config::load(Some(&path)).map_err(|e| e.to_string())
}

fn file_integration(path: &str) -> HydrationIntegrationConfig {
    HydrationIntegrationConfig {
        provider: HydrationProvider::File,
        url: None,
        path: Some(PathBuf::from(path)),
        timeout_ms: None,
    }
}

#[test]
fn shipped_config_documents_the_hydration_defaults() {
    let path = workspace_root().join("deploy/agentsearch.toml");
    let config = Config::load(Some(&path)).unwrap();
    assert_eq!(config.hydration, HydrationConfig::default());
    let defaults = HydrationConfig::default();
    assert_eq!(defaults.cache, HydrationCache::Memory);
    assert_eq!(defaults.redis_url.expose(), "redis://127.0.0.1:6379");
    assert_eq!(
        (
            defaults.ttl_secs,
            defaults.timeout_ms,
            defaults.cache_timeout_ms
        ),
        (300, 800, 50)
    );
}

#[test]
fn integrations_parse_and_validation_names_the_key() {
    let config = load(
        "[hydration]\ncache = \"redis\"\n[hydration.integrations.salesforce]\nprovider = \"http\"\nurl = \"http://127.0.0.1:9300/hydrate\"\ntimeout_ms = 300\n",
    )
    .unwrap();
    let salesforce = &config.hydration.integrations["salesforce"];
    assert_eq!(salesforce.provider, HydrationProvider::Http);
    assert_eq!(salesforce.timeout_ms, Some(300));

    let cases = [
        (
            "[hydration.integrations.salesforce]\nprovider = \"http\"\n",
            "hydration.integrations.salesforce.url: required when provider = \"http\"",
        ),
        (
            "[hydration.integrations.salesforce]\nprovider = \"http\"\nurl = \"ftp://crm.example.com/h\"\n",
            "hydration.integrations.salesforce.url: must be an http:// or https:// URL",
        ),
        (
            "[hydration.integrations.salesforce]\nprovider = \"file\"\n",
            "hydration.integrations.salesforce.path: required when provider = \"file\"",
        ),
        (
            "[hydration.integrations.salesforce]\nprovider = \"file\"\npath = \"x.json\"\ntimeout_ms = 0\n",
            "hydration.integrations.salesforce.timeout_ms: must be >= 1",
        ),
        (
            "[hydration.integrations.salesforce]\nprovider = \"grpc\"\n",
            "hydration.integrations.salesforce.provider",
        ),
        (
            "[hydration.integrations.salesforce]\nprovider = \"file\"\npath = \"x\"\nurll = \"x\"\n",
            "urll",
        ),
        (
            "[hydration.integrations.Sales_Force]\nprovider = \"file\"\npath = \"x\"\n",
            "hydration.integrations.Sales_Force: the integration must be a lowercase slug",
        ),
        ("[hydration]\ncache = \"disk\"\n", "hydration.cache"),
        (
            "[hydration]\nttl_secs = 0\n",
            "hydration.ttl_secs: must be >= 1",
        ),
        (
            "[hydration]\ncache_timeout_ms = 0\n",
            "hydration.cache_timeout_ms: must be >= 1",
        ),
        (
            "[hydration]\ncache = \"redis\"\nredis_url = \"memcached://cache:6380\"\n",
            "hydration.redis_url: must start with redis://, rediss://",
        ),
    ];
    for (toml, expected) in cases {
        let err = load(toml).unwrap_err();
        assert!(err.contains(expected), "{toml}\n=> {err}");
    }
}

#[tokio::test]
async fn from_config_builds_a_file_provider_relative_to_the_base_dir() {
    let mut config = HydrationConfig::default();
    config.integrations.insert(
        "salesforce".to_string(),
        file_integration("demo/hydration.json"),
    );
    let service = HydrationService::from_config(&config, &workspace_root()).unwrap();
    assert!(service.hydrates("salesforce"));
    assert!(!service.hydrates("slack"));

    let project = unique_project();
    let req = request(
        &project,
        "alice@example.com",
        "SALESFORCE_CREATE_OPPORTUNITY",
    );
    let Outcome::Hydrated { schema, cached } = service.hydrate(req.clone()).await else {
        panic!("alice has a hydrated schema in the demo file");
    };
    assert!(!cached);
    assert!(schema.parameters_json.contains("Region__c"));
    assert!(matches!(
        service.hydrate(req).await,
        Outcome::Hydrated { cached: true, .. }
    ));
    // A tool without entries: the static schema stands.
    let other = request(&project, "alice@example.com", "SALESFORCE_DELETE_RECORD");
    assert_eq!(service.hydrate(other).await, Outcome::Static);
    // An integration that is not hydrated.
    let mut slack = request(&project, "alice@example.com", "SLACK_POST_MESSAGE");
    slack.integration = "slack".to_string();
    assert_eq!(service.hydrate(slack).await, Outcome::Static);
}

#[tokio::test]
async fn from_config_errors_name_the_key() {
    let mut config = HydrationConfig::default();
    config.integrations.insert(
        "salesforce".to_string(),
        file_integration("missing/hydration.json"),
    );
    let err = HydrationService::from_config(&config, Path::new("/nonexistent"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("hydration.integrations.salesforce.path: cannot read"),
        "{err}"
    );

    let mut config = HydrationConfig::default();
    config.integrations.insert(
        "salesforce".to_string(),
        HydrationIntegrationConfig {
            provider: HydrationProvider::Http,
            url: Some("https://crm.example.com/h".to_string()),
            path: None,
            timeout_ms: None,
        },
    );
    config.tls_ca_file = Some("missing/ca.pem".into());
    let err = HydrationService::from_config(&config, Path::new("/nonexistent"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("hydration.tls_ca_file: cannot read"),
        "{err}"
    );
}

#[tokio::test]
async fn from_config_with_the_redis_cache_reads_through() {
    // Fails with a clear message when the test Redis is not up.
    redis_cache(Duration::from_secs(1)).await;
    let mut config = HydrationConfig {
        cache: HydrationCache::Redis,
        redis_url: agentsearch_common::config::Secret::new(redis_url()),
        cache_timeout_ms: 1_000,
        ..HydrationConfig::default()
    };
    config.integrations.insert(
        "salesforce".to_string(),
        file_integration("demo/hydration.json"),
    );
    let service = HydrationService::from_config(&config, &workspace_root()).unwrap();
    let req = request(
        &unique_project(),
        "carol@example.com",
        "SALESFORCE_CREATE_LEAD",
    );
    assert!(matches!(
        service.hydrate(req.clone()).await,
        Outcome::Hydrated { cached: false, .. }
    ));
    assert!(matches!(
        service.hydrate(req).await,
        Outcome::Hydrated { cached: true, .. }
    ));
    let stats = service.stats();
    assert_eq!(
        (stats.cache_misses, stats.cache_hits, stats.cache_errors),
        (1, 1, 0)
    );
}
