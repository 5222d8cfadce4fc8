//! OTLP trace export (config `telemetry:`): the process's spans (a request, each attempt) sent
//! to a collector over OTLP/HTTP, and the W3C trace context read from clients and sent upstream;
//! and the lock-free histogram and series cache the Prometheus metrics are made of.

mod histogram;
mod series;

pub use histogram::Histogram;
pub use series::SeriesCache;

use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::TelemetryConfig;

/// How long spans wait to be sent together.
const BATCH_DELAY: Duration = Duration::from_millis(500);
/// Longest one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The exporter's HTTP client: the gateway's reqwest, run on the gateway's runtime (the batch
/// processor calls it from its own thread).
#[derive(Debug)]
struct Client {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let send = async move {
            let mut outgoing = client.request(parts.method, parts.uri.to_string()).body(body);
            for (name, value) in &parts.headers {
                outgoing = outgoing.header(name, value);
            }
            let answer = outgoing.send().await?.error_for_status()?;
            let status = answer.status();
            let body = answer.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        };
        let (status, body) = self.runtime.spawn(send).await??;
        Ok(Response::builder().status(status).body(body)?)
    }
}

/// A tracer provider exporting to the configured collector; spans go out in batches.
pub fn provider(config: &TelemetryConfig, runtime: tokio::runtime::Handle) -> anyhow::Result<SdkTracerProvider> {
    let base = config.otlp_endpoint.trimmed();
    let endpoint = if base.ends_with("/v1/traces") { base.to_string() } else { format!("{base}/v1/traces") };
    let client = crate::http_client::builder().timeout(EXPORT_TIMEOUT).build()?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(Client { client, runtime })
        .build()?;
    let batches = BatchConfigBuilder::default().with_scheduled_delay(BATCH_DELAY).build();
    let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batches).build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sample_ratio.get()))))
        .with_resource(Resource::builder().with_service_name(config.service_name.clone()).build())
        .build())
}

/// The layer that turns the process's spans into OTLP spans.
pub fn layer(
    provider: &SdkTracerProvider,
) -> Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync> {
    Box::new(tracing_opentelemetry::layer().with_tracer(provider.tracer("switchyard")))
}

/// Continues the client's trace (`traceparent`) in `span`, when it sent one.
pub fn continue_from(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent = TraceContextPropagator::new().extract(&Headers(headers));
    let _ = span.set_parent(parent);
}

/// Adds the current span's trace context (`traceparent`) to an upstream request's headers.
pub fn propagate(headers: &mut http::HeaderMap) {
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut HeadersMut(headers));
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (http::HeaderName::try_from(key), http::HeaderValue::try_from(value)) {
            self.0.insert(name, value);
        }
    }
}
