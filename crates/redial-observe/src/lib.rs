//! What Redial tells about itself, apart from the runtime that tells it: spans in the
//! OpenTelemetry model and their OTLP/HTTP exporter ([`otel`]), the Prometheus metrics
//! ([`metrics`]), and the last hour's per-minute series the dashboard charts ([`series`]). The
//! engine records into them; nothing here knows of jobs' storage or the engine.

pub mod metrics;
pub mod otel;
pub mod series;
