//! Traces in the OpenTelemetry model, exported over OTLP/HTTP with JSON bodies.
//!
//! A span per job (from enqueue to its terminal state) and a child span per attempt, with the
//! HTTP semantic-convention attributes and Redial's own (`redial.*`). A job whose request carries
//! a W3C `traceparent` (given at enqueue) belongs to that trace, its span a child of the caller's;
//! otherwise its trace id is derived from the job id, so every node and every attempt agree on it
//! without storing anything. Each outbound request carries its attempt's context.
//!
//! Configured by the standard environment variables; off unless an OTLP endpoint is set, and then
//! nothing of it runs (`Option<Arc<Tracer>>` is `None`). Spans go to a bounded queue and are
//! exported in batches by a background task; when the queue is full, spans are dropped and
//! counted, never waited for.
//!
//! Over 600 lines: the span model, its sampling and the OTLP exporter that writes exactly that
//! model (with its bounded queue and retries), read together.

use redial_policy::Timestamp;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl AttrValue {
    fn to_json(&self) -> Value {
        match self {
            AttrValue::Str(s) => json!({ "stringValue": s }),
            // OTLP/JSON writes 64-bit integers as strings.
            AttrValue::Int(i) => json!({ "intValue": i.to_string() }),
            AttrValue::Bool(b) => json!({ "boolValue": b }),
        }
    }
}

/// Span kinds as OTLP numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Client = 3,
}

/// A finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanData {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start: Timestamp,
    pub end: Timestamp,
    pub attributes: Vec<(&'static str, AttrValue)>,
    /// An error status and its message; `None` is unset (success).
    pub error: Option<String>,
}

impl SpanData {
    fn to_json(&self) -> Value {
        let nanos = |t: Timestamp| (i128::from(t.as_unix_millis()) * 1_000_000).to_string();
        let mut v = json!({
            "traceId": hex(&self.trace_id),
            "spanId": hex(&self.span_id),
            "name": self.name,
            "kind": self.kind as i32,
            "startTimeUnixNano": nanos(self.start),
            "endTimeUnixNano": nanos(self.end),
            "attributes": self.attributes.iter().map(|(k, v)| json!({ "key": k, "value": v.to_json() })).collect::<Vec<_>>(),
            "status": match &self.error {
                Some(m) => json!({ "code": 2, "message": m }),
                None => json!({ "code": 0 }),
            },
        });
        if let Some(p) = self.parent_span_id {
            v["parentSpanId"] = json!(hex(&p));
        }
        v
    }
}

/// A job's place in a trace: its trace, its own span, and the caller's span above it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobContext {
    pub trace_id: [u8; 16],
    pub job_span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    /// The caller's sampling decision (its `traceparent` flags), when there is a caller.
    pub caller_sampled: Option<bool>,
}

impl JobContext {
    /// From the job's `traceparent` request header when it has a valid one, else derived from
    /// the job id (the same on every node).
    pub fn of(job_id: &str, traceparent: Option<&str>) -> JobContext {
        let job_span_id = {
            let h = fnv(job_id.as_bytes(), 0x5eed_0001);
            h.to_be_bytes()
        };
        match traceparent.and_then(parse_traceparent) {
            Some((trace_id, parent, sampled)) => JobContext {
                trace_id,
                job_span_id,
                parent_span_id: Some(parent),
                caller_sampled: Some(sampled),
            },
            None => {
                let mut trace_id = [0u8; 16];
                trace_id[..8].copy_from_slice(&fnv(job_id.as_bytes(), 0x5eed_0002).to_be_bytes());
                trace_id[8..].copy_from_slice(&fnv(job_id.as_bytes(), 0x5eed_0003).to_be_bytes());
                JobContext {
                    trace_id,
                    job_span_id,
                    parent_span_id: None,
                    caller_sampled: None,
                }
            }
        }
    }

    /// The `traceparent` an attempt's request carries: this trace, the attempt's span, and
    /// whether it is sampled.
    pub fn traceparent(&self, attempt_span_id: [u8; 8], sampled: bool) -> String {
        format!(
            "00-{}-{}-{}",
            hex(&self.trace_id),
            hex(&attempt_span_id),
            if sampled { "01" } else { "00" }
        )
    }
}

/// Parses a W3C `traceparent` (version 00): the trace id, the parent span id and the sampled
/// flag. Invalid or all-zero ids are refused.
pub fn parse_traceparent(v: &str) -> Option<([u8; 16], [u8; 8], bool)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    if parts.len() < 4 || parts[0].len() != 2 || parts[0] == "ff" {
        return None;
    }
    if parts[0] == "00" && parts.len() != 4 {
        return None;
    }
    let trace: [u8; 16] = unhex(parts[1])?.try_into().ok()?;
    let span: [u8; 8] = unhex(parts[2])?.try_into().ok()?;
    let flags = match unhex(parts[3]).as_deref() {
        Some([f]) => *f,
        _ => return None,
    };
    if trace == [0; 16] || span == [0; 8] {
        return None;
    }
    Some((trace, span, flags & 1 == 1))
}

fn fnv(bytes: &[u8], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // A final mix so that similar ids spread.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    if h == 0 {
        1
    } else {
        h
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2)
        || !s
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Which jobs are traced (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`). The decision is
/// per job, from its trace id, so every attempt and every node agrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    /// The share of jobs traced, 0.0 to 1.0 (1.0: always on, 0.0: always off).
    pub ratio: f64,
    /// A job whose caller sent a `traceparent` follows the caller's decision.
    pub parent_based: bool,
}

impl Default for Sampler {
    /// `parentbased_always_on`, the standard default.
    fn default() -> Self {
        Sampler {
            ratio: 1.0,
            parent_based: true,
        }
    }
}

impl Sampler {
    pub fn sampled(&self, ctx: &JobContext) -> bool {
        if let (true, Some(caller)) = (self.parent_based, ctx.caller_sampled) {
            return caller;
        }
        if self.ratio >= 1.0 {
            return true;
        }
        if self.ratio <= 0.0 {
            return false;
        }
        // The trace id's last 8 bytes as a fraction, as the standard ratio sampler does.
        let mut low = [0u8; 8];
        low.copy_from_slice(&ctx.trace_id[8..]);
        (u64::from_be_bytes(low) >> 1) < (self.ratio * (1u64 << 63) as f64) as u64
    }
}

/// Where and how to export, from the standard environment variables.
#[derive(Clone, Debug, PartialEq)]
pub struct OtlpConfig {
    /// The full traces URL (`.../v1/traces`).
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    pub resource: Vec<(String, String)>,
    pub export_interval: Duration,
    pub max_queue: usize,
    pub timeout: Duration,
    pub sampler: Sampler,
}

impl OtlpConfig {
    /// Reads `OTEL_*` from `env`. `Ok(None)`: tracing is off (no endpoint set, the exporter set
    /// to `none`, or the SDK disabled). An error names the variable and what it accepts.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<OtlpConfig>, String> {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let exporter = var("OTEL_TRACES_EXPORTER").map(|v| v.trim().to_ascii_lowercase());
        match exporter.as_deref() {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(format!(
                    "OTEL_TRACES_EXPORTER={other}: Redial exports traces over OTLP only; use otlp or none"
                ))
            }
        }
        let endpoint = match (
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            var("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(e), _) => e.trim().to_owned(),
            (None, Some(base)) => format!("{}/v1/traces", base.trim().trim_end_matches('/')),
            (None, None) if exporter.is_some() => "http://localhost:4318/v1/traces".to_owned(),
            (None, None) => return Ok(None),
        };
        let parsed = url::Url::parse(&endpoint)
            .map_err(|e| format!("OTLP endpoint {endpoint:?} is not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("OTLP endpoint {endpoint:?} must be http or https"));
        }
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .map(|p| p.trim().to_ascii_lowercase());
        if let Some(p) = protocol.filter(|p| p != "http/json") {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={p}: Redial exports OTLP over HTTP with JSON bodies; set it to http/json (collectors accept it on their HTTP port, 4318 by default)"
            ));
        }
        let pairs = key_values;
        let mut headers = pairs(
            var("OTEL_EXPORTER_OTLP_HEADERS"),
            "OTEL_EXPORTER_OTLP_HEADERS",
        )?;
        headers.extend(pairs(
            var("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        )?);
        let resource = pairs(var("OTEL_RESOURCE_ATTRIBUTES"), "OTEL_RESOURCE_ATTRIBUTES")?;
        let service_name = var("OTEL_SERVICE_NAME")
            .map(|s| s.trim().to_owned())
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "redial".to_owned());
        let millis = |k: &str, default: u64| -> Result<u64, String> {
            match var(k) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse()
                    .map_err(|_| format!("{k}={v}: expected a number of milliseconds")),
            }
        };
        let sampler = sampler(
            var("OTEL_TRACES_SAMPLER").map(|s| s.trim().to_ascii_lowercase()),
            var("OTEL_TRACES_SAMPLER_ARG"),
        )?;
        Ok(Some(OtlpConfig {
            sampler,
            endpoint,
            headers,
            service_name,
            resource,
            export_interval: Duration::from_millis(millis("OTEL_BSP_SCHEDULE_DELAY", 5000)?.max(1)),
            max_queue: millis("OTEL_BSP_MAX_QUEUE_SIZE", 2048)?.max(1) as usize,
            timeout: Duration::from_millis(
                millis(
                    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                    millis("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)?,
                )?
                .max(1),
            ),
        }))
    }
}

/// `key=value,key=value` (W3C baggage style, percent-encoded), as OTEL variables list them.
fn key_values(v: Option<String>, what: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in v.iter().flat_map(|v| v.split(',')) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{what}: {item:?} is not key=value"))?;
        out.push((decode(k.trim()), decode(v.trim())));
    }
    Ok(out)
}

/// `OTEL_TRACES_SAMPLER` and its argument.
fn sampler(name: Option<String>, arg: Option<String>) -> Result<Sampler, String> {
    let ratio_arg = || -> Result<f64, String> {
        match &arg {
            None => Ok(1.0),
            Some(a) => a
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| {
                    format!("OTEL_TRACES_SAMPLER_ARG={a}: expected a ratio from 0 to 1")
                }),
        }
    };
    let Some(name) = name else {
        return Ok(Sampler::default());
    };
    let (parent_based, ratio) = match name.as_str() {
        "always_on" => (false, 1.0),
        "always_off" => (false, 0.0),
        "traceidratio" => (false, ratio_arg()?),
        "parentbased_always_on" => (true, 1.0),
        "parentbased_always_off" => (true, 0.0),
        "parentbased_traceidratio" => (true, ratio_arg()?),
        other => {
            return Err(format!(
                "OTEL_TRACES_SAMPLER={other}: use always_on, always_off, traceidratio or their parentbased_ forms"
            ))
        }
    };
    Ok(Sampler {
        ratio,
        parent_based,
    })
}

/// Percent-decoding for the W3C baggage-style lists OTEL variables use.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The span exporter: a bounded queue and a background task that posts batches.
#[derive(Debug)]
pub struct Tracer {
    sampler: Sampler,
    tx: mpsc::Sender<SpanData>,
    dropped: AtomicU64,
    next_id: AtomicU64,
    progress: std::sync::Arc<Progress>,
}

/// What the exporter has done, for [`Tracer::flush`].
#[derive(Debug, Default)]
struct Progress {
    /// Spans queued, and spans the exporter finished with (sent or given up on).
    queued: AtomicU64,
    finished: AtomicU64,
    /// Asks the exporter to send what it holds now.
    now: tokio::sync::Notify,
}

impl Tracer {
    /// Starts the export task (call inside a Tokio runtime).
    pub fn start(config: OtlpConfig) -> Tracer {
        let (tx, rx) = mpsc::channel(config.max_queue);
        let sampler = config.sampler;
        let progress = std::sync::Arc::new(Progress::default());
        tokio::spawn(export_loop(config, rx, progress.clone()));
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()) << 32;
        Tracer {
            sampler,
            tx,
            dropped: AtomicU64::new(0),
            next_id: AtomicU64::new(seed | 1),
            progress,
        }
    }

    /// A fresh span id (unique within the process, random-looking across processes).
    pub fn span_id(&self) -> [u8; 8] {
        let n = self
            .next_id
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        fnv(&n.to_le_bytes(), 0x5eed_0004).to_be_bytes()
    }

    /// Whether the job's spans are recorded.
    pub fn sampled(&self, ctx: &JobContext) -> bool {
        self.sampler.sampled(ctx)
    }

    /// Queues a finished span; drops it (and counts) when the queue is full.
    pub fn record(&self, span: SpanData) {
        if self.tx.try_send(span).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            self.progress.queued.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends every queued span now and waits until the exporter is done with them, or `limit`
    /// passed (for a graceful stop). Returns whether everything was sent.
    pub async fn flush(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let queued = self.progress.queued.load(Ordering::Relaxed);
            if self.progress.finished.load(Ordering::Relaxed) >= queued {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            self.progress.now.notify_one();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

async fn export_loop(
    config: OtlpConfig,
    mut rx: mpsc::Receiver<SpanData>,
    progress: std::sync::Arc<Progress>,
) {
    let http = match reqwest::Client::builder()
        .timeout(config.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the OTLP client; traces are off");
            return;
        }
    };
    let mut resource =
        vec![json!({ "key": "service.name", "value": { "stringValue": config.service_name } })];
    for (k, v) in config.resource.iter().filter(|(k, _)| k != "service.name") {
        resource.push(json!({ "key": k, "value": { "stringValue": v } }));
    }
    let mut batch: Vec<SpanData> = Vec::new();
    loop {
        let deadline = tokio::time::sleep(config.export_interval);
        tokio::pin!(deadline);
        let closed = loop {
            tokio::select! {
                s = rx.recv() => match s {
                    Some(s) => {
                        batch.push(s);
                        if batch.len() >= 512 {
                            break false;
                        }
                    }
                    None => break true,
                },
                _ = &mut deadline => break false,
                _ = progress.now.notified() => {
                    // Take what is queued without waiting, then send.
                    while let Ok(s) = rx.try_recv() {
                        batch.push(s);
                    }
                    break false;
                }
            }
        };
        if !batch.is_empty() {
            send_batch(&http, &config, &resource, &batch).await;
            progress
                .finished
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            batch.clear();
        }
        if closed {
            return;
        }
    }
}

/// One OTLP/JSON export request; a refusal or a failure is logged, and the spans are dropped.
async fn send_batch(
    http: &reqwest::Client,
    config: &OtlpConfig,
    resource: &[Value],
    batch: &[SpanData],
) {
    let body = json!({
        "resourceSpans": [{
            "resource": { "attributes": resource },
            "scopeSpans": [{
                "scope": { "name": "redial", "version": env!("CARGO_PKG_VERSION") },
                "spans": batch.iter().map(SpanData::to_json).collect::<Vec<_>>(),
            }],
        }],
    });
    let mut req = http
        .post(&config.endpoint)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in &config.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => tracing::warn!(
            status = r.status().as_u16(),
            spans = batch.len(),
            "the OTLP endpoint refused spans"
        ),
        Err(e) => {
            tracing::warn!(error = %e.without_url(), spans = batch.len(), "cannot reach the OTLP endpoint; spans dropped")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(OtlpConfig::from_env(env(&[])), Ok(None));
        assert_eq!(
            OtlpConfig::from_env(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_SDK_DISABLED", "true")
            ])),
            Ok(None)
        );
        assert_eq!(
            OtlpConfig::from_env(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_TRACES_EXPORTER", "none")
            ])),
            Ok(None)
        );
        let c = OtlpConfig::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20abc, x-tenant=t1",
            ),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
            ("OTEL_SERVICE_NAME", "payments-redial"),
        ]))
        .expect("valid")
        .expect("on");
        assert_eq!(c.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(
            c.headers,
            vec![
                ("authorization".to_owned(), "Bearer abc".to_owned()),
                ("x-tenant".to_owned(), "t1".to_owned())
            ]
        );
        assert_eq!(c.service_name, "payments-redial");
        let err = OtlpConfig::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]))
        .expect_err("grpc is refused");
        assert!(err.contains("http/json"), "{err}");
        assert!(OtlpConfig::from_env(env(&[("OTEL_TRACES_EXPORTER", "zipkin")])).is_err());
    }

    #[tokio::test]
    async fn flush_sends_what_is_queued_without_waiting_for_the_interval() {
        let rx = redial_test_receiver::Receiver::start().await;
        let tracer = Tracer::start(OtlpConfig {
            endpoint: rx.url("/v1/traces"),
            headers: vec![("x-tenant".into(), "t1".into())],
            service_name: "test".into(),
            resource: vec![],
            export_interval: Duration::from_secs(3600),
            max_queue: 16,
            timeout: Duration::from_secs(5),
            sampler: Sampler::default(),
        });
        let ctx = JobContext::of("job-1", None);
        for n in 0..3u8 {
            tracer.record(SpanData {
                trace_id: ctx.trace_id,
                span_id: [n + 1; 8],
                parent_span_id: Some(ctx.job_span_id),
                name: "POST api".into(),
                kind: SpanKind::Client,
                start: Timestamp::from_unix_millis(1_000),
                end: Timestamp::from_unix_millis(1_250),
                attributes: vec![("redial.attempt", AttrValue::Int(i64::from(n) + 1))],
                error: None,
            });
        }
        assert!(tracer.flush(Duration::from_secs(10)).await, "flushed");
        let got = rx.received("/v1/traces");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].header("x-tenant"), Some("t1"));
        let body: Value = serde_json::from_str(&got[0].body).expect("JSON");
        let spans = &body["resourceSpans"][0]["scopeSpans"][0]["spans"];
        assert_eq!(spans.as_array().map(Vec::len), Some(3));
        assert_eq!(spans[0]["startTimeUnixNano"], "1000000000");
        assert_eq!(spans[0]["attributes"][0]["value"]["intValue"], "1");
        assert_eq!(spans[0]["kind"], 3);
        // Nothing queued: flushing again is immediate.
        assert!(tracer.flush(Duration::from_millis(1)).await);
    }

    #[test]
    fn sampling_is_per_job_and_follows_the_caller() {
        let s = |v: &str, arg: Option<&str>| {
            let mut pairs = vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_TRACES_SAMPLER", v),
            ];
            if let Some(a) = arg {
                pairs.push(("OTEL_TRACES_SAMPLER_ARG", a));
            }
            OtlpConfig::from_env(env(&pairs)).map(|c| c.map(|c| c.sampler))
        };
        let half = s("parentbased_traceidratio", Some("0.5"))
            .expect("valid")
            .expect("on");
        let kept = (0..2000)
            .filter(|n| half.sampled(&JobContext::of(&format!("job-{n}"), None)))
            .count();
        assert!((800..1200).contains(&kept), "{kept} of 2000 kept at 0.5");
        // Every attempt (and node) agrees on a job.
        let ctx = JobContext::of("job-7", None);
        assert_eq!(
            half.sampled(&ctx),
            half.sampled(&JobContext::of("job-7", None))
        );
        // The caller's decision wins when parent-based.
        let not = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let yes = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let on = Sampler::default();
        assert!(!on.sampled(&JobContext::of("j", Some(not))));
        assert!(on.sampled(&JobContext::of("j", Some(yes))));
        let off = s("always_off", None).expect("valid").expect("on");
        assert!(!off.sampled(&JobContext::of("j", Some(yes))));
        assert!(s("traceidratio", Some("2")).is_err());
        assert!(s("jaeger_remote", None).is_err());
    }

    #[test]
    fn traceparent_round_trips_and_bad_ones_are_ignored() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let (trace, span, sampled) = parse_traceparent(tp).expect("valid");
        assert!(sampled);
        assert_eq!(hex(&trace), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&span), "00f067aa0ba902b7");
        let ctx = JobContext::of("job-1", Some(tp));
        assert_eq!(ctx.trace_id, trace);
        assert_eq!(ctx.parent_span_id, Some(span));
        assert_eq!(
            ctx.traceparent([1; 8], true),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0101010101010101-01"
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?}");
        }
        // Without one, every node derives the same trace from the job id.
        assert_eq!(
            JobContext::of("job-1", None),
            JobContext::of("job-1", Some("junk"))
        );
        assert_ne!(
            JobContext::of("job-1", None).trace_id,
            JobContext::of("job-2", None).trace_id
        );
    }
}
