package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Worker returns the worker's observer, for worker.Config.Observer: a CONSUMER span per message.
func (t *Tracing) Worker() worker.Observer { return (*consumer)(t) }

type consumer Tracing

// Start implements worker.Observer.
func (c *consumer) Start(ctx context.Context, info *jobs.Info) context.Context {
	n := (*Tracing)(c).namesFor(info.QueueARN)
	ctx, span := c.tracer.Start(ctx, n.process, consumerKind)
	if !span.IsRecording() {
		// Unsampled (or a no-op tracer): no attributes to build, but the trace context still goes
		// on, so that jobs this one enqueues keep the sampling decision.
		if sc := span.SpanContext(); sc.IsValid() {
			ctx = jobs.WithTraceParent(ctx, traceparent(sc))
		}
		return ctx
	}
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		semconv.MessagingSystemAWSSQS,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(n.queue),
		semconv.MessagingMessageID(info.MessageID),
	)
	if info.Kind != "" {
		attrs = append(attrs, AttrJobKind.String(info.Kind), AttrJobID.String(info.ID))
	}
	if info.Key != "" && info.Key != info.ID {
		attrs = append(attrs, AttrJobKey.String(info.Key))
	}
	if info.MaxAttempts > 0 {
		attrs = append(attrs, AttrJobMaxAttempts.Int(info.MaxAttempts))
	}
	if info.GroupID != "" {
		attrs = append(attrs, AttrJobGroup.String(info.GroupID))
	}
	span.SetAttributes(attrs...)
	if link, ok := c.producerLink(info); ok {
		span.AddLink(link)
	}
	// Jobs enqueued by this job continue its trace: their producer spans are this span's
	// children, and their envelopes carry this span's context.
	if tp := traceparent(span.SpanContext()); tp != "" {
		ctx = jobs.WithTraceParent(ctx, tp)
	}
	return jobs.WithStepTracer(ctx, (*steps)(c))
}

var consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)

// producerLink returns the link to the span that enqueued the job: meta.traceparent, else the
// AWSTraceHeader. A malformed value gives no link.
func (c *consumer) producerLink(info *jobs.Info) (trace.Link, bool) {
	var sc trace.SpanContext
	if info.TraceParent != "" {
		sc = trace.SpanContextFromContext(w3c.Extract(context.Background(), &carrier{key: "traceparent", value: info.TraceParent}))
	}
	if !sc.IsValid() && info.AWSTraceHeader != "" && c.xray != nil {
		sc = trace.SpanContextFromContext(c.xray.Extract(context.Background(), &carrier{key: xrayHeader, value: info.AWSTraceHeader}))
	}
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// Settled implements worker.Observer.
func (c *consumer) Settled(ctx context.Context, out worker.Outcome) {
	o := &out
	outcome := outcomeOf(o)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(AttrJobAttempt.Int(o.Attempt), AttrJobOutcome.String(outcome))
		if o.Reason != "" {
			span.SetAttributes(AttrJobReason.String(o.Reason))
		}
		if o.JobID != "" && o.Kind != "" {
			span.SetAttributes(AttrJobKind.String(o.Kind), AttrJobID.String(o.JobID)) // known late for a started-at-settle message
		}
		switch {
		case o.Outcome == worker.OutcomeDeadLettered && o.SendErr == nil:
			span.AddEvent("sqsworker.dead_lettered", trace.WithAttributes(AttrJobReason.String(o.Reason)))
		case o.Outcome == worker.OutcomeRetry && !o.Failed && o.SendErr == nil:
			span.AddEvent("sqsworker.resent") // a long retry: a copy was sent, the original acknowledged
		}
		if errorOutcome(outcome) && o.Err != nil {
			span.RecordError(o.Err, trace.WithAttributes(panicStack(o.Err)...))
			span.SetStatus(codes.Error, o.Err.Error())
		}
		if o.SendErr != nil {
			span.AddEvent("sqsworker.send_failed", trace.WithAttributes(attribute.String("error.message", o.SendErr.Error())))
			span.SetStatus(codes.Error, "the dead-letter or re-send failed: "+o.SendErr.Error())
		}
	}
	span.End()
	if c.m != nil && c.m.consumedEnabled(ctx) {
		c.m.consumed(ctx, (*Tracing)(c).namesFor(o.QueueARN).queue, o, outcome)
	}
}

// outcomeOf maps the worker's outcome to the span's.
func outcomeOf(o *worker.Outcome) string {
	switch o.Outcome {
	case worker.OutcomeSucceeded:
		return OutcomeSucceeded
	case worker.OutcomeSkipped:
		if errors.Is(o.Err, jobs.ErrSkippedCancelled) {
			return OutcomeSkippedCancelled
		}
		return OutcomeSkippedDuplicate
	case worker.OutcomeRetry:
		return OutcomeRetried
	case worker.OutcomeDeadLettered:
		return OutcomeDeadLettered
	case worker.OutcomeDeferred:
		return OutcomeDeferred
	case worker.OutcomeAbandoned:
		return OutcomeAbandoned
	case worker.OutcomeNotRun:
		return OutcomeNotRun
	}
	return o.Outcome
}

func errorOutcome(outcome string) bool {
	return outcome == OutcomeRetried || outcome == OutcomeDeadLettered || outcome == OutcomeAbandoned
}

// panicStack returns the exception.stacktrace attribute of a panic.
func panicStack(err error) []attribute.KeyValue {
	var p *worker.PanicError
	if errors.As(err, &p) {
		return []attribute.KeyValue{semconv.ExceptionStacktrace(string(p.Stack))}
	}
	return nil
}

// traceparent formats a span context as a W3C traceparent, "" when it is not valid.
func traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	c := carrier{key: "traceparent"}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), &c)
	return c.value
}

// steps traces a middleware's steps (jobs.StartStep) as child spans of the job's span.
type steps Tracing

// StartStep implements jobs.StepTracer.
func (s *steps) StartStep(ctx context.Context, name string) (context.Context, func(error)) {
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
