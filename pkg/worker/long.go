package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Scheduler delivers re-sent copies of jobs due more than 15 minutes ahead (SQS's longest
// DelaySeconds): a durable sleep (jobs.Sleep), a RetryAfter beyond the visibility limit, a copy
// whose run_at is still far ahead. *schedule.Client implements it (a one-time EventBridge
// Scheduler schedule per copy, deleted after it fires).
type Scheduler interface {
	// ScheduleResend makes the scheduler send env to the queue at at (groupID: the FIFO message
	// group, "" on a standard queue), under a schedule of its own for that job and time:
	// scheduling the same copy twice is not an error, and an earlier copy's schedule does not
	// stand in the way. It returns the schedule's name.
	ScheduleResend(ctx context.Context, env jobs.Envelope, at time.Time, groupID string) (string, error)
}

// QueueScheduler is a [Scheduler] that can send to any queue of the stack (*schedule.Client
// implements it): the worker of several queues (pkg/queues) schedules each copy onto the queue
// its message came from, given by the event source's ARN, rather than onto the scheduler's own
// queue.
type QueueScheduler interface {
	Scheduler
	ScheduleResendOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, groupID string) (string, error)
}

// slicer ends the slice of a job that saves checkpoints (jobs.Slicer): at its end (the kind's
// or the worker's slice after the job started, or the invocation's deadline less DeadlineMargin
// and SliceGrace), a job that saved a checkpoint during this run has its context cancelled with
// jobs.ErrSliceEnded; one that has not yet is ended by its next checkpoint. A job that never
// checkpoints is never ended by it: its timer is armed at the first checkpoint.
type slicer struct {
	cancel  context.CancelCauseFunc
	end     time.Time // wall clock; zero with !bounded
	bounded bool

	mu     sync.Mutex
	timer  *time.Timer // armed at the first checkpoint
	over   bool        // the slice's end has passed (seen by the timer or a checkpoint)
	ended  bool        // the job's context was cancelled with ErrSliceEnded
	closed bool        // stop was called
}

// startSlicer returns the job's context with a slicer whose slice ends after d (d ≤ 0: at
// once; no slice when !bounded), and the slicer.
func startSlicer(ctx context.Context, d time.Duration, bounded bool) (context.Context, *slicer) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &slicer{cancel: cancel, bounded: bounded}
	if bounded {
		s.end = time.Now().Add(d)
	}
	return jobs.WithSlicer(ctx, s), s
}

// end is called by the timer when the slice's time is up (the job has checkpointed).
func (s *slicer) endNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over = true
	if !s.ended && !s.closed {
		s.ended = true
		s.cancel(jobs.ErrSliceEnded)
	}
}

// Checkpointed implements jobs.Slicer.
func (s *slicer) Checkpointed() bool {
	if !s.bounded {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if !s.over && s.timer == nil {
		if d := time.Until(s.end); d > 0 {
			s.timer = time.AfterFunc(d, s.endNow)
		} else {
			s.over = true
		}
	}
	if s.over && !s.ended {
		s.ended = true
		s.cancel(jobs.ErrSliceEnded)
	}
	return s.over
}

// stop releases the slicer and reports whether it ended the job's slice.
func (s *slicer) stop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.closed = true
	s.cancel(nil)
	return s.ended
}

// sliceOf returns how long the job may run before its slice ends, and whether it has a slice at
// all: the kind's slice, else the worker's, bounded by the time left before the batch's work end
// less SliceGrace (the time kept for the job to return and be settled).
func (b *batch) sliceOf(kind *jobs.Kind) (time.Duration, bool) {
	d := kind.Options().Slice
	if d <= 0 {
		d = b.h.cfg.Slice
	}
	bounded := d > 0
	if !b.workEnd.IsZero() {
		left := time.Until(b.workEnd) - b.h.cfg.SliceGrace
		if !bounded || left < d {
			d, bounded = left, true
		}
	}
	return d, bounded
}

// continued turns what a job whose slice ended returned into a continuation: any failure that
// does not decide the job's fate itself (a Cancel, a dead letter, a retry after a delay, a sleep
// already asked for) becomes a jobs.ContinueError. A job that finished (nil) succeeded.
func continued(err error) error {
	if err == nil {
		return nil
	}
	var (
		dead   *jobs.DeadLetterError
		cancel *jobs.CancelError
		args   *jobs.ArgsError
		retry  *jobs.RetryAfterError
		cont   *jobs.ContinueError
		defer_ *jobs.DeferError
		re     *jobs.RestartError
	)
	if errors.As(err, &dead) || errors.As(err, &cancel) || errors.As(err, &args) || errors.As(err, &retry) ||
		errors.As(err, &cont) || errors.As(err, &defer_) || errors.As(err, &re) || errors.Is(err, jobs.ErrSkipped) {
		return err
	}
	return &jobs.ContinueError{Slice: true, Err: err}
}

// resolveWake fixes a sleep's wake time once, to the millisecond, so that the job's record (the
// middleware's finishing write), the copy's run_at and its schedule all say the same time: a
// jobs.Sleep(d) becomes a ContinueError until now + d. Other errors are returned as they are.
// now is called only for a sleep (the worker reads the clock once per job otherwise).
func resolveWake(err error, now func() time.Time) error {
	if err == nil {
		return nil // before cont: errors.As moves it to the heap
	}
	var cont *jobs.ContinueError
	if !errors.As(err, &cont) || cont.Slice || (cont.Delay <= 0 && cont.Until.IsZero()) {
		return err
	}
	wake := cont.WakeAt(now()).Truncate(time.Millisecond)
	if cont == err && wake.Equal(cont.Until) {
		return err
	}
	return &jobs.ContinueError{Until: wake, Err: cont.Err}
}

// limited checks a continuation against the kind's limits: past them it becomes a dead letter
// (reason "exhausted", a *jobs.LimitError). ran returns how long this run took (called for a
// continuation only).
func limited(err error, info *jobs.Info, opts jobs.KindOptions, ran func() time.Duration) error {
	if err == nil {
		return nil // before cont: errors.As moves it to the heap
	}
	var cont *jobs.ContinueError
	if !errors.As(err, &cont) {
		return err
	}
	total := info.RunTime + ran()
	switch {
	case info.Continuation+1 > opts.MaxContinuations:
		return jobs.DeadLetter(jobs.ReasonExhausted, &jobs.LimitError{Limit: jobs.ErrContinuationsExhausted,
			Continuations: info.Continuation, MaxContinuations: opts.MaxContinuations, RunTime: total, MaxRunTime: opts.MaxRunTime, Err: cont.Err})
	case total >= opts.MaxRunTime:
		return jobs.DeadLetter(jobs.ReasonExhausted, &jobs.LimitError{Limit: jobs.ErrRunTimeExhausted,
			Continuations: info.Continuation, MaxContinuations: opts.MaxContinuations, RunTime: total, MaxRunTime: opts.MaxRunTime, Err: cont.Err})
	}
	return err
}

// errRunTimeUsed is the dead letter of a job whose record says it has used up its total run time
// before this run started.
func errRunTimeUsed(info *jobs.Info, opts jobs.KindOptions) error {
	return jobs.DeadLetter(jobs.ReasonExhausted, &jobs.LimitError{Limit: jobs.ErrRunTimeExhausted,
		Continuations: info.Continuation, MaxContinuations: opts.MaxContinuations, RunTime: info.RunTime, MaxRunTime: opts.MaxRunTime,
		Err: fmt.Errorf("not run: it has run %s in total already", info.RunTime.Round(time.Millisecond))})
}

// decideContinue turns a continuation into the re-send of a copy: the same attempts spent
// before this run (the run was no attempt), one more continuation, due at its wake time.
func decideContinue(cont *jobs.ContinueError, err error, info *jobs.Info, now time.Time) result {
	r := result{outcome: OutcomeContinued, act: actResend, err: err, attempts: max(info.Attempt-1, 0),
		setContinuation: true, continuation: info.Continuation + 1}
	if wake := cont.WakeAt(now); wake.Sub(now) > runAtTolerance {
		r.runAt, r.delay = wake, min(wake.Sub(now), maxDelay)
	}
	return r
}

// copyEnvelope returns the envelope of the re-sent copy of the item: its own, with the result's
// attempts_before, run_at and continuation count.
func (b *batch) copyEnvelope(it *item, r *result) (jobs.Envelope, error) {
	env, err := jobs.ParseEnvelope(it.body()) // parsed before; re-sends are rare, so not kept
	if err != nil {
		return jobs.Envelope{}, err
	}
	env.AttemptsBefore, env.RunAt = r.attempts, r.runAt
	if r.setContinuation || !r.since.IsZero() {
		meta := make(map[string]string, len(env.Meta)+2)
		for k, v := range env.Meta {
			meta[k] = v
		}
		if r.setContinuation {
			meta[jobs.MetaContinuation] = strconv.Itoa(r.continuation)
			// The job ran: a deferral of its next run (a flow limit) begins anew, not at an
			// earlier copy's deferral start.
			delete(meta, jobs.MetaDeferredSince)
		}
		if !r.since.IsZero() { // a deferred job: when its deferral began (decideDefer)
			meta[jobs.MetaDeferredSince] = r.since.UTC().Format(jobs.TimeLayout)
		}
		env.Meta = meta
	}
	return env, nil
}

// scheduleAll hands the re-sends due more than 15 minutes ahead to Config.Scheduler, and returns
// the items left for SQS: those it may not schedule (a FIFO queue, a body kept in S3) and those
// whose schedule could not be created (logged; SQS keeps them waiting instead).
func (b *batch) scheduleAll(ctx context.Context, items []*item) []*item {
	sched := b.h.cfg.Scheduler
	if sched == nil || b.fifo {
		return items
	}
	now := b.h.cfg.Now()
	var far, rest []*item
	for _, it := range items {
		r := it.final()
		if it.pl == nil && !r.runAt.IsZero() && r.runAt.Sub(now) > maxDelay {
			far = append(far, it)
		} else {
			rest = append(rest, it)
		}
	}
	if len(far) == 0 {
		return items
	}
	failed := make([]bool, len(far))
	parallel(len(far), func(i int) {
		it := far[i]
		r := it.final()
		env, err := b.copyEnvelope(it, r)
		if err == nil {
			if qs, ok := sched.(QueueScheduler); ok && b.sourceARN != "" {
				r.scheduled, err = qs.ScheduleResendOn(ctx, b.sourceARN, env, r.runAt, "")
			} else {
				r.scheduled, err = sched.ScheduleResend(ctx, env, r.runAt, "")
			}
		}
		if err != nil {
			failed[i] = true
			b.h.cfg.Logger.WarnContext(ctx, "sqsworker: could not schedule the job's copy; it waits in SQS instead",
				"job_id", it.info.ID, "kind", it.info.Kind, "run_at", r.runAt, "error", err)
		}
	})
	for i, it := range far {
		if failed[i] {
			rest = append(rest, it)
		}
	}
	return rest
}
