package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// Defaults of WaitOptions.
const (
	DefaultWaitInterval    = 250 * time.Millisecond
	DefaultWaitMaxInterval = 5 * time.Second
)

// WaitOptions tunes Wait. The zero value is the default.
type WaitOptions struct {
	// Interval is the wait after the first read; each later wait is half as long again, up to
	// MaxInterval. Defaults to 250 ms.
	Interval time.Duration
	// MaxInterval caps the wait between two reads. Defaults to 5 seconds.
	MaxInterval time.Duration
	// NotFoundAfter is how long Wait keeps looking for a job id it cannot find before it returns
	// an error wrapping ErrNotFound. Defaults to 0: until ctx ends, because a job enqueued
	// without a queued record (producer.Config.Status unset) has none until a worker claims it,
	// which may be minutes away on a busy queue. Set it when the job's record is written at
	// enqueue (the HTTP API, a producer with Config.Status, the outbox).
	NotFoundAfter time.Duration
}

// Final reports whether a job in state s is done for Wait: succeeded, dead or cancelled. (A dead
// job runs again only if it is redriven.)
func Final(s idempotency.State) bool {
	switch s {
	case idempotency.StateSucceeded, idempotency.StateDead, idempotency.StateCancelled:
		return true
	}
	return false
}

// Wait reads the job jobID until it reaches a final state (succeeded, dead or cancelled, see
// Final) and returns it. It reads with backoff: WaitOptions.Interval after the first read, half
// as long again each time, up to MaxInterval. When ctx ends first it returns the last record it
// read (zero if none) and an error wrapping ctx's error (errors.Is(err,
// context.DeadlineExceeded)); give ctx a deadline. A job it cannot find is looked for until
// NotFoundAfter (or ctx's end), then the error wraps ErrNotFound; so does a job whose record
// expired while it was still queued or scheduled (it never ran and never will: Job.Lapsed).
//
// Cost: the lookups of GetByID until the job is found (one GetItem and one by_id Query, plus a
// BatchGetItem for a job with a key of its own), then two strongly consistent GetItems to learn
// where its record is, then one eventually consistent GetItem per read (half a read unit for a
// record under 4 KB). With the defaults that is about 18 reads in the first minute and 12 a
// minute after it: about 9 and 6 read units. Completion events (pkg/jobevents, on EventBridge)
// cost no read while waiting.
func (t *Table) Wait(ctx context.Context, jobID string, opts WaitOptions) (Job, error) {
	if jobID == "" {
		return Job{}, fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	if opts.Interval < 0 || opts.MaxInterval < 0 || opts.NotFoundAfter < 0 {
		return Job{}, fmt.Errorf("%w: WaitOptions durations must not be negative (%+v)", ErrInvalid, opts)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultWaitInterval
	}
	if opts.MaxInterval == 0 {
		opts.MaxInterval = DefaultWaitMaxInterval
	}
	opts.MaxInterval = max(opts.MaxInterval, opts.Interval)
	start := t.now()
	interval := opts.Interval
	var (
		last Job
		pk   string // the record's partition key, once found
	)
	for {
		j, found, err := t.waitRead(ctx, jobID, &pk)
		switch {
		case err != nil && ctx.Err() != nil:
			return last, t.waitEnded(ctx, jobID, last, found || pk != "")
		case err != nil:
			return last, err
		case found && j.Lapsed():
			return j, fmt.Errorf("%w: job %s expired while %s: it never ran", ErrNotFound, jobID, j.State)
		case found && Final(j.State):
			return j, nil
		case found:
			last = j
		case pk == "" && opts.NotFoundAfter > 0 && t.now().Sub(start) >= opts.NotFoundAfter:
			return Job{}, fmt.Errorf("%w: job id %q (looked for %s)", ErrNotFound, jobID, opts.NotFoundAfter)
		}
		if err := t.sleep(ctx, interval); err != nil {
			return last, t.waitEnded(ctx, jobID, last, pk != "")
		}
		interval = min(interval+interval/2, opts.MaxInterval)
	}
}

// waitEnded is Wait's error when ctx ended.
func (t *Table) waitEnded(ctx context.Context, jobID string, last Job, found bool) error {
	if !found {
		return fmt.Errorf("status: wait for job %s: %w (%w)", jobID, ctx.Err(), ErrNotFound)
	}
	return fmt.Errorf("status: wait for job %s: %w (still %s)", jobID, ctx.Err(), last.State)
}

// waitRead reads the job once: through GetByID until it is found (then *pk is set to its record's
// partition key), then with one eventually consistent read of that item.
func (t *Table) waitRead(ctx context.Context, jobID string, pk *string) (Job, bool, error) {
	if *pk == "" {
		j, err := t.GetByID(ctx, jobID)
		switch {
		case errors.Is(err, ErrNotFound):
			return Job{}, false, nil
		case err != nil:
			return Job{}, false, err
		case j.Kind == "" || Final(j.State) || j.Lapsed():
			return j, true, nil // nothing more to read
		}
		_, p, err := t.currentItem(ctx, j.Kind, j.Key)
		if err != nil {
			return Job{}, false, fmt.Errorf("status: wait for job %s: %w", jobID, err)
		}
		*pk = p
		return j, true, nil
	}
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.table),
		Key:       map[string]types.AttributeValue{idempotency.AttrPK: attrS(*pk)},
	})
	if err != nil {
		return Job{}, false, fmt.Errorf("status: wait for job %s: %w", jobID, err)
	}
	if len(out.Item) == 0 {
		return Job{}, false, fmt.Errorf("%w: job %s: its record is gone (expired and deleted)", ErrNotFound, jobID)
	}
	j, err := jobFromItem(out.Item, t.now())
	if err != nil {
		return Job{}, false, err
	}
	if j.JobID != jobID {
		return Job{}, false, fmt.Errorf("%w: job %s: its key %q now belongs to job %s", ErrNotFound, jobID, j.Key, j.JobID)
	}
	return j, true, nil
}
