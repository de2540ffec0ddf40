package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Producer returns the producer's observer, for producer.Config.Observer: a PRODUCER span per
// call, whose context goes into the jobs' envelopes.
func (t *Tracing) Producer() producer.Observer { return (*producerObserver)(t) }

type producerObserver Tracing

// Start implements producer.Observer.
func (p *producerObserver) Start(ctx context.Context, call producer.Call) context.Context {
	n := (*Tracing)(p).namesFor(call.QueueURL)
	name, op, opType := n.send, "send", semconv.MessagingOperationTypeSend
	if call.Operation == producer.OpPrepare {
		name, op, opType = n.create, "create", semconv.MessagingOperationTypeCreate
	}
	ctx, span := p.tracer.Start(ctx, name, producerKind)
	if !span.IsRecording() {
		// Unsampled: the jobs still carry the trace context (and its sampling decision).
		if sc := span.SpanContext(); sc.IsValid() {
			ctx = jobs.WithTraceParent(ctx, traceparent(sc))
			ctx = p.withAWSTrace(ctx)
		}
		return ctx
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, semconv.MessagingSystemAWSSQS, opType, semconv.MessagingOperationName(op),
		semconv.MessagingDestinationName(n.queue), AttrOperation.String(call.Operation))
	if call.Jobs > 1 {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(call.Jobs))
	}
	if call.Kind != "" {
		attrs = append(attrs, AttrJobKind.String(call.Kind))
	}
	span.SetAttributes(attrs...)
	ctx = jobs.WithTraceParent(ctx, traceparent(span.SpanContext()))
	return p.withAWSTrace(ctx)
}

// withAWSTrace adds the X-Ray header of ctx's span, with the AWSTracePropagator.
func (p *producerObserver) withAWSTrace(ctx context.Context) context.Context {
	if p.xray == nil {
		return ctx
	}
	c := carrier{key: xrayHeader}
	p.xray.Inject(ctx, &c)
	if c.value != "" {
		ctx = jobs.WithAWSTraceHeader(ctx, c.value)
	}
	return ctx
}

var producerKind = trace.WithSpanKind(trace.SpanKindProducer)

// End implements producer.Observer.
func (p *producerObserver) End(ctx context.Context, call producer.Call, results []producer.Result) {
	span := trace.SpanFromContext(ctx)
	sent, failed := 0, 0
	var firstErr error
	for i := range results {
		switch {
		case results[i].Err != nil:
			failed++
			if firstErr == nil {
				firstErr = results[i].Err
			}
		case results[i].MessageID != "" || results[i].Schedule != "":
			sent++
		}
	}
	if span.IsRecording() {
		if len(results) == 1 {
			r := &results[0]
			if r.ID != "" {
				span.SetAttributes(AttrJobID.String(r.ID))
			}
			if r.MessageID != "" {
				span.SetAttributes(semconv.MessagingMessageID(r.MessageID))
			}
			if r.Schedule != "" {
				span.AddEvent("sqsworker.scheduled", trace.WithAttributes(attribute.String("sqsworker.schedule", r.Schedule)))
			}
		}
		if firstErr != nil {
			span.RecordError(firstErr)
			msg := firstErr.Error()
			if failed > 1 {
				msg = "several jobs were not sent; the first: " + msg
			}
			span.SetStatus(codes.Error, msg)
		}
	}
	span.End()
	if p.m != nil && call.Operation != producer.OpPrepare {
		p.m.sentMessages(ctx, (*Tracing)(p).namesFor(call.QueueURL).queue, call, results)
	}
}

// errorType is the low-cardinality error.type of a failed send.
func errorType(err error) string {
	var entry *producer.EntryError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, producer.ErrInvalid):
		return "invalid"
	case errors.As(err, &entry):
		return entry.Code
	}
	return "_OTHER"
}
