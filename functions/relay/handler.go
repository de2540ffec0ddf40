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
		st, err := h.sweep(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(SweepResult{Mode: "sweep", Stats: st})
	}
	return nil, errors.New(`relay: unknown invocation: want a DynamoDB stream event ("Records") or {"mode":"sweep"}`)
}

// sweep drains what is due until nothing is, or the deadline nears.
func (h *handler) sweep(ctx context.Context) (outbox.Stats, error) {
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-sweepMargin))
		defer cancel()
	}
	st, err := h.relay.Drain(ctx)
	h.metrics.write(st)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		h.logger.WarnContext(ctx, "outbox sweep stopped at the deadline; the next sweep goes on", "sent", st.Sent)
		err = nil
	}
	return st, err
}

// emf writes the relay's counts as CloudWatch Embedded Metric Format documents.
type emf struct {
	mu    sync.Mutex
	w     io.Writer
	table string
	now   func() time.Time
}

func (m *emf) write(st outbox.Stats) {
	if st.Claimed == 0 {
		return
	}
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	names := []string{"OutboxClaimed", "OutboxSent", "OutboxFailed", "OutboxDead", "OutboxReleased"}
	metrics := make([]map[string]string, len(names))
	for i, n := range names {
		metrics[i] = map[string]string{"Name": n, "Unit": "Count"}
	}
	doc := map[string]any{
		"_aws": map[string]any{
			"Timestamp": now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace": "sqsworker", "Dimensions": [][]string{{"Service", "Table"}}, "Metrics": metrics,
			}},
		},
		"Service": "relay", "Table": m.table,
		"OutboxClaimed": st.Claimed, "OutboxSent": st.Sent, "OutboxFailed": st.Failed, "OutboxDead": st.Dead, "OutboxReleased": st.Released,
	}
	b, _ := json.Marshal(doc)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.w.Write(append(b, '\n'))
}
