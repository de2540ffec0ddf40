package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// control watches one claimed job while it runs: it renews the lease (a container: no deadline),
// writes the job's progress (throttled), and notices a cancellation request, which cancels the
// job's context with a *jobs.CancelRequestError. Every write is one Store.Touch, whose returned
// record tells whether a cancellation was requested; when nothing was written for CancelCheck,
// it reads the record instead (ClaimReader, else Store.Get).
//
// Its goroutine starts with the job and ends before the job's outcome is recorded (stop), so
// that no write under the claim races the finishing one.
type control struct {
	m      *Middleware
	job    *jobs.Info
	token  string
	renew  bool
	base   context.Context // for the store calls: not cancelled with the job
	cancel context.CancelCauseFunc
	wake   chan struct{} // a progress report arrived
	done   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	pending   *Progress                // reported, not written yet
	lastWrite time.Time                // the last progress write (wall clock)
	requested *jobs.CancelRequestError // the cancellation request seen, if any
	started   bool                     // the loop runs (or ran)
	ended     bool                     // stop was called: reports are refused
	first     *time.Timer              // starts the loop at the first cancellation check
	claimedAt time.Time                // wall clock

	cursor cursorState // the job's cursor (checkpoint.go)
}

// storeCallTimeout bounds each store call of the control loop.
const storeCallTimeout = 5 * time.Second

// startControl starts watching job, claimed with token just now, and returns the job's context
// (cancelled on request, or when the lease is lost) and the control. The loop's goroutine starts
// at once for a job whose lease must be renewed, else at the first cancellation check or progress
// report: a job shorter than CancelCheck that reports no progress costs no goroutine and no call.
func (m *Middleware) startControl(ctx context.Context, job *jobs.Info, token string, renew bool, cursor Cursor) (context.Context, *control) {
	runCtx, cancel := context.WithCancelCause(ctx)
	c := &control{
		m: m, job: job, token: token, renew: renew, base: context.WithoutCancel(ctx), cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}), claimedAt: time.Now(),
	}
	c.cursor.rec = cursor
	runCtx = jobs.WithProgressReporter(runCtx, c)
	runCtx = jobs.WithCheckpointer(runCtx, c)
	switch {
	case renew:
		c.start(true)
	case m.cfg.CancelCheck > 0:
		c.first = time.AfterFunc(m.cfg.CancelCheck, func() { c.start(false) })
	}
	return runCtx, c
}

// start runs the loop (in a goroutine of its own when async), once, unless the job has returned.
func (c *control) start(async bool) {
	c.mu.Lock()
	if c.started || c.ended {
		c.mu.Unlock()
		return
	}
	c.started = true
	c.wg.Add(1)
	c.mu.Unlock()
	if async {
		go c.loop()
	} else {
		c.loop()
	}
}

// ReportProgress implements jobs.ProgressReporter: it keeps the report for the loop to write.
func (c *control) ReportProgress(fraction float64, message string) error {
	if !ValidProgress(fraction) {
		return fmt.Errorf("%w: fraction %v (want 0 to 1)", jobs.ErrInvalidProgress, fraction)
	}
	p := &Progress{Fraction: fraction, Message: TruncateText(message, MaxProgressMessageBytes), At: c.m.cfg.Now()}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return fmt.Errorf("%w: the job %s has returned", jobs.ErrNoProgressReporter, c.job.ID)
	}
	c.pending = p
	c.mu.Unlock()
	if c.m.cfg.ProgressInterval >= 0 {
		c.start(true)
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// stop ends the loop (waiting for a store call under way) and returns the progress reported but
// not written, for the finishing write, and the cancellation request seen (nil if none).
func (c *control) stop() (*Progress, *jobs.CancelRequestError) {
	c.mu.Lock()
	first := !c.ended
	c.ended = true
	c.mu.Unlock()
	if first {
		if c.first != nil {
			c.first.Stop()
		}
		close(c.done)
	}
	c.wg.Wait()
	c.cancel(nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p, c.requested
}

// loop runs the renewals, progress writes and cancellation checks until stop.
//
// It schedules on the wall clock (time.Now); the times it writes come from MiddlewareConfig.Now.
func (c *control) loop() {
	defer c.wg.Done()
	cfg := &c.m.cfg
	lastLook, lastRenew := c.claimedAt, c.claimedAt // the claim returned the record
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	failures := 0
	for {
		now := time.Now()
		next := now.Add(24 * time.Hour)
		c.mu.Lock()
		pending, requested, lastWrite := c.pending != nil, c.requested != nil, c.lastWrite
		c.mu.Unlock()
		if c.renew {
			next = earliest(next, lastRenew.Add(cfg.Lease/3))
		}
		if cfg.CancelCheck > 0 && !requested {
			next = earliest(next, lastLook.Add(cfg.CancelCheck))
		}
		if pending && cfg.ProgressInterval >= 0 {
			next = earliest(next, lastWrite.Add(cfg.ProgressInterval))
		}
		timer.Reset(max(next.Sub(now), 0))
		select {
		case <-c.done:
			return
		case <-c.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			continue
		case <-timer.C:
		}

		now = time.Now()
		renewDue := c.renew && !now.Before(lastRenew.Add(cfg.Lease/3))
		c.mu.Lock()
		var flush *Progress
		if c.pending != nil && cfg.ProgressInterval >= 0 && !now.Before(c.lastWrite.Add(cfg.ProgressInterval)) {
			flush, c.pending = c.pending, nil
		}
		requested = c.requested != nil
		c.mu.Unlock()

		if renewDue || flush != nil {
			wrote := cfg.Now()
			t := Touch{Kind: c.job.Kind, Key: c.job.Key, JobID: c.job.ID, Token: c.token, Now: wrote, Progress: flush}
			if renewDue {
				t.LeaseUntil = wrote.Add(cfg.Lease)
			}
			ctx, cancel := context.WithTimeout(c.base, storeCallTimeout)
			rec, err := cfg.Store.Touch(ctx, t)
			cancel()
			if err != nil {
				if flush != nil {
					c.putBack(flush) // written with a later touch, or with the finish
				}
				if c.touchFailed(err, renewDue, &failures) {
					return
				}
				if renewDue {
					lastRenew = now // the next tick retries it, with a third of the lease left
				}
				continue
			}
			failures = 0
			lastLook = now
			if renewDue {
				lastRenew = now
				c.m.stats.renewals.Add(1)
			}
			if flush != nil {
				c.mu.Lock()
				c.lastWrite = now
				c.mu.Unlock()
				c.m.stats.progressWrites.Add(1)
			}
			c.see(&rec)
			continue
		}
		if cfg.CancelCheck > 0 && !requested && !now.Before(lastLook.Add(cfg.CancelCheck)) {
			lastLook = now
			ctx, cancel := context.WithTimeout(c.base, storeCallTimeout)
			rec, err := c.read(ctx)
			cancel()
			c.m.stats.cancelChecks.Add(1)
			if err != nil {
				// A read that failed changes nothing: the next check, renewal or the finish decides.
				c.m.cfg.Logger.DebugContext(c.base, "sqsworker: cancellation check failed", "job_id", c.job.ID, "error", err)
				continue
			}
			if rec.State != StateRunning || rec.Token != c.token {
				// The claim is no longer this run's (taken over after the deadline, or finished by
				// an operator): stop, as a lost renewal would.
				c.m.stats.leaseLost.Add(1)
				c.cancel(fmt.Errorf("idempotency: lease lost: %w (the record is %s under another claim)", ErrLeaseLost, rec.State))
				return
			}
			c.see(&rec)
		}
	}
}

// read reads the claim's record for a cancellation check.
func (c *control) read(ctx context.Context) (Record, error) {
	if r, ok := c.m.cfg.Store.(ClaimReader); ok {
		return r.ReadClaim(ctx, c.job.Kind, c.job.Key, c.job.ID)
	}
	return c.m.cfg.Store.Get(ctx, c.job.Kind, c.job.Key)
}

// see cancels the job's context when rec carries a cancellation request (once).
func (c *control) see(rec *Record) {
	if rec.CancelRequestedAt.IsZero() {
		return
	}
	c.mu.Lock()
	if c.requested != nil {
		c.mu.Unlock()
		return
	}
	c.requested = &jobs.CancelRequestError{RequestedAt: rec.CancelRequestedAt, Reason: rec.CancelReason}
	req := c.requested
	c.mu.Unlock()
	c.m.stats.cancelRequests.Add(1)
	c.m.cfg.Logger.InfoContext(c.base, "sqsworker: cancellation requested; cancelling the job's context", "job_id", c.job.ID,
		"kind", c.job.Kind, "key", c.job.Key, "requested_at", rec.CancelRequestedAt)
	c.cancel(req)
}

// putBack keeps p as the pending report unless a newer one arrived meanwhile.
func (c *control) putBack(p *Progress) {
	c.mu.Lock()
	if c.pending == nil {
		c.pending = p
	}
	c.mu.Unlock()
}

// touchFailed handles a failed touch and reports whether the loop must end. A lost claim stops
// the job (its context is cancelled); a transient error is retried at the next tick, but a
// renewal that fails twice in a row stops the job too (the lease may end before the next one).
func (c *control) touchFailed(err error, renewal bool, failures *int) bool {
	lost := errors.Is(err, ErrLeaseLost)
	if !lost && !renewal {
		c.m.cfg.Logger.WarnContext(c.base, "sqsworker: progress write failed; keeping it for the next one", "job_id", c.job.ID, "error", err)
		return false
	}
	if *failures++; !lost && *failures < 2 {
		c.m.cfg.Logger.WarnContext(c.base, "sqsworker: lease renewal failed; retrying", "job_id", c.job.ID, "error", err)
		return false
	}
	c.m.stats.leaseLost.Add(1)
	c.m.cfg.Logger.ErrorContext(c.base, "sqsworker: the job's claim could not be kept; cancelling the job", "job_id", c.job.ID,
		"kind", c.job.Kind, "key", c.job.Key, "error", err)
	c.cancel(fmt.Errorf("idempotency: lease lost: %w", err))
	return true
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
