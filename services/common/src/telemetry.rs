//! Logs and traces, shared by every binary: a `tracing` subscriber that writes log lines on stderr
//! and, when a collector is configured, exports spans over OTLP/gRPC; and the W3C trace context
//! (`traceparent`, `tracestate`) read from and written to request headers, so that one search is
//! one trace across the router and its shards.

use std::io::IsTerminal;
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::{LogConfig, TelemetryConfig};

/// The standard variables that name a trace collector when `telemetry.otlp_endpoint` does not.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The trace exporter of this process, if any; [`Telemetry::shutdown`] sends the spans still
/// buffered. It blocks: call it from a blocking thread.
#[must_use = "shut the telemetry down before exiting, or the last spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the exporter (at most 5 s).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(err) = provider.shutdown_with_timeout(Duration::from_secs(5))
        {
            eprintln!("warning: trace export did not shut down cleanly: {err}");
        }
    }
}

/// Where spans go, or `None` when tracing is off: `OTEL_SDK_DISABLED=true` or
/// `OTEL_TRACES_EXPORTER=none` turns it off, else `telemetry.otlp_endpoint`, else the standard
/// variables.
fn endpoint(config: &TelemetryConfig) -> Option<Option<String>> {
    let var = |name: &str| std::env::var(name).map(|v| v.trim().to_ascii_lowercase());
    if var("OTEL_SDK_DISABLED").is_ok_and(|v| v == "true")
        || var("OTEL_TRACES_EXPORTER").is_ok_and(|v| v == "none")
    {
        return None;
    }
    if let Some(endpoint) = &config.otlp_endpoint {
        return Some(Some(endpoint.clone()));
    }
    // The exporter reads the variables itself (and their per-signal precedence).
    ENDPOINT_VARIABLES
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()))
        .then_some(None)
}

/// Installs the global subscriber: `RUST_LOG` filter (default `info`), text or JSON lines on
/// stderr, and span export over OTLP/gRPC when a collector is configured. `role` names the
/// service (`agentsearch-<role>`) unless `telemetry.service_name` or `OTEL_SERVICE_NAME` does.
/// Must run inside a Tokio runtime when tracing is on (the exporter's channel lives there).
pub fn init(log: &LogConfig, telemetry: &TelemetryConfig, role: &str) -> Result<Telemetry, String> {
    // Logs follow RUST_LOG; spans are exported at info whatever the log level, so quieter logs
    // do not switch traces off.
    let log_filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,tantivy=warn"));
    let provider = match endpoint(telemetry) {
        Some(endpoint) => Some(provider(telemetry, endpoint, role)?),
        None => None,
    };
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("agentsearch"))
            .with_filter(EnvFilter::new("info,tantivy=warn"))
    });
    let registry = tracing_subscriber::registry().with(otel);
    // Colours only on a terminal: a log file or a collector gets plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second initialisation (tests, embedded use) keeps the first subscriber.
    let _ = if log.json {
        registry.with(fmt.json().with_filter(log_filter)).try_init()
    } else {
        registry.with(fmt.with_filter(log_filter)).try_init()
    };
    Ok(Telemetry { provider })
}

fn provider(
    config: &TelemetryConfig,
    endpoint: Option<String>,
    role: &str,
) -> Result<SdkTracerProvider, String> {
    if let Ok(protocol) = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        && protocol.trim() != "grpc"
    {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL: only `grpc` is supported (OTLP/gRPC, usually port \
             4317), got `{protocol}`"
        ));
    }
    // An https:// collector is checked against the system's roots.
    let https = endpoint
        .clone()
        .or_else(|| {
            ENDPOINT_VARIABLES
                .iter()
                .find_map(|name| std::env::var(name).ok())
        })
        .is_some_and(|e| e.trim().starts_with("https://"));
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_timeout(Duration::from_secs(5));
    if let Some(endpoint) = endpoint {
        exporter = exporter.with_endpoint(endpoint);
    }
    if https {
        use opentelemetry_otlp::WithTonicConfig;
        exporter =
            exporter.with_tls_config(tonic::transport::ClientTlsConfig::new().with_native_roots());
    }
    let exporter = exporter
        .build()
        .map_err(|e| format!("telemetry.otlp_endpoint: cannot build the trace exporter: {e}"))?;

    let mut resource = Resource::builder();
    let from_env = Resource::builder().build();
    // The configuration, else OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES, else the role.
    let named_by_env = std::env::var("OTEL_SERVICE_NAME").is_ok()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| {
            v.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    if let Some(name) = &config.service_name {
        resource = resource.with_service_name(name.clone());
    } else if !named_by_env {
        resource = resource.with_service_name(format!("agentsearch-{role}"));
    }
    resource = resource.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    // One instance id per process unless the deployment names it (`OTEL_RESOURCE_ATTRIBUTES`,
    // e.g. the pod name).
    if from_env
        .get(&opentelemetry::Key::new("service.instance.id"))
        .is_none()
    {
        resource = resource.with_attribute(KeyValue::new(
            "service.instance.id",
            uuid::Uuid::new_v4().to_string(),
        ));
    }
    let mut builder = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build());
    if let Some(ratio) = config.sample_ratio {
        // A caller's decision is followed; only new traces are sampled at `ratio`.
        builder = builder.with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))));
    }
    Ok(builder.build())
}

/// Reads W3C trace context from request headers.
struct HeaderReader<'a>(&'a http::HeaderMap);

impl Extractor for HeaderReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Writes W3C trace context into request headers.
struct HeaderWriter<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// The caller's trace context in `headers` (empty when there is none or it is malformed).
pub fn extract(headers: &http::HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&HeaderReader(headers))
}

/// Writes the context of `span` into `headers` (nothing when `span` is not traced).
pub fn inject(span: &tracing::Span, headers: &mut http::HeaderMap) {
    let context = span.context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut HeaderWriter(headers));
    }
}

/// Makes `span` a child of the caller's trace in `headers`, and records its trace id in the
/// span's `trace_id` field (declared empty by the caller) so every log line inside names the
/// trace. Call before the span is first entered.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent = extract(headers);
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    if span_context.is_valid() {
        span.record("trace_id", tracing::field::display(span_context.trace_id()));
    }
}

/// Renames `span` in its trace (a name recorded after the span started is not exported).
pub fn rename(span: &tracing::Span, name: String) {
    let context = span.context();
    if context.span().span_context().is_valid() {
        context.span().update_name(name);
    }
}

/// Marks `span` as failed in its trace (`otel.status_code = ERROR`).
pub fn mark_error(span: &tracing::Span, description: &str) {
    span.set_status(opentelemetry::trace::Status::error(description.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_and_written_back() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        );
        let context = extract(&headers);
        let span = context.span();
        let span_context = span.span_context();
        assert!(span_context.is_valid());
        assert!(span_context.is_remote());
        assert_eq!(
            span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let mut out = http::HeaderMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut HeaderWriter(&mut out));
        assert_eq!(
            out.get("traceparent").unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
    }

    #[test]
    fn a_malformed_traceparent_starts_no_trace() {
        for value in [
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        ] {
            let mut headers = http::HeaderMap::new();
            headers.insert("traceparent", http::HeaderValue::from_static(value));
            assert!(
                !extract(&headers).span().span_context().is_valid(),
                "{value}"
            );
        }
    }

    #[test]
    fn tracing_is_off_without_an_endpoint_and_when_disabled() {
        let config = TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:4317".into()),
            ..TelemetryConfig::default()
        };
        // The process environment of the test runner is not ours to change; only the config
        // path is checked when no standard variable is set.
        if ENDPOINT_VARIABLES.iter().all(|v| std::env::var(v).is_err())
            && std::env::var("OTEL_SDK_DISABLED").is_err()
        {
            assert_eq!(endpoint(&TelemetryConfig::default()), None);
            assert_eq!(
                endpoint(&config),
                Some(Some("http://127.0.0.1:4317".into()))
            );
        }
    }
}
