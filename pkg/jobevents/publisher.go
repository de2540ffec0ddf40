package jobevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// EventBridgeAPI is the part of the EventBridge client the publisher uses;
// *eventbridge.Client implements it.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ EventBridgeAPI = (*eventbridge.Client)(nil)

// Defaults of Config.
const (
	DefaultEventBus    = "default"
	DefaultMaxAttempts = 3
	DefaultRetryDelay  = 100 * time.Millisecond
	// maxEntries is the most entries one PutEvents request takes.
	maxEntries = 10
)

// Config configures a Publisher. EventBridge is required; every other field's zero value is its
// default.
type Config struct {
	// EventBridge is the client, usually eventbridge.NewFromConfig(cfg). Required.
	EventBridge EventBridgeAPI
	// EventBus is the name or ARN of the bus the events go to. Defaults to "default", the
	// account's default bus.
	EventBus string
	// Source is the events' source (a rule's "source" pattern matches it). It must not start
	// with "aws." (EventBridge keeps those for AWS). Defaults to "sqsworker".
	Source string
	// MaxAttempts is how many PutEvents calls an event gets (the first and the retries of a call
	// that failed, or of the entries EventBridge refused: throttling, an internal error) before
	// its stream record is reported failed (Lambda then retries the batch from it). Defaults to 3.
	MaxAttempts int
	// RetryDelay is the wait before the first retry; it doubles each time. Defaults to 100 ms.
	RetryDelay time.Duration
	// Logger receives malformed records and failed publishes. Defaults to slog.Default().
	Logger *slog.Logger
}

// Stats counts what a Publisher did.
type Stats struct {
	// Records handled; Published events (EventBridge accepted them); Skipped records that were
	// no change to a final state; Malformed records (logged and skipped: they never block the
	// stream); Failed records reported as batch item failures.
	Records, Published, Skipped, Malformed, Failed int64
}

// Publisher publishes the completion events of a job table's stream to EventBridge. It is the
// handler of the events function (functions/events) behind a DynamoDB stream event source
// mapping, and of a local ddbstream.Poller. It is safe for concurrent use.
type Publisher struct {
	cfg   Config
	stats struct{ records, published, skipped, malformed, failed atomic.Int64 }
	sleep func(ctx context.Context, d time.Duration) error
}

// New checks cfg and returns a Publisher.
func New(cfg Config) (*Publisher, error) {
	var errs []error
	if cfg.EventBridge == nil {
		errs = append(errs, errors.New("jobevents: Config.EventBridge is required"))
	}
	if cfg.EventBus == "" {
		cfg.EventBus = DefaultEventBus
	}
	if len(cfg.EventBus) > 1600 {
		errs = append(errs, fmt.Errorf("jobevents: Config.EventBus is %d characters (at most 1600)", len(cfg.EventBus)))
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if strings.HasPrefix(cfg.Source, "aws.") || len(cfg.Source) > 256 {
		errs = append(errs, fmt.Errorf("jobevents: Config.Source %q: at most 256 characters, not starting with \"aws.\"", cfg.Source))
	}
	switch {
	case cfg.MaxAttempts == 0:
		cfg.MaxAttempts = DefaultMaxAttempts
	case cfg.MaxAttempts < 0 || cfg.MaxAttempts > 10:
		errs = append(errs, fmt.Errorf("jobevents: Config.MaxAttempts %d: want 1-10", cfg.MaxAttempts))
	}
	switch {
	case cfg.RetryDelay == 0:
		cfg.RetryDelay = DefaultRetryDelay
	case cfg.RetryDelay < 0:
		errs = append(errs, fmt.Errorf("jobevents: Config.RetryDelay %s is negative", cfg.RetryDelay))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Publisher{cfg: cfg, sleep: sleepCtx}, nil
}

// Stats returns the counts so far.
func (p *Publisher) Stats() Stats {
	s := &p.stats
	return Stats{Records: s.records.Load(), Published: s.published.Load(), Skipped: s.skipped.Load(),
		Malformed: s.malformed.Load(), Failed: s.failed.Load()}
}

// pending is an event (a job's or a batch's) and the stream record it comes from.
type pending struct {
	id         string // the event's ID
	subject    string // "job <id>" or "batch <id>", for logs and errors
	detailType string
	detail     any
	at         time.Time
	seq        string
}

func pendingJob(e Event, seq string) pending {
	return pending{id: e.ID, subject: "job " + e.JobID, detailType: DetailType, detail: e, at: e.FinishedAt, seq: seq}
}

func pendingBatch(e BatchEvent, seq string) pending {
	return pending{id: e.ID, subject: "batch " + e.BatchID, detailType: BatchDetailType, detail: e, at: e.FinishedAt, seq: seq}
}

// HandleDynamoDB publishes the completion events of a batch of stream records, in order, at most
// 10 per PutEvents call, and answers with ReportBatchItemFailures semantics: when an event could
// not be published after MaxAttempts, the response names its record's sequence number and
// nothing after it is sent (Lambda retries the batch from that record, so later events are
// published then, in order). Records that are no change to a final state are skipped; malformed
// ones are logged and skipped, so that one bad item never blocks the shard. A redelivered record
// publishes its event again with the same Event.ID: delivery is at least once, and subscribers
// deduplicate on event_id.
func (p *Publisher) HandleDynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var todo []pending
	for i := range ev.Records {
		r := &ev.Records[i]
		p.stats.records.Add(1)
		e, ok, err := FromRecord(r)
		var next pending
		if err == nil && ok {
			next = pendingJob(e, r.Change.SequenceNumber)
		} else if err == nil {
			var b BatchEvent
			if b, ok, err = BatchFromRecord(r); err == nil && ok {
				next = pendingBatch(b, r.Change.SequenceNumber)
			}
		}
		switch {
		case err != nil:
			p.stats.malformed.Add(1)
			p.cfg.Logger.ErrorContext(ctx, "sqsworker: a job table stream record could not be read; no event for it",
				"sequence_number", r.Change.SequenceNumber, "error", err)
		case !ok:
			p.stats.skipped.Add(1)
		default:
			todo = append(todo, next)
		}
	}
	for len(todo) > 0 {
		n := min(len(todo), maxEntries)
		if failed := p.publish(ctx, todo[:n]); failed >= 0 {
			p.stats.failed.Add(int64(len(todo) - failed))
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
				{ItemIdentifier: todo[failed].seq},
			}}, nil
		}
		todo = todo[n:]
	}
	return events.DynamoDBEventResponse{}, nil
}

// Publish sends events to the bus, at most 10 per PutEvents call, retrying what fails up to
// MaxAttempts. It returns the number of leading events that were published (all of them, or the
// index of the first that was not) and that event's error.
func (p *Publisher) Publish(ctx context.Context, evs []Event) (int, error) {
	todo := make([]pending, len(evs))
	for i := range evs {
		todo[i] = pendingJob(evs[i], "")
	}
	done := 0
	for len(todo) > 0 {
		n := min(len(todo), maxEntries)
		if failed := p.publish(ctx, todo[:n]); failed >= 0 {
			return done + failed, fmt.Errorf("jobevents: event %s of %s was not published", todo[failed].id, todo[failed].subject)
		}
		done += n
		todo = todo[n:]
	}
	return done, nil
}

// publish sends up to 10 events and returns the index of the first one still unpublished after
// MaxAttempts, or -1 when all were.
func (p *Publisher) publish(ctx context.Context, batch []pending) int {
	entries := make([]ebtypes.PutEventsRequestEntry, len(batch))
	for i := range batch {
		detail, err := json.Marshal(batch[i].detail)
		if err != nil { // not reached: an Event or a BatchEvent always marshals
			return i
		}
		entries[i] = ebtypes.PutEventsRequestEntry{
			EventBusName: aws.String(p.cfg.EventBus), Source: aws.String(p.cfg.Source), DetailType: aws.String(batch[i].detailType),
			Detail: aws.String(string(detail)), Time: aws.Time(batch[i].at),
		}
	}
	left := make([]int, len(batch)) // indexes into batch still to send
	for i := range left {
		left[i] = i
	}
	delay := p.cfg.RetryDelay
	var lastErr string
	for attempt := 1; ; attempt++ {
		in := &eventbridge.PutEventsInput{Entries: make([]ebtypes.PutEventsRequestEntry, len(left))}
		for j, i := range left {
			in.Entries[j] = entries[i]
		}
		out, err := p.cfg.EventBridge.PutEvents(ctx, in)
		var still []int
		switch {
		case err != nil:
			still, lastErr = left, err.Error()
		case len(out.Entries) != len(left):
			still, lastErr = left, fmt.Sprintf("PutEvents answered %d entries for %d", len(out.Entries), len(left))
		default:
			for j, e := range out.Entries {
				if aws.ToString(e.ErrorCode) != "" || aws.ToString(e.EventId) == "" {
					still = append(still, left[j])
					lastErr = aws.ToString(e.ErrorCode) + ": " + aws.ToString(e.ErrorMessage)
				}
			}
		}
		p.stats.published.Add(int64(len(left) - len(still)))
		if len(still) == 0 {
			return -1
		}
		left = still
		if attempt >= p.cfg.MaxAttempts || ctx.Err() != nil {
			first := left[0]
			p.cfg.Logger.ErrorContext(ctx, "sqsworker: completion events not published; the stream retries them",
				"events", len(left), "first_event_id", batch[first].id, "of", batch[first].subject, "attempts", attempt, "error", lastErr)
			return first
		}
		if err := p.sleep(ctx, delay); err != nil {
			return left[0]
		}
		delay *= 2
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
