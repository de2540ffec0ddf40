package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// instruments are the semantic-convention messaging metrics.
type instruments struct {
	processDuration metric.Float64Histogram
	consumedCount   metric.Int64Counter
	sentCount       metric.Int64Counter
}

func newInstruments(m metric.Meter) *instruments {
	// The API returns a no-op instrument with any error, so the errors are not fatal.
	pd, _ := m.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a job's work took, per attempt."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300))
	cc, _ := m.Int64Counter("messaging.client.consumed.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Messages the worker was handed."))
	sc, _ := m.Int64Counter("messaging.client.sent.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Jobs the producer sent (or tried to send)."))
	return &instruments{processDuration: pd, consumedCount: cc, sentCount: sc}
}

func (m *instruments) consumedEnabled(ctx context.Context) bool {
	return m.consumedCount.Enabled(ctx) || m.processDuration.Enabled(ctx)
}

func (m *instruments) consumed(ctx context.Context, queue string, o *worker.Outcome, outcome string) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemAWSSQS,
		semconv.MessagingDestinationName(queue),
		semconv.MessagingOperationName("process"),
		AttrJobKind.String(o.Kind),
		AttrJobOutcome.String(outcome),
	}
	if errorOutcome(outcome) {
		attrs = append(attrs, semconv.ErrorTypeKey.String(outcome))
	}
	set := metric.WithAttributes(attrs...)
	m.consumedCount.Add(ctx, 1, set)
	if o.Ran {
		m.processDuration.Record(ctx, o.Duration.Seconds(), set)
	}
}

// sentMessages counts a call's jobs by kind: sent (to SQS, or handed to the scheduler) and failed,
// with error.type on failures.
func (m *instruments) sentMessages(ctx context.Context, queue string, call producer.Call, results []producer.Result) {
	if !m.sentCount.Enabled(ctx) {
		return
	}
	type key struct{ kind, errType string }
	counts := map[key]int64{}
	for i := range results {
		r := &results[i]
		kind := r.Kind
		if kind == "" {
			kind = "_OTHER" // a job rejected before its kind was known
		}
		switch {
		case r.Err != nil:
			counts[key{kind, errorType(r.Err)}]++
		case r.MessageID != "" || r.Schedule != "":
			counts[key{kind, ""}]++
		}
	}
	for k, n := range counts {
		attrs := []attribute.KeyValue{
			semconv.MessagingSystemAWSSQS,
			semconv.MessagingDestinationName(queue),
			semconv.MessagingOperationName("send"),
			AttrOperation.String(call.Operation),
			AttrJobKind.String(k.kind),
		}
		if k.errType != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(k.errType))
		}
		m.sentCount.Add(ctx, n, metric.WithAttributes(attrs...))
	}
}
