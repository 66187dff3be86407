//! Metrics (Prometheus text at `GET /metrics`) and a tracing span per request.
//!
//! Every binding wraps each call in [`observe`], so requests are counted and timed the same
//! way whatever the wire: by method, binding and outcome (the A2A error reason, or `ok`).
//!
//! Request latency is a histogram of our own (`latency.rs`): it counts into fixed buckets as
//! it records, where the exporter's would hold every sample until the next scrape.
//!
//! The request span is at DEBUG level, unless spans are exported (OTLP), when it is at INFO:
//! a log layer formats a span's fields as it opens, and at the default `info` that cost about
//! 5% of a unary call's CPU for a context no line at `info` needed.
use std::borrow::Borrow;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::Instant;

use futures::FutureExt as _;
use metrics::Counter;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing::{Instrument, Span};

use crate::call::CallContext;
use crate::error::A2aError;
use crate::proto::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};

mod latency;

use latency::Latency;

/// The latency histogram's name (one series per binding and method).
const DURATION: &str = "a2a_request_duration_seconds";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process-wide Prometheus recorder, installed on first use.
pub fn prometheus() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // Fails only if another recorder is installed already; then that one records.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// The Prometheus exposition of every metric recorded so far: the exporter's, then the
/// latency histograms.
pub fn render() -> String {
    let handle = prometheus();
    // Folds the samples of any exporter histogram (none here today) into its buckets.
    handle.run_upkeep();
    let mut text = handle.render();
    let calls = CALLS.read().unwrap_or_else(|e| e.into_inner());
    if !calls.is_empty() {
        text.push_str(&format!("# TYPE {DURATION} histogram\n"));
    }
    for call in calls.iter() {
        let labels = format!("binding=\"{}\",method=\"{}\"", call.binding, call.method);
        call.duration.render(&mut text, DURATION, &labels);
    }
    text
}

/// The task and context a request names, for its span.
pub trait RequestIds {
    /// The task id the request is about, if any.
    fn task_id(&self) -> &str {
        ""
    }
    /// The context id the request names, if any.
    fn context_id(&self) -> &str {
        ""
    }
}

impl RequestIds for SendMessageRequest {
    fn task_id(&self) -> &str {
        self.message.as_ref().map(|m| m.task_id.as_str()).unwrap_or_default()
    }
    fn context_id(&self) -> &str {
        self.message.as_ref().map(|m| m.context_id.as_str()).unwrap_or_default()
    }
}

macro_rules! ids_by_field {
    ($($request:ty => $field:ident),* $(,)?) => {
        $(impl RequestIds for $request {
            fn task_id(&self) -> &str {
                &self.$field
            }
        })*
    };
}

ids_by_field!(
    GetTaskRequest => id,
    CancelTaskRequest => id,
    SubscribeToTaskRequest => id,
    TaskPushNotificationConfig => task_id,
    GetTaskPushNotificationConfigRequest => task_id,
    ListTaskPushNotificationConfigsRequest => task_id,
    DeleteTaskPushNotificationConfigRequest => task_id,
);

impl RequestIds for ListTasksRequest {
    fn context_id(&self) -> &str {
        &self.context_id
    }
}

impl RequestIds for GetExtendedAgentCardRequest {}

/// Runs one call inside a span (method, binding, task and context ids, W3C `traceparent`)
/// and records its count and latency. For streaming calls this measures the time to the
/// stream's start.
///
/// Synchronous up to `run` (inside the span), so that the future holds neither the request
/// nor the call: only `run`'s future, the span and the clock.
pub fn observe<C, R, T, Fut, F>(
    binding: &'static str,
    method: &'static str,
    call: C,
    request: R,
    run: F,
) -> impl Future<Output = Result<T, A2aError>> + use<C, R, T, Fut, F>
where
    C: Borrow<CallContext>,
    R: RequestIds,
    F: FnOnce(R, C) -> Fut,
    Fut: Future<Output = Result<T, A2aError>>,
{
    let span = call_span(binding, method, &request, call.borrow());
    #[cfg(feature = "otel")]
    if let Some(traceparent) = &call.borrow().traceparent {
        crate::otel::set_parent(&span, traceparent);
    }
    let started = Instant::now();
    let running = span.in_scope(|| run(request, call)).instrument(span.clone());
    // `map`, not an `async` block, which would hold `running` twice (as captured and as
    // awaited) and so double the size of every call's future.
    running.map(move |result| {
        let elapsed = started.elapsed();
        let outcome = match &result {
            Ok(_) => "ok",
            Err(error) => error.reason(),
        };
        span.in_scope(|| tracing::debug!(outcome, elapsed_ms = elapsed.as_secs_f64() * 1e3, "request"));
        let handles = call_metrics(binding, method);
        match outcome {
            "ok" => handles.ok.increment(1),
            outcome => {
                metrics::counter!("a2a_requests_total", "binding" => binding, "method" => method, "outcome" => outcome)
                    .increment(1)
            }
        }
        handles.duration.record(elapsed);
        result
    })
}

/// Whether request spans are exported: they are then at INFO level (see the module doc).
static EXPORTED: AtomicBool = AtomicBool::new(false);

/// Puts request spans at INFO level, where an exporter with the default filter sees them.
pub fn export_call_spans() {
    EXPORTED.store(true, Ordering::Relaxed);
}

/// The call's span. The ids it lacks are left out rather than recorded empty: a log layer
/// formats every recorded field when the span opens, and most calls name no task, context or
/// trace.
fn call_span(
    binding: &'static str,
    method: &'static str,
    request: &impl RequestIds,
    call: &CallContext,
) -> Span {
    // One callsite per level (a callsite's level is fixed), with the same fields.
    macro_rules! span_at {
        ($level:expr) => {
            tracing::span!(
                $level,
                "a2a",
                method,
                binding,
                task_id = tracing::field::Empty,
                context_id = tracing::field::Empty,
                traceparent = tracing::field::Empty
            )
        };
    }
    let span = match EXPORTED.load(Ordering::Relaxed) {
        true => span_at!(tracing::Level::INFO),
        false => span_at!(tracing::Level::DEBUG),
    };
    if span.is_disabled() {
        return span;
    }
    let ids = [
        ("task_id", request.task_id()),
        ("context_id", request.context_id()),
        ("traceparent", call.traceparent.as_deref().unwrap_or_default()),
    ];
    for (field, value) in ids.into_iter().filter(|(_, value)| !value.is_empty()) {
        span.record(field, value);
    }
    span
}

/// The handles of one method on one binding. Looking a metric up by name and labels costs
/// more than the rest of a request's bookkeeping, so the hot ones are looked up once.
struct CallMetrics {
    binding: &'static str,
    method: &'static str,
    ok: Counter,
    duration: Latency,
}

/// Every method and binding called so far (at most one entry each, for the life of the
/// process).
static CALLS: RwLock<Vec<&'static CallMetrics>> = RwLock::new(Vec::new());

fn call_metrics(binding: &'static str, method: &'static str) -> &'static CallMetrics {
    let find = |calls: &[&'static CallMetrics]| {
        calls.iter().copied().find(|c| c.binding == binding && c.method == method)
    };
    if let Some(found) = find(&CALLS.read().unwrap_or_else(|e| e.into_inner())) {
        return found;
    }
    let mut calls = CALLS.write().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = find(&calls) {
        return found;
    }
    prometheus();
    // At most one per method and binding, for the life of the process.
    let created: &'static CallMetrics = Box::leak(Box::new(CallMetrics {
        binding,
        method,
        ok: metrics::counter!("a2a_requests_total", "binding" => binding, "method" => method, "outcome" => "ok"),
        duration: Latency::default(),
    }));
    calls.push(created);
    created
}
