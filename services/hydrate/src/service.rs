//! [`HydrationService`]: a read-through cache in front of each integration's [`Hydrator`], with one
//! provider call in flight per key.
//!
//! A call looks the key up in the cache, asks the provider on a miss and stores its answer
//! (including "nothing for this user") for the TTL. Concurrent calls for the same key share one
//! flight. A cache error (Redis down or slow) is logged, counted and treated as a miss; a provider
//! error or timeout is [`Outcome::Failed`] and nothing is cached.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentsearch_common::config::{HydrationCache, HydrationConfig, HydrationProvider};
use agentsearch_common::{Error, FieldViolation};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use parking_lot::Mutex;

use crate::{
    CachedValue, FileHydrator, HttpHydrator, HydrateError, HydratedSchema, HydrationRequest,
    Hydrator, MemoryCache, RedisCache, SchemaCache,
};

/// The result of hydrating one tool for one user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The user's schema; `cached` when it came from the cache.
    Hydrated {
        schema: HydratedSchema,
        cached: bool,
    },
    /// The provider has nothing special for this user and tool (or the integration is not
    /// hydrated): the static schema stands, not degraded.
    Static,
    /// The provider failed or timed out: use the static schema and flag the tool degraded. The
    /// text is for logs, not for clients.
    Failed(String),
}

/// Counters since the service was built, for diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HydrationStats {
    /// Lookups answered by the cache (a schema or "nothing for this user").
    pub cache_hits: u64,
    /// Lookups the cache did not have.
    pub cache_misses: u64,
    /// Cache reads and writes that failed or timed out (reads then count as neither hit nor miss).
    pub cache_errors: u64,
    /// Calls made to providers (concurrent calls for one key make one).
    pub provider_calls: u64,
    /// Provider calls that failed or timed out.
    pub provider_failures: u64,
}

#[derive(Default)]
struct Counters {
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    cache_errors: AtomicU64,
    provider_calls: AtomicU64,
    provider_failures: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

struct Integration {
    hydrator: Arc<dyn Hydrator>,
    timeout: Duration,
    /// The projects whose tools are hydrated; `None`: every project's.
    projects: Option<Vec<String>>,
}

type Flight = Shared<BoxFuture<'static, Outcome>>;

struct Inner {
    integrations: HashMap<String, Integration>,
    cache: Option<Arc<dyn SchemaCache>>,
    ttl: Duration,
    /// Key -> the flight resolving it; an entry lives while its flight runs.
    inflight: Mutex<HashMap<String, Flight>>,
    counters: Counters,
}

/// Per-user schema hydration for the integrations that declare it. Cheap to clone.
#[derive(Clone)]
pub struct HydrationService {
    inner: Arc<Inner>,
}

/// Builds a [`HydrationService`]; without a cache every call asks the provider.
pub struct HydrationServiceBuilder {
    integrations: HashMap<String, Integration>,
    cache: Option<Arc<dyn SchemaCache>>,
    ttl: Duration,
}

/// Default time to live of cached answers.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

impl HydrationServiceBuilder {
    pub fn cache(mut self, cache: Arc<dyn SchemaCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// How long answers stay cached (at least one second).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Hydrates the tools of `integration` with `hydrator`; each provider call is bounded by
    /// `timeout`.
    pub fn integration(
        mut self,
        integration: impl Into<String>,
        hydrator: Arc<dyn Hydrator>,
        timeout: Duration,
    ) -> Self {
        self.integrations.insert(
            integration.into(),
            Integration {
                hydrator,
                timeout,
                projects: None,
            },
        );
        self
    }

    /// Like [`HydrationServiceBuilder::integration`], for the tools of `projects` only: the same
    /// integration's tools in any other project keep their static schema, with no cache lookup
    /// and no provider call.
    pub fn integration_for_projects(
        mut self,
        integration: impl Into<String>,
        projects: impl IntoIterator<Item = impl Into<String>>,
        hydrator: Arc<dyn Hydrator>,
        timeout: Duration,
    ) -> Self {
        self.integrations.insert(
            integration.into(),
            Integration {
                hydrator,
                timeout,
                projects: Some(projects.into_iter().map(Into::into).collect()),
            },
        );
        self
    }

    /// Whether the tools of `integration` are hydrated (in some project).
    pub fn hydrates(&self, integration: &str) -> bool {
        self.integrations.contains_key(integration)
    }

    pub fn build(self) -> HydrationService {
        HydrationService {
            inner: Arc::new(Inner {
                integrations: self.integrations,
                cache: self.cache,
                ttl: self.ttl,
                inflight: Mutex::new(HashMap::new()),
                counters: Counters::default(),
            }),
        }
    }
}

/// The PEM file of certificate authorities at `path` (relative to `base_dir`), if configured.
fn read_ca(base_dir: &Path, path: Option<&Path>, key: &str) -> Result<Option<Vec<u8>>, Error> {
    let Some(path) = path else {
        return Ok(None);
    };
    std::fs::read(base_dir.join(path))
        .map(Some)
        .map_err(|e| config_error(key, format!("cannot read {}: {e}", path.display())))
}

impl HydrationService {
    pub fn builder() -> HydrationServiceBuilder {
        HydrationServiceBuilder {
            integrations: HashMap::new(),
            cache: None,
            ttl: DEFAULT_TTL,
        }
    }

    /// The service `[hydration]` describes; relative file paths are resolved against `base_dir`.
    /// Reads provider files now; does not connect to Redis yet (a Redis that is down only costs
    /// cache misses). Must be called within a Tokio runtime when `cache = "redis"`.
    pub fn from_config(config: &HydrationConfig, base_dir: &Path) -> Result<Self, Error> {
        Ok(Self::builder_from_config(config, base_dir)?.build())
    }

    /// The builder of [`HydrationService::from_config`], to add integrations the configuration
    /// does not name.
    pub fn builder_from_config(
        config: &HydrationConfig,
        base_dir: &Path,
    ) -> Result<HydrationServiceBuilder, Error> {
        let mut builder = Self::builder().ttl(Duration::from_secs(config.ttl_secs.max(1)));
        match config.cache {
            HydrationCache::None => {}
            HydrationCache::Memory => builder = builder.cache(Arc::new(MemoryCache::default())),
            HydrationCache::Redis => {
                let timeout = Duration::from_millis(config.cache_timeout_ms.max(1));
                let ca = read_ca(
                    base_dir,
                    config.redis_ca_file.as_deref(),
                    "hydration.redis_ca_file",
                )?;
                let cache =
                    RedisCache::with_roots(config.redis_url.expose(), timeout, ca.as_deref())
                        .map_err(|e| config_error("hydration.redis_url", e.to_string()))?;
                builder = builder.cache(Arc::new(cache));
            }
        }
        let provider_ca = read_ca(
            base_dir,
            config.tls_ca_file.as_deref(),
            "hydration.tls_ca_file",
        )?;
        for (slug, integration) in &config.integrations {
            let key = format!("hydration.integrations.{slug}");
            let timeout_ms = integration.timeout_ms.unwrap_or(config.timeout_ms);
            if timeout_ms == 0 {
                return Err(config_error(format!("{key}.timeout_ms"), "must be >= 1"));
            }
            let timeout = Duration::from_millis(timeout_ms);
            let hydrator: Arc<dyn Hydrator> = match integration.provider {
                HydrationProvider::Http => {
                    let Some(url) = integration.url.as_deref() else {
                        return Err(config_error(
                            format!("{key}.url"),
                            "required when provider = \"http\"",
                        ));
                    };
                    let hydrator =
                        HttpHydrator::with_roots(url, timeout, provider_ca.as_deref())
                            .map_err(|e| config_error(format!("{key}.url"), e.to_string()))?;
                    Arc::new(hydrator)
                }
                HydrationProvider::File => {
                    let Some(path) = integration.path.as_deref() else {
                        return Err(config_error(
                            format!("{key}.path"),
                            "required when provider = \"file\"",
                        ));
                    };
                    let hydrator = FileHydrator::open(base_dir.join(path))
                        .map_err(|e| config_error(format!("{key}.path"), e.to_string()))?;
                    Arc::new(hydrator)
                }
            };
            builder = builder.integration(slug.clone(), hydrator, timeout);
        }
        Ok(builder)
    }

    /// Whether the tools of `integration` are hydrated per user, in some project.
    pub fn hydrates(&self, integration: &str) -> bool {
        self.inner.integrations.contains_key(integration)
    }

    /// Whether the tools of `integration` are hydrated per user in `project_id`.
    pub fn hydrates_for(&self, project_id: &str, integration: &str) -> bool {
        self.inner
            .integrations
            .get(integration)
            .is_some_and(|i| i.admits(project_id))
    }

    /// The user's schema of `req.tool`. Never fails: a provider failure is [`Outcome::Failed`], a
    /// cache failure a miss. Concurrent calls with the same cache key share one provider call,
    /// which runs to completion (and fills the cache) even if every caller goes away. A project
    /// the integration is not hydrated for gets [`Outcome::Static`] at once.
    pub async fn hydrate(&self, req: HydrationRequest) -> Outcome {
        if !self.hydrates_for(&req.project_id, &req.integration) {
            return Outcome::Static;
        }
        let key = req.cache_key();
        let flight = {
            let mut inflight = self.inner.inflight.lock();
            match inflight.get(&key) {
                Some(flight) => flight.clone(),
                None => {
                    let flight = self.start_flight(key.clone(), req);
                    inflight.insert(key, flight.clone());
                    flight
                }
            }
        };
        flight.await
    }

    /// Spawns the lookup of `key`; the task removes its entry from the in-flight map when done.
    fn start_flight(&self, key: String, req: HydrationRequest) -> Flight {
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(tracing::Instrument::in_current_span(async move {
            let _entry = InflightEntry {
                inner: Arc::clone(&inner),
                key: key.clone(),
            };
            inner.resolve(&key, &req).await
        }));
        async move {
            task.await
                .unwrap_or_else(|e| Outcome::Failed(format!("hydration task failed: {e}")))
        }
        .boxed()
        .shared()
    }

    pub fn stats(&self) -> HydrationStats {
        let c = &self.inner.counters;
        HydrationStats {
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            cache_misses: c.cache_misses.load(Ordering::Relaxed),
            cache_errors: c.cache_errors.load(Ordering::Relaxed),
            provider_calls: c.provider_calls.load(Ordering::Relaxed),
            provider_failures: c.provider_failures.load(Ordering::Relaxed),
        }
    }
}

/// Removes a flight's entry when its task ends, panics included.
struct InflightEntry {
    inner: Arc<Inner>,
    key: String,
}

impl Drop for InflightEntry {
    fn drop(&mut self) {
        self.inner.inflight.lock().remove(&self.key);
    }
}

impl Integration {
    fn admits(&self, project_id: &str) -> bool {
        self.projects
            .as_ref()
            .is_none_or(|projects| projects.iter().any(|p| p == project_id))
    }
}

impl Inner {
    async fn resolve(&self, key: &str, req: &HydrationRequest) -> Outcome {
        let Some(integration) = self
            .integrations
            .get(&req.integration)
            .filter(|i| i.admits(&req.project_id))
        else {
            return Outcome::Static;
        };
        if let Some(cache) = &self.cache {
            match cache.get(key).await {
                Ok(Some(CachedValue::Hydrated(schema))) => {
                    bump(&self.counters.cache_hits);
                    cache_lookup("hit");
                    return Outcome::Hydrated {
                        schema,
                        cached: true,
                    };
                }
                Ok(Some(CachedValue::Static)) => {
                    bump(&self.counters.cache_hits);
                    cache_lookup("hit");
                    return Outcome::Static;
                }
                Ok(None) => {
                    bump(&self.counters.cache_misses);
                    cache_lookup("miss");
                }
                Err(error) => {
                    bump(&self.counters.cache_errors);
                    cache_lookup("error");
                    tracing::warn!(%error, integration = %req.integration, "schema cache read failed, asking the provider");
                }
            }
        }

        bump(&self.counters.provider_calls);
        let started = std::time::Instant::now();
        let answer = tokio::time::timeout(integration.timeout, integration.hydrator.hydrate(req))
            .await
            .unwrap_or(Err(HydrateError::Timeout(integration.timeout)));
        metrics::histogram!(
            agentsearch_common::metrics::HYDRATION_PROVIDER_DURATION,
            "outcome" => if answer.is_ok() { "ok" } else { "error" },
        )
        .record(started.elapsed().as_secs_f64());
        let (outcome, value) = match answer {
            Ok(Some(schema)) => (
                Outcome::Hydrated {
                    schema: schema.clone(),
                    cached: false,
                },
                CachedValue::Hydrated(schema),
            ),
            Ok(None) => (Outcome::Static, CachedValue::Static),
            Err(error) => {
                bump(&self.counters.provider_failures);
                tracing::warn!(%error, integration = %req.integration, tool = %req.tool, "schema hydration failed, the static schema stands");
                return Outcome::Failed(error.to_string());
            }
        };

        if let Some(cache) = &self.cache
            && let Err(error) = cache.put(key, &value, self.ttl).await
        {
            bump(&self.counters.cache_errors);
            tracing::warn!(%error, integration = %req.integration, "schema cache write failed");
        }
        outcome
    }
}

fn cache_lookup(result: &'static str) {
    metrics::counter!(agentsearch_common::metrics::HYDRATION_CACHE, "result" => result)
        .increment(1);
}

/// A configuration error naming the key.
fn config_error(key: impl Into<String>, issue: impl Into<String>) -> Error {
    let (key, issue) = (key.into(), issue.into());
    Error::InvalidArgument {
        message: format!("{key}: {issue}"),
        violations: vec![FieldViolation::new(key, issue)],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use async_trait::async_trait;
    use serde_json::json;

    use super::*;

    /// Answers every request with one schema and counts the calls.
    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Hydrator for Counting {
        async fn hydrate(
            &self,
            _req: &HydrationRequest,
        ) -> Result<Option<HydratedSchema>, HydrateError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let schema = json!({"type": "object", "properties": {"Region__c": {"type": "string"}}});
            Ok(Some(HydratedSchema::from_value(&schema, None).unwrap()))
        }
    }

    fn request(project: &str, integration: &str) -> HydrationRequest {
        HydrationRequest {
            project_id: project.to_string(),
            user_id: "alice@example.com".to_string(),
            integration: integration.to_string(),
            tool: "SALESFORCE_CREATE_LEAD".to_string(),
            catalog_version: 1,
            description: String::new(),
            parameters_json: "{}".to_string(),
        }
    }

    #[tokio::test]
    async fn project_scoped_integrations_leave_other_projects_static() {
        let provider = Arc::new(Counting::default());
        let service = HydrationService::builder()
            .cache(Arc::new(MemoryCache::default()))
            .integration_for_projects(
                "salesforce",
                ["p-demo"],
                provider.clone(),
                Duration::from_secs(5),
            )
            .build();
        assert!(service.hydrates("salesforce"));
        assert!(service.hydrates_for("p-demo", "salesforce"));
        assert!(!service.hydrates_for("p-other", "salesforce"));
        assert!(!service.hydrates_for("p-demo", "hubspot"));

        let outcome = service.hydrate(request("p-other", "salesforce")).await;
        assert_eq!(outcome, Outcome::Static);
        assert_eq!(provider.calls.load(Ordering::SeqCst), 0);
        assert_eq!(service.stats(), HydrationStats::default());

        let outcome = service.hydrate(request("p-demo", "salesforce")).await;
        assert!(
            matches!(outcome, Outcome::Hydrated { cached: false, .. }),
            "{outcome:?}"
        );
        assert_eq!(provider.calls.load(Ordering::SeqCst), 1);
        // The other project is still static, the cached answer of the first notwithstanding.
        let outcome = service.hydrate(request("p-other", "salesforce")).await;
        assert_eq!(outcome, Outcome::Static);
    }

    #[tokio::test]
    async fn unscoped_integrations_hydrate_every_project() {
        let provider = Arc::new(Counting::default());
        let service = HydrationService::builder()
            .integration("salesforce", provider.clone(), Duration::from_secs(5))
            .build();
        for project in ["p-demo", "p-other"] {
            assert!(service.hydrates_for(project, "salesforce"));
            let outcome = service.hydrate(request(project, "salesforce")).await;
            assert!(matches!(outcome, Outcome::Hydrated { .. }), "{outcome:?}");
        }
        assert_eq!(provider.calls.load(Ordering::SeqCst), 2);
    }
}
