package flow

import (
	"context"
	"fmt"
	"strings"
)

// EventSources switches a queue's consumers that do not read the pause record: on AWS, the
// Lambda event source mappings of the queue (pkg/flow/esm implements it with the Lambda API).
type EventSources interface {
	// SetEnabled enables or disables the consumers of the queue with the given ARN and returns
	// those it found.
	SetEnabled(ctx context.Context, queueARN string, enabled bool) ([]EventSource, error)
}

// Control is what operators do with flow control: pause and resume kinds and queues, and list
// the limits with their holders. The CLI (sqsworker pause, resume, limits) and the console call
// it.
type Control struct {
	// Table is the job table's flow state. Required.
	Table *Table
	// Sources, when set, disables and enables the queue's consumers that do not read the pause
	// record: on AWS its Lambda event source mappings (esm.Switch), so that the worker function
	// stops receiving. Without it (an emulator, containers) a queue's pause is only recorded,
	// and pollers that check it (poller.Config.Paused with QueueGate) stop receiving.
	Sources EventSources
}

// QueueRef names a queue: its name (the pause record) and its ARN (its event source mappings).
type QueueRef struct {
	Name string
	ARN  string
}

// EventSource is a consumer of a queue (a Lambda event source mapping) as PauseQueue or
// ResumeQueue left it.
type EventSource struct {
	UUID        string
	FunctionARN string
	// State is the mapping's state as Lambda answered the update ("Disabling", "Enabling", …).
	State string
}

// QueueResult is what PauseQueue and ResumeQueue did.
type QueueResult struct {
	// Recorded reports the pause record changed (set, or cleared when it existed).
	Recorded bool
	// Mappings are the event source mappings updated.
	Mappings []EventSource
}

// PauseQueue pauses a queue: records the pause (pollers stop receiving from it within their
// PauseCheck), then, with Sources set, disables the queue's event source mappings (Lambda stops
// polling it; messages in flight finish). An error after the record was written says which
// mappings could not be disabled; run it again.
func (c *Control) PauseQueue(ctx context.Context, q QueueRef, p Pause) (QueueResult, error) {
	p.Queue = q.Name
	if err := c.Table.PauseQueue(ctx, p); err != nil {
		return QueueResult{}, err
	}
	res := QueueResult{Recorded: true}
	var err error
	res.Mappings, err = c.setSources(ctx, q, false)
	return res, err
}

// ResumeQueue resumes a queue: with Sources set, enables its event source mappings first, then
// clears the pause record.
func (c *Control) ResumeQueue(ctx context.Context, q QueueRef) (QueueResult, error) {
	var res QueueResult
	var err error
	if res.Mappings, err = c.setSources(ctx, q, true); err != nil {
		return res, err
	}
	res.Recorded, err = c.Table.ResumeQueue(ctx, q.Name)
	return res, err
}

// PauseKind and ResumeKind pause and resume a kind (Table.PauseKind, Table.ResumeKind).
func (c *Control) PauseKind(ctx context.Context, p Pause) error { return c.Table.PauseKind(ctx, p) }

// ResumeKind resumes a kind and reports whether it was paused.
func (c *Control) ResumeKind(ctx context.Context, kind string) (bool, error) {
	return c.Table.ResumeKind(ctx, kind)
}

// Pauses returns the paused kinds and queues.
func (c *Control) Pauses(ctx context.Context) (Pauses, error) { return c.Table.Pauses(ctx) }

// List lists limit items (Table.List).
func (c *Control) List(ctx context.Context, q ListQuery) (LimitPage, error) {
	return c.Table.List(ctx, q)
}

// setSources switches the queue's consumers, when Control has Sources.
func (c *Control) setSources(ctx context.Context, q QueueRef, enabled bool) ([]EventSource, error) {
	if c.Sources == nil {
		return nil, nil
	}
	if q.ARN == "" {
		return nil, fmt.Errorf("%w: queue %s: its ARN is needed to find its consumers", ErrInvalid, q.Name)
	}
	return c.Sources.SetEnabled(ctx, q.ARN, enabled)
}

// QueueNameFromARN returns the queue name an SQS queue ARN ends with.
func QueueNameFromARN(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}
