package main

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/metrics"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// sourceARNKey is the context key of the invocation's event source ARN.
type sourceARNKey struct{}

// queueMetrics writes EMF metrics with the Queue dimension set to the configured queue, or else
// to the queue of the invocation's event source ARN: one recorder per queue name, made on first
// use.
type queueMetrics struct {
	fixed string // queue name from SQSWORKER_QUEUE_URL, or ""
	w     io.Writer

	mu   sync.Mutex
	recs map[string]*metrics.Recorder
}

func newQueueMetrics(queueURL string, w io.Writer) *queueMetrics {
	return &queueMetrics{fixed: metrics.QueueName(queueURL), w: w, recs: map[string]*metrics.Recorder{}}
}

// recorder returns the recorder of ctx's queue.
func (m *queueMetrics) recorder(ctx context.Context) *metrics.Recorder {
	name := m.fixed
	if name == "" {
		arn, _ := ctx.Value(sourceARNKey{}).(string)
		name = metrics.QueueName(arn)
	}
	if name == "" {
		name = metrics.DefaultQueue
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.recs[name]; r != nil {
		return r
	}
	r, err := metrics.New(metrics.Config{Writer: m.w, Queue: name})
	if err != nil { // a queue name that is not a valid dimension value
		if r = m.recs[metrics.DefaultQueue]; r == nil {
			r, _ = metrics.New(metrics.Config{Writer: m.w})
		}
	}
	m.recs[name] = r
	return r
}

// ObserveBatch is worker.Config.OnBatch.
func (m *queueMetrics) ObserveBatch(ctx context.Context, outcomes []worker.Outcome) {
	if r := m.recorder(ctx); r != nil {
		r.ObserveBatch(ctx, outcomes)
	}
}

// FinishError is idempotency.MiddlewareConfig.OnFinishError.
func (m *queueMetrics) FinishError(ctx context.Context, job *jobs.Info, err error) {
	if r := m.recorder(ctx); r != nil {
		r.FinishError(ctx, job, err)
	}
}

// sourceARN returns the first record's eventSourceARN, found without decoding the whole event
// (the worker decodes it). ARNs hold no characters JSON escapes; "" when absent.
func sourceARN(payload []byte) string {
	const field = `"eventSourceARN"`
	i := bytes.Index(payload, []byte(field))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(payload[i+len(field):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	end := bytes.IndexAny(rest[1:], "\"\\")
	if end < 0 || rest[1+end] != '"' {
		return ""
	}
	return string(rest[1 : 1+end])
}
