package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// log writes the one line of a message's outcome. Successes (and skipped duplicates) log at
// Debug, so that the default level (Info) keeps them off the hot path: a JSON line per job costs
// about as much as the rest of the worker's work on it (docs/BENCHMARKS.md). Retries log at
// Warn, dead letters and failed sends at Error. The payload is never logged unless LogArgs is
// set.
func (b *batch) log(ctx context.Context, it *item, r *result) {
	level := slog.LevelDebug
	switch {
	case r.sendErr != nil, r.act == actDeadLetter:
		level = slog.LevelError
	case r.outcome == OutcomeContinued:
		level = slog.LevelInfo // a continued job is no failure
	case r.act == actRetry, r.act == actResend:
		level = slog.LevelWarn
	}
	logger := b.h.cfg.Logger
	if !logger.Enabled(ctx, level) {
		return
	}
	info := &it.info
	attempt := it.attemptOf(r) // info may still be in use by an abandoned job: read the result
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("outcome", r.outcome),
		slog.String("job_id", info.ID),
		slog.String("kind", info.Kind),
		slog.Int("attempt", attempt),
		slog.String("message_id", it.rec.MessageID),
	)
	if r.ran {
		attrs = append(attrs, slog.Duration("duration", r.duration))
	}
	if r.err != nil {
		attrs = append(attrs, slog.String("error", r.err.Error()))
		var p *PanicError
		if errors.As(r.err, &p) {
			attrs = append(attrs, slog.String("stack", string(p.Stack)))
		}
	}
	switch r.act {
	case actRetry:
		attrs = append(attrs, slog.Duration("visibility", r.visibility))
	case actDeadLetter:
		attrs = append(attrs, slog.String("reason", r.reason))
	case actResend:
		if !r.runAt.IsZero() {
			attrs = append(attrs, slog.Time("run_at", r.runAt))
		}
		if r.setContinuation {
			attrs = append(attrs, slog.Int("continuation", r.continuation))
		}
		if r.scheduled != "" {
			attrs = append(attrs, slog.String("schedule", r.scheduled))
		}
	}
	if r.sendErr != nil {
		attrs = append(attrs, slog.String("send_error", r.sendErr.Error()))
	}
	if it.pl != nil {
		attrs = append(attrs, slog.String("payload", it.pl.ptr.String()))
	}
	if info.TraceParent != "" {
		attrs = append(attrs, slog.String("traceparent", info.TraceParent))
	}
	if info.AWSTraceHeader != "" {
		attrs = append(attrs, slog.String("aws_trace_header", info.AWSTraceHeader))
	}
	if b.h.cfg.LogArgs && len(info.RawArgs) > 0 {
		attrs = append(attrs, slog.String("args", string(info.RawArgs)))
	}
	logger.LogAttrs(ctx, level, "sqsworker: job "+r.outcome, attrs...)
}

func errUnknownKind(kind string) error {
	return fmt.Errorf("no worker is registered for kind %q", kind)
}

func errBeyondAttempts(attempt, maxAttempts int) error {
	return fmt.Errorf("attempt %d is beyond max attempts %d", attempt, maxAttempts)
}

// runMalformedHook gives a body that is not an envelope to the configured hook.
func (b *batch) runMalformedHook(ctx context.Context, it *item) error {
	rec := it.rec
	attrs, err := rec.MessageAttributes()
	if err != nil {
		return err
	}
	if it.pl != nil && len(attrs) > 0 {
		// As the extended client's consumers see it: the payload, without the size attribute.
		own := make(map[string]events.SQSMessageAttribute, len(attrs))
		for name, v := range attrs {
			if !payload.IsSizeAttribute(name) {
				own[name] = v
			}
		}
		attrs = own
	}
	msg := events.SQSMessage{
		MessageId:         rec.MessageID,
		ReceiptHandle:     rec.ReceiptHandle, // a copy (prepare)
		Body:              it.body(),         // a pointer's payload, as the extended client's consumers see it
		Md5OfBody:         rec.MD5OfBody,
		MessageAttributes: attrs,
		EventSource:       "aws:sqs",
		EventSourceARN:    rec.EventSourceARN,
		AWSRegion:         rec.AWSRegion,
		Attributes:        rec.SystemAttributes(),
	}
	if err := b.h.cfg.MalformedHook(ctx, msg); err != nil {
		return fmt.Errorf("%w (malformed hook: %v)", jobs.ErrMalformed, err)
	}
	return nil
}
