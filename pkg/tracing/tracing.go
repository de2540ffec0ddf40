// Package tracing follows a job with OpenTelemetry: a PRODUCER span for every call that enqueues
// it, and a CONSUMER span for every attempt, linked to the producer's span, with the idempotency
// store's claim and finish as child spans and the outcome (succeeded, retried, dead-lettered
// with its reason, skipped as a duplicate, deferred, abandoned, not run) as attributes.
//
// It depends on the OpenTelemetry API only (go.opentelemetry.io/otel, …/trace, …/metric): bring
// your own SDK and exporter, or none (the global providers are no-ops until one is set), and a
// program that does not import this package downloads none of it.
//
//	tr := tracing.New(tracing.Config{}) // the global TracerProvider and MeterProvider
//	prod, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: url, Observer: tr.Producer()})
//	h, err := worker.New(worker.Config{Registry: reg, SQS: sqsClient, Observer: tr.Worker()})
//
// Spans follow OpenTelemetry's messaging conventions for SQS: the producer's span is
// "send <queue>" (kind PRODUCER; "create <queue>" for producer.Prepare, which only builds a job),
// with messaging.system=aws_sqs, messaging.operation.type, messaging.destination.name,
// messaging.message.id or messaging.batch.message_count, and the job's kind and id. Its context
// goes into the envelope's meta.traceparent (W3C), and, with Config.AWSTracePropagator (such as
// [XRayPropagator]), into the message's AWSTraceHeader system attribute, which X-Ray reads.
//
// The worker's span is "process <queue>" (kind CONSUMER), a child of the invocation's span when
// the handler's context has one (otellambda, or a poller's span), and *linked* to the producer's
// span rather than parented by it: a job may run hours after it was enqueued, and one batch
// holds jobs of many producers. The link comes from meta.traceparent, else from the
// AWSTraceHeader (through Config.AWSTracePropagator); a malformed value is ignored. Its
// attributes: the job's kind, attempt and max attempts, outcome, dead-letter reason, FIFO group,
// and the job and message ids (on spans only, never on metrics). A failure, a dead letter, an
// abandoned job and a panic set the span's status to Error and record the error.
//
// Metrics (with Config.MeterProvider, or the global one): messaging.process.duration,
// messaging.client.consumed.messages and messaging.client.sent.messages, with the queue, the
// job's kind and the outcome as attributes; never a job id.
package tracing

import (
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/sqsworker/sqsworker/pkg/tracing"

// Attribute keys of sqsworker's own (the rest are OpenTelemetry's messaging conventions).
const (
	AttrJobKind        = attribute.Key("sqsworker.job.kind")
	AttrJobID          = attribute.Key("sqsworker.job.id")
	AttrJobKey         = attribute.Key("sqsworker.job.key")
	AttrJobAttempt     = attribute.Key("sqsworker.job.attempt")
	AttrJobMaxAttempts = attribute.Key("sqsworker.job.max_attempts")
	AttrJobOutcome     = attribute.Key("sqsworker.job.outcome")
	AttrJobReason      = attribute.Key("sqsworker.job.dead_letter_reason")
	AttrJobGroup       = attribute.Key("sqsworker.job.group")
	AttrOperation      = attribute.Key("sqsworker.producer.operation")
)

// Outcomes, as the span attribute sqsworker.job.outcome and the metrics' outcome attribute
// report them.
const (
	OutcomeSucceeded        = "succeeded"
	OutcomeRetried          = "retried"
	OutcomeDeadLettered     = "dead_lettered"
	OutcomeSkippedDuplicate = "skipped_duplicate"
	OutcomeSkippedCancelled = "skipped_cancelled" // its record says cancelled
	OutcomeDeferred         = "deferred"
	OutcomeAbandoned        = "abandoned"
	OutcomeNotRun           = "not_run"
)

// Config configures [New]. The zero value uses the global providers and no X-Ray header.
type Config struct {
	// TracerProvider makes the tracer. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// DisableMetrics records no metrics (spans only). Defaults to false.
	DisableMetrics bool
	// AWSTracePropagator, when set, writes the producer span's context into the SQS
	// AWSTraceHeader system attribute and reads it back on the worker for a link when the
	// envelope has no traceparent: a propagator that uses the "X-Amzn-Trace-Id" header, such as
	// [XRayPropagator]. Defaults to nil: the AWSTraceHeader is neither written nor read.
	AWSTracePropagator propagation.TextMapPropagator
}

// Tracing makes the producer and worker observers. Create it with New; it is safe for
// concurrent use.
type Tracing struct {
	tracer trace.Tracer
	xray   propagation.TextMapPropagator
	m      *instruments // nil when metrics are disabled
	names  atomic.Pointer[spanNames]
}

// spanNames caches the span names of the last queue seen (a worker serves one queue).
type spanNames struct {
	source, queue, process, send, create string
}

// namesFor returns the names for a queue URL or ARN.
func (t *Tracing) namesFor(source string) *spanNames {
	if n := t.names.Load(); n != nil && n.source == source {
		return n
	}
	q := queueName(source)
	n := &spanNames{source: source, queue: q, process: "process " + q, send: "send " + q, create: "create " + q}
	t.names.Store(n)
	return n
}

// New returns a Tracing configured by cfg.
func New(cfg Config) *Tracing {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &Tracing{tracer: tp.Tracer(ScopeName), xray: cfg.AWSTracePropagator}
	if !cfg.DisableMetrics {
		mp := cfg.MeterProvider
		if mp == nil {
			mp = otel.GetMeterProvider()
		}
		t.m = newInstruments(mp.Meter(ScopeName))
	}
	return t
}

// w3c is the W3C trace-context propagator, for meta.traceparent.
var w3c = propagation.TraceContext{}

// xrayHeader is the carrier key of the X-Ray header.
const xrayHeader = "X-Amzn-Trace-Id"

// queueName returns the last element of a queue URL or ARN.
func queueName(s string) string {
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// carrier is a one-header propagation.TextMapCarrier without a map.
type carrier struct{ key, value string }

func (c *carrier) Get(key string) string {
	if strings.EqualFold(key, c.key) {
		return c.value
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	if strings.EqualFold(key, c.key) {
		c.value = value
	}
}

func (c *carrier) Keys() []string { return []string{c.key} }
