package longjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Step does one unit of a long job's work from cursor cur and returns the cursor after it, and
// whether the job is done. It should make its effect idempotent (a conditional write, an upsert,
// a key of its own): a run that ends between two checkpoints is continued from the earlier one,
// so the steps after it run again.
type Step[C any] func(ctx context.Context, cur C) (next C, done bool, err error)

// Options tune [Iterate]. The zero value is the default.
type Options struct {
	// Every is the shortest time between two checkpoints: a checkpoint is one conditional write
	// to the job's record (1 write unit for a small record), so saving after every step of a
	// fast loop costs more than it protects. Defaults to 1 second. A negative value saves after
	// every step.
	Every time.Duration
	// EveryN, when above 0, also saves a checkpoint after every EveryN steps, whichever of Every
	// and EveryN comes first. Defaults to 0 (off).
	EveryN int
	// Now is the clock Every is measured on. Defaults to time.Now.
	Now func() time.Time
}

// DefaultEvery is Options.Every's default.
const DefaultEvery = time.Second

// Iterate runs a long job as a loop of steps over a cursor of type C (any JSON-encodable
// value): from the job's saved cursor (jobs.Cursor), or from start on its first run, it calls
// step until step reports done (Iterate returns nil: the job succeeded) or fails (Iterate returns
// the error: the job is retried from its last checkpoint, or from the beginning when the error
// is a jobs.Restart). It saves the cursor with jobs.Checkpoint at most every Options.Every, and
// at once when the job's slice has ended (its context cancelled with jobs.ErrSliceEnded): it
// then returns jobs.ErrSliceEnded and the worker continues the job in a new run from that
// cursor, without spending an attempt. A step interrupted by the end of the slice is run again
// in the next run.
//
// Iterate needs the context of a job run by the idempotency middleware (a job table), like
// jobs.Checkpoint: elsewhere it returns an error wrapping jobs.ErrNoCheckpointer before any step.
func Iterate[C any](ctx context.Context, start C, step Step[C], opts Options) error {
	if step == nil {
		return errors.New("longjob: Iterate: step is nil")
	}
	every, now := opts.Every, opts.Now
	if every == 0 {
		every = DefaultEvery
	}
	if now == nil {
		now = time.Now
	}
	cur := start
	if _, err := jobs.Cursor(ctx, &cur); err != nil {
		return fmt.Errorf("longjob: load the cursor: %w", err)
	}
	last, n := now(), 0
	for {
		next, done, err := step(ctx, cur)
		if err != nil {
			return err // after a slice end: continued from the last checkpoint
		}
		cur, n = next, n+1
		if done {
			return nil
		}
		if jobs.SliceEnded(ctx) || every < 0 || now().Sub(last) >= every || opts.EveryN > 0 && n >= opts.EveryN {
			if err := jobs.Checkpoint(ctx, cur); err != nil {
				return err // jobs.ErrSliceEnded: saved, continued from cur
			}
			last, n = now(), 0
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
	}
}
