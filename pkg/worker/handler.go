package worker

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/jsonscan"
	"github.com/sqsworker/sqsworker/internal/sqsevent"
)

// Handler handles SQS batches. Create it with [New]; it is safe for concurrent use.
//
// Use it with lambda.Start(h.HandleSQS), or as a lambda.Handler (lambda.StartHandler(h)), which
// decodes the invoke payload itself and is several times faster. A poller.Poller calls its
// HandleMessages, which takes the messages without a Lambda event.
type Handler struct {
	cfg       Config
	recorders []deadRecorder // the middleware that implement DeadLetterRecorder

	mu           sync.Mutex
	queueURL     map[string]string // event source ARN → queue URL
	dlqURL       map[string]string // event source ARN → DLQ URL
	foreignQueue sync.Once         // the warning of a record from a queue other than Config.QueueURL

	misrouted sync.Map // "kind queueARN" → true, once logged (Config.Routing)
}

// New validates cfg, fills in its defaults and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, queueURL: map[string]string{}, dlqURL: map[string]string{}}
	for i, m := range cfg.Middleware {
		if r, ok := m.(DeadLetterRecorder); ok {
			h.recorders = append(h.recorders, deadRecorder{r: r, index: i})
		}
	}
	return h, nil
}

// deadRecorder is a middleware that records dead letters, and its place in Config.Middleware.
type deadRecorder struct {
	r     DeadLetterRecorder
	index int
}

// HandleSQS handles one batch and returns the messages to retry. It returns an error only when
// nothing could be judged; job failures are item failures.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	recs := sqsevent.FromEvent(ev, make([]sqsevent.Record, 0, len(ev.Records)))
	failed := h.handle(ctx, [][]sqsevent.Record{recs})
	resp := events.SQSEventResponse{BatchItemFailures: make([]events.SQSBatchItemFailure, 0, len(failed))}
	for _, id := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp, nil
}

// HandleMessages handles one batch as ReceiveMessage returned it from the queue queueARN in
// region, and returns the ids of the messages to retry: what HandleSQS does with the Lambda event
// built of msgs, without building it. pkg/poller calls it (see poller.MessageHandler), so a type
// that embeds a *Handler and wraps its HandleSQS must wrap HandleMessages too. The error is
// always nil: job failures are item failures.
func (h *Handler) HandleMessages(ctx context.Context, queueARN, region string, msgs []sqstypes.Message) ([]string, error) {
	recs := make([]sqsevent.Record, len(msgs))
	for i := range msgs {
		sqsevent.FromMessage(&msgs[i], queueARN, region, &recs[i])
	}
	return h.handle(ctx, [][]sqsevent.Record{recs}), nil
}

// Invoke implements aws-lambda-go's lambda.Handler: it decodes the SQS event payload directly
// (no reflection) and returns the partial batch response as JSON. A large batch is decoded (from
// 256 KB of payload) and its jobs prepared (from 512 records) on up to GOMAXPROCS goroutines.
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	segs, err := sqsevent.DecodeSegments(payload, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, fmt.Errorf("worker: decode SQS event: %w", err)
	}
	failed := h.handle(ctx, segs)
	return appendResponse(make([]byte, 0, 24+len(failed)*(len(`{"itemIdentifier":""},`)+36)), failed), nil
}

// appendResponse appends {"batchItemFailures":[{"itemIdentifier":"…"},…]} to dst. Message ids
// are UUIDs (no characters that need escaping), but escape anyway for safety.
func appendResponse(dst []byte, failed []string) []byte {
	dst = append(dst, `{"batchItemFailures":[`...)
	for i, id := range failed {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"itemIdentifier":`...)
		dst = jsonscan.AppendString(dst, id)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}
