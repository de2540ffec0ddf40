package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

// sweepMargin is the time kept free before the invocation's deadline when sweeping: a pass in
// flight finishes its sends and write-back.
const sweepMargin = 5 * time.Second

// handler answers both kinds of invocation: a stream batch, or a sweep.
type handler struct {
	outbox  *dynamooutbox.Outbox
	stream  *dynamooutbox.StreamRelay
	relay   *outbox.Relay
	metrics *emf
	logger  *slog.Logger
}

// invocation is the part of a payload that says which kind it is.
type invocation struct {
	Records json.RawMessage `json:"Records"`
	Mode    string          `json:"mode"`
}

// SweepResult is the answer to a sweep.
type SweepResult struct {
	Mode string `json:"mode"`
	outbox.Stats
	// DeadJobs is how many dead jobs the outbox holds after the sweep (-1 when the count
	// failed).
	DeadJobs int `json:"dead_jobs"`
}

// Invoke implements lambda.Handler.
func (h *handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var inv invocation
	if err := json.Unmarshal(payload, &inv); err != nil {
		return nil, fmt.Errorf("relay: the payload is not JSON: %w", err)
	}
	switch {
	case inv.Records != nil:
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("relay: not a DynamoDB stream event: %w", err)
		}
		resp, err := h.stream.HandleDynamoDB(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	case inv.Mode == "sweep":
		st, dead, err := h.sweep(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(SweepResult{Mode: "sweep", Stats: st, DeadJobs: dead})
	}
	return nil, errors.New(`relay: unknown invocation: want a DynamoDB stream event ("Records") or {"mode":"sweep"}`)
}

// sweep drains what is due until nothing is, or the deadline nears, then counts the dead jobs
// (dynamooutbox.Outbox.CountDead): the gauge OutboxDeadJobs, published every sweep, is what the
// stack's dead-job alarm watches, so it stays in alarm while any job is dead, not only in the
// minute a job died. dead is -1 when the count failed (logged; no gauge then).
func (h *handler) sweep(ctx context.Context) (st outbox.Stats, dead int, err error) {
	dctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, dl.Add(-sweepMargin))
		defer cancel()
	}
	st, err = h.relay.Drain(dctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		h.logger.WarnContext(ctx, "outbox sweep stopped at the deadline; the next sweep goes on", "sent", st.Sent)
		err = nil
	}
	dead, cerr := h.outbox.CountDead(ctx)
	if cerr != nil {
		h.logger.WarnContext(ctx, "outbox sweep: counting the dead jobs failed", "error", cerr)
		dead = -1
	}
	h.metrics.write(st, dead)
	return st, dead, err
}

// emf writes the relay's counts as CloudWatch Embedded Metric Format documents.
type emf struct {
	mu    sync.Mutex
	w     io.Writer
	table string
	now   func() time.Time
}

// write writes one document: the counts of a batch or a sweep when it claimed anything, and
// with dead ≥ 0 (a sweep's count) the gauge OutboxDeadJobs, always.
func (m *emf) write(st outbox.Stats, dead int) {
	if st.Claimed == 0 && dead < 0 {
		return
	}
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	doc := map[string]any{"Service": "relay", "Table": m.table}
	var names []string
	if st.Claimed > 0 {
		names = []string{"OutboxClaimed", "OutboxSent", "OutboxFailed", "OutboxDead", "OutboxReleased", "OutboxDeferred"}
		doc["OutboxClaimed"], doc["OutboxSent"], doc["OutboxFailed"] = st.Claimed, st.Sent, st.Failed
		doc["OutboxDead"], doc["OutboxReleased"], doc["OutboxDeferred"] = st.Dead, st.Released, st.Deferred
	}
	if dead >= 0 {
		names = append(names, "OutboxDeadJobs")
		doc["OutboxDeadJobs"] = dead
	}
	metrics := make([]map[string]string, len(names))
	for i, n := range names {
		metrics[i] = map[string]string{"Name": n, "Unit": "Count"}
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": "sqsworker", "Dimensions": [][]string{{"Service", "Table"}}, "Metrics": metrics,
		}},
	}
	b, _ := json.Marshal(doc)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.w.Write(append(b, '\n'))
}
