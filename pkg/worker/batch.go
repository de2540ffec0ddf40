package worker

import (
	"context"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqsworker/sqsworker/internal/fanout"
	"github.com/sqsworker/sqsworker/internal/sqsevent"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// Item states. A pool worker moves an item pending → running → done; at the deadline the batch
// moves pending items to skipped and running ones to abandoned. Whoever swaps first wins. An item
// whose body is an S3 pointer stays pending while the pool worker fetches its payload, then goes
// through preparing (the pool worker fills in the job from the payload; the batch waits for it
// at the deadline) to running.
const (
	statePending int32 = iota
	stateRunning
	stateDone
	stateSkipped
	stateAbandoned
	statePreparing
)

// item is one message of a batch and what became of it.
//
// Ownership: prepare fills rec, info, env, kind, attempt0 and (for messages that cannot run)
// res before any job starts (prepareAll may prepare a large batch's items on several goroutines,
// each its own items). A pool goroutine that moves state pending → running owns the
// item: it writes res and then publishes it by moving state to done. At the deadline the batch
// moves pending items to skipped and running ones to abandoned and writes late; it then reads res
// only of items in state done, and late otherwise.
type item struct {
	rec      *sqsevent.Record
	info     jobs.Info
	ictx     jobs.InfoContext // the job's context (owned by the goroutine running it)
	kind     *jobs.Kind
	attempt0 int  // info.Attempt before middleware could change it
	prepared bool // res was decided in prepare (malformed, unknown kind, deferred)
	state    atomic.Int32
	octx     atomic.Value // the Observer's context.Context, once started (empty without one)
	obsOnce  sync.Once    // starts the Observer once: in work, or at settlement if it never ran
	depth    atomic.Int32 // how far into the middleware the job went: i + 1 once middleware i called next
	res      result
	late     *result       // set by the batch at the deadline (rare, so not inline)
	pl       *payloadState // the S3 object the body points to; nil for an inline body
	started  time.Time     // when its work started (the goroutine running it)
}

// attemptOf returns the attempt to report for a result: the one the job ran with, else the
// one computed on receive.
func (it *item) attemptOf(r *result) int {
	if r.ran {
		return r.attempt
	}
	return it.attempt0
}

// owned returns the result being written by the goroutine that owns the item (state running).
func (it *item) owned() *result { return &it.res }

// final returns the item's result once the batch has finished running.
func (it *item) final() *result {
	if it.state.Load() == stateDone {
		return &it.res
	}
	if it.late == nil { // cannot happen after closeAtDeadline; never report success by accident
		it.late = &result{outcome: OutcomeNotRun, act: actRetry}
	}
	return it.late
}

// batch is one invocation's work.
type batch struct {
	h         *Handler
	items     []item
	fifo      bool
	sourceARN string
	invoked   time.Time // when the handler was invoked
	workEnd   time.Time // no job starts after it (zero: no deadline)
	// sendCtx bounds the SQS calls (inline FIFO sends and settling): until shortly before the
	// invocation's deadline, later than workEnd so a send is not cut off while SQS accepts it.
	sendCtx context.Context
}

// handle runs a batch, its records given as consecutive segments, and returns the message ids
// to report as failed.
func (h *Handler) handle(ctx context.Context, segs [][]sqsevent.Record) []string {
	n := 0
	for _, seg := range segs {
		n += len(seg)
	}
	if n == 0 {
		return nil
	}
	b := &batch{h: h, items: make([]item, n), invoked: h.cfg.Now()}
	k := 0
	for _, seg := range segs {
		for j := range seg {
			b.items[k].rec = &seg[j]
			k++
		}
	}
	b.sourceARN = b.items[0].rec.EventSourceARN
	// FIFO by the queue's name only: standard queues may carry message groups too (fair queues).
	b.fifo = strings.HasSuffix(b.sourceARN, ".fifo") || (b.sourceARN == "" && strings.HasSuffix(h.cfg.QueueURL, ".fifo")) // the ARN, when there is one, names the record's queue
	if dl, ok := ctx.Deadline(); ok {
		b.workEnd = dl.Add(-h.cfg.DeadlineMargin)
	}
	b.prepareAll(ctx)
	b.sendCtx = ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		b.sendCtx, cancel = context.WithDeadline(ctx, dl.Add(-h.cfg.DeadlineMargin/4))
		defer cancel()
	}
	b.run(ctx)
	return b.settle(ctx)
}

// minPrepareShare is the fewest items prepareAll gives a goroutine of its own.
const minPrepareShare = 256

// prepareAll prepares every item: on up to GOMAXPROCS goroutines for a large batch (items are
// prepared independently of each other, before any job runs).
func (b *batch) prepareAll(ctx context.Context) {
	prepareRange := func(items []item) {
		for i := range items {
			it := &items[i]
			b.prepare(ctx, it)
			it.attempt0 = it.info.Attempt
			if it.prepared && !b.fifo {
				it.state.Store(stateDone) // settled in bulk; FIFO groups settle them in order
			}
		}
	}
	parts := min(runtime.GOMAXPROCS(0), len(b.items)/minPrepareShare)
	if parts < 2 {
		prepareRange(b.items)
		return
	}
	fanout.Run(parts, func(p int) {
		prepareRange(b.items[p*len(b.items)/parts : (p+1)*len(b.items)/parts])
	})
}

// prepare fills the job's info from the message and decodes the envelope. Messages that cannot
// run get their result now. A body that is an S3 pointer (with Config.Payload set) is left for
// the pool: resolve fetches the object and decodes the envelope then.
func (b *batch) prepare(ctx context.Context, it *item) {
	rec := it.rec
	it.info.MessageID = rec.MessageID
	it.info.QueueARN = rec.EventSourceARN
	it.info.GroupID = rec.MessageGroupID
	it.info.ReceiveCount = max(rec.ApproximateReceiveCount, 1)
	it.info.Attempt = it.info.ReceiveCount // refined below once the envelope is known
	it.info.AWSTraceHeader = rec.AWSTraceHeader
	if rec.SentTimestamp > 0 {
		it.info.SentAt = time.UnixMilli(rec.SentTimestamp)
	}
	if rec.ApproximateFirstReceiveTimestamp > 0 {
		it.info.FirstReceivedAt = time.UnixMilli(rec.ApproximateFirstReceiveTimestamp)
	}
	if b.h.cfg.MalformedHook != nil {
		// The hook is given the message, which it may keep, and runs in the pool, possibly
		// after the call has returned (abandoned at the deadline): a decoded receipt handle
		// points into the invoke payload (see sqsevent.Decode), so copy it now.
		rec.ReceiptHandle = strings.Clone(rec.ReceiptHandle)
	}
	if payload.MaybePointer(rec.Body) && b.pointer(it) { // one byte compared for an envelope
		return
	}
	b.prepareEnvelope(ctx, it, rec.Body)
}

// prepareEnvelope decodes the envelope (the message's body, or its payload from S3) and fills
// the job's info.
func (b *batch) prepareEnvelope(ctx context.Context, it *item, body string) {
	rec := it.rec
	env, err := jobs.ParseEnvelope(body)
	if err != nil {
		err = b.explainPointer(rec.Body, err)
		it.info.ID, it.info.Kind, it.info.Key = salvageIdentity(body)
		if b.h.cfg.MalformedHook != nil {
			return // runs in the pool, like a job
		}
		it.setPrepared(deadLetter(jobs.ReasonMalformed, err))
		return
	}
	info := &it.info
	info.ID, info.Kind, info.Key = env.ID, env.Kind, env.EffectiveKey()
	info.AttemptsBefore = env.AttemptsBefore
	info.Attempt = env.AttemptsBefore + info.ReceiveCount
	info.EnqueuedAt, info.RunAt, info.Meta, info.RawArgs = env.EnqueuedAt, env.RunAt, env.Meta, env.Args
	info.TraceParent = env.Meta[jobs.MetaTraceParent]
	info.Continuation = jobs.ContinuationOf(env.Meta)
	kind, ok := b.h.cfg.Registry.Lookup(env.Kind)
	if !ok {
		it.setPrepared(deadLetter(jobs.ReasonUnknownKind, errUnknownKind(env.Kind)))
		return
	}
	it.kind = kind
	info.MaxAttempts = kind.Options().MaxAttempts
	if env.MaxAttempts > 0 {
		info.MaxAttempts = env.MaxAttempts
	}
	if !info.RunAt.IsZero() && info.RunAt.Sub(b.invoked) > runAtTolerance {
		it.setPrepared(decideWait(info, b.fifo, b.invoked, b.capFor(rec, b.invoked)))
	}
}

// runAtTolerance lets a job whose run_at is this close run now.
const runAtTolerance = time.Second

func (it *item) setPrepared(r result) { it.res, it.prepared = r, true }

// capFor returns the visibility cap for a message: 12 hours from its receive, less the margin.
// The receive of this delivery is not in the event; it is no earlier than the first receive
// when this is the first delivery, and otherwise it is taken as the invocation (the margin
// covers the batching window).
func (b *batch) capFor(rec *sqsevent.Record, now time.Time) time.Duration {
	received := b.invoked
	if rec.ApproximateReceiveCount <= 1 && rec.ApproximateFirstReceiveTimestamp > 0 {
		if first := time.UnixMilli(rec.ApproximateFirstReceiveTimestamp); first.Before(received) {
			received = first
		}
	}
	return visibilityCap(received, now, b.h.cfg.VisibilityMargin)
}

// run works the batch's items with bounded concurrency until all are done or the deadline.
func (b *batch) run(ctx context.Context) {
	tasks := b.tasks()
	if len(tasks) == 0 {
		return
	}
	jobCtx := ctx
	cancel := context.CancelFunc(func() {})
	if !b.workEnd.IsZero() {
		jobCtx, cancel = context.WithDeadline(ctx, b.workEnd)
	}
	defer cancel()

	// n pool workers take the tasks in order; the last one to run out closes done.
	n := max(1, min(b.h.cfg.Concurrency, len(tasks)))
	var next atomic.Int64
	var running atomic.Int32
	running.Store(int32(n))
	done := make(chan struct{})
	work := func() {
		var now time.Time // this goroutine's last clock reading (see runTask)
		for {
			t := int(next.Add(1)) - 1
			if t >= len(tasks) {
				break
			}
			b.runTask(jobCtx, tasks[t], &now)
		}
		if running.Add(-1) == 0 {
			close(done)
		}
	}
	if b.workEnd.IsZero() {
		// Without a deadline nothing needs watching: this goroutine is one of the workers.
		for range n - 1 {
			go work()
		}
		work()
		<-done
		return
	}
	for range n {
		go work()
	}
	timer := time.NewTimer(time.Until(b.workEnd))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		cancel()
	}
	// Whatever is still pending (a goroutine saw the deadline first) or running is settled as
	// not run or abandoned; a no-op when everything finished.
	b.closeAtDeadline()
}

// tasks groups the runnable items: one task per item, or per message group on a FIFO source
// (in the order of the batch).
func (b *batch) tasks() [][]int32 {
	if !b.fifo {
		idx := make([]int32, 0, len(b.items))
		for i := range b.items {
			if !b.items[i].prepared {
				idx = append(idx, int32(i))
			}
		}
		tasks := make([][]int32, len(idx))
		for i := range idx {
			tasks[i] = idx[i : i+1 : i+1]
		}
		return tasks
	}
	// FIFO: every item of a group belongs to the group's task, prepared ones included, so that
	// the group stops at the first one that is not settled.
	var tasks [][]int32
	group := map[string]int{}
	for i := range b.items {
		g := b.items[i].rec.MessageGroupID
		t, ok := group[g]
		if !ok {
			t = len(tasks)
			group[g] = t
			tasks = append(tasks, nil)
		}
		tasks[t] = append(tasks[t], int32(i))
	}
	return tasks
}

// runTask runs one task's items in order. In a FIFO group, once an item is not acknowledged, the
// rest of the group is reported failed without running.
//
// now is the pool goroutine's last clock reading, taken when its previous job ended: with only
// bookkeeping since, it serves as the time of the deadline check and the next job's start, so
// that a job costs one clock read, not three. Anything that waits (a payload fetch, a FIFO send)
// clears it.
func (b *batch) runTask(ctx context.Context, task []int32, now *time.Time) {
	stopped := false
	for _, i := range task {
		it := &b.items[i]
		if !stopped && !b.workEnd.IsZero() {
			if now.IsZero() {
				*now = b.h.cfg.Now()
			}
			if !now.Before(b.workEnd) {
				return // closeAtDeadline marks the rest
			}
		}
		if it.pl != nil && !stopped {
			*now = time.Time{}
			if !b.resolve(ctx, it) {
				return // the deadline passed while its payload was fetched
			}
		} else if !it.state.CompareAndSwap(statePending, stateRunning) {
			return // the deadline passed
		}
		switch {
		case stopped:
			it.res = result{outcome: OutcomeNotRun, act: actRetry}
		case it.prepared:
			// it.res was decided in prepare.
		default:
			it.res = b.work(ctx, it, now)
		}
		if b.fifo && !stopped {
			*now = time.Time{}
			if !b.settleInline(b.sendCtx, it) {
				stopped = true
			}
		}
		if !it.state.CompareAndSwap(stateRunning, stateDone) {
			return // abandoned at the deadline; its result is not used
		}
	}
}

// closeAtDeadline marks what did not finish: not started → not run, running → abandoned.
func (b *batch) closeAtDeadline() {
	for i := range b.items {
		it := &b.items[i]
		for it.state.Load() == statePreparing {
			runtime.Gosched() // a pool worker is filling in the job from its payload (no I/O)
		}
		if it.state.CompareAndSwap(statePending, stateSkipped) {
			it.late = &result{outcome: OutcomeNotRun, act: actRetry}
		} else if it.state.CompareAndSwap(stateRunning, stateAbandoned) {
			it.late = &result{outcome: OutcomeAbandoned, act: actRetry,
				visibility: min(b.h.cfg.AbandonGrace, b.capFor(it.rec, b.h.cfg.Now())),
				err:        context.DeadlineExceeded}
		}
	}
}

// work runs one job through the middleware and returns its result. *now is when it starts (read
// from the clock when zero); work leaves in it the time the job ended.
func (b *batch) work(ctx context.Context, it *item, now *time.Time) (res result) {
	start := *now
	if start.IsZero() {
		start = b.h.cfg.Now()
	}
	it.started = start
	info := &it.info
	it.ictx = jobs.InfoContext{Context: ctx, Info: info}
	var jctx context.Context = &it.ictx
	if info.TraceParent != "" {
		jctx = jobs.WithTraceParent(jctx, info.TraceParent) // the job's trace, over any outer one
	}
	if obs := b.h.cfg.Observer; obs != nil {
		// Outermost: its trace context wins (the consumer span). If the batch already settled the
		// message as abandoned at the deadline (between this goroutine taking it and getting
		// here), its span is closed: the job runs without one.
		it.obsOnce.Do(func() {
			jctx = obs.Start(jctx, info)
			it.octx.Store(jctx)
		})
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = &PanicError{Value: v, Stack: debug.Stack()}
			}
		}()
		if it.kind == nil { // malformed body with a hook
			err = b.runMalformedHook(jctx, it)
			return
		}
		if len(b.h.cfg.Middleware) == 0 {
			err = b.core(jctx, it)
			return
		}
		err = chain(jctx, b.h.cfg.Middleware, 0, info, &it.depth, func(ctx context.Context) error { return b.core(ctx, it) })
	}()
	end := b.h.cfg.Now()
	*now = end
	switch {
	case it.kind == nil && err != nil:
		res = deadLetter(jobs.ReasonMalformed, err)
	case it.kind == nil:
		res = result{outcome: OutcomeSucceeded, act: actAck}
	default:
		res = decide(err, info, it.kind.Options().Policy, end, b.capFor(it.rec, end), b.fifo)
	}
	res.ran, res.duration, res.attempt = true, end.Sub(start), info.Attempt
	return res
}

// core is the innermost step: the attempt and run-time checks, the kind's timeout and slice,
// then the worker; a job whose slice ended is continued, within its kind's limits.
func (b *batch) core(ctx context.Context, it *item) error {
	info := &it.info
	opts := it.kind.Options()
	if info.Attempt > info.MaxAttempts {
		return jobs.DeadLetter(jobs.ReasonExhausted, errBeyondAttempts(info.Attempt, info.MaxAttempts))
	}
	if info.RunTime >= opts.MaxRunTime {
		return errRunTimeUsed(info, opts)
	}
	if t := opts.Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	// Slices end only for jobs that can checkpoint (the job table's middleware gives them a
	// checkpointer): the others pay nothing for them.
	var sl *slicer
	if jobs.CanCheckpoint(ctx) {
		d, bounded := b.sliceOf(it.kind)
		ctx, sl = startSlicer(ctx, d, bounded)
	}
	err := it.kind.Run(ctx, info)
	if sl != nil && sl.stop() {
		err = continued(err)
	}
	return limited(resolveWake(err, b.h.cfg.Now), info, opts, func() time.Duration { return b.h.cfg.Now().Sub(it.started) })
}
