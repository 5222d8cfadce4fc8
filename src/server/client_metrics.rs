//! `http_server_request_duration_seconds`: every client request at an API door, refusals
//! included, by route template, status and error type, observed when its answer's body ends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::response::Response;

use super::Gateway;
use super::error::{ApiError, ErrorType};
use super::guarded::Guarded;
use crate::telemetry::Histogram;

/// What a refusal was, left on the response for this layer once a front door has rendered the
/// error in its own protocol.
#[derive(Debug, Clone, Copy)]
pub struct Refused(pub ErrorType);

/// The layer on the API routes, outside the in-flight cap so its 503s are counted too.
#[derive(Clone)]
pub struct Layer(Arc<Gateway>);

pub fn layer(gateway: Arc<Gateway>) -> Layer {
    Layer(gateway)
}

impl<S> tower::Layer<S> for Layer {
    type Service = Measured<S>;

    fn layer(&self, inner: S) -> Measured<S> {
        Measured { gw: self.0.clone(), inner }
    }
}

#[derive(Clone)]
pub struct Measured<S> {
    gw: Arc<Gateway>,
    inner: S,
}

impl<S> tower::Service<Request> for Measured<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Timed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The router's own shared template (a clone of an `Arc<str>`: no copy per request).
        let route = request.extensions().get::<MatchedPath>().cloned();
        let method = method_label(request.method());
        let gw = self.gw.settings.metrics.enabled.then(|| self.gw.clone());
        Timed { answer: self.inner.call(request), gw, route, method, started: Instant::now() }
    }
}

pin_project_lite::pin_project! {
    pub struct Timed<F> {
        #[pin]
        answer: F,
        gw: Option<Arc<Gateway>>,
        route: Option<MatchedPath>,
        method: &'static str,
        started: Instant,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Timed<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.answer.poll(cx))?;
        let Some(gw) = this.gw.take() else { return Poll::Ready(Ok(response)) };
        let status = response.status();
        let error_type = match (response.extensions().get::<Refused>(), response.extensions().get::<ApiError>()) {
            (Some(Refused(kind)), _) | (None, Some(ApiError { kind, .. })) => kind.as_str(),
            _ if status.is_client_error() || status.is_server_error() => status.as_str(),
            _ => "",
        };
        let route = this.route.as_ref().map_or("other", MatchedPath::as_str);
        let histogram = gw.metrics.client_request(this.method, route, status.as_u16(), error_type);
        let ends = Observed { histogram, started: *this.started };
        Poll::Ready(Ok(response.map(|body| Guarded::body(body, ends))))
    }
}

/// Observes the request's whole time when its answer's body is done (or dropped).
struct Observed {
    histogram: Histogram,
    started: Instant,
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

/// The method as OpenTelemetry labels it: a known method, else `_OTHER`.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH, Method::HEAD, Method::OPTIONS]
        .iter()
        .find(|m| *m == method)
        .map_or("_OTHER", |m| match *m {
            Method::GET => "GET",
            Method::POST => "POST",
            Method::PUT => "PUT",
            Method::DELETE => "DELETE",
            Method::PATCH => "PATCH",
            Method::HEAD => "HEAD",
            _ => "OPTIONS",
        })
}
