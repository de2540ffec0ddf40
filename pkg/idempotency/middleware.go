package idempotency

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// ErrInProgress is the cause of a job deferred because another worker holds its claim.
var ErrInProgress = errors.New("idempotency: the job is running elsewhere")

// MiddlewareConfig configures [NewMiddleware]. Store is required; every other field's zero value
// is its default.
type MiddlewareConfig struct {
	// Store keeps the job records. Required.
	Store Store
	// Lease is the claim's length when the job's context has no deadline (a container); it is
	// renewed every Lease/3 while the job runs, and the job's context is cancelled if a renewal
	// fails. Defaults to 5 minutes.
	Lease time.Duration
	// CancelCheck bounds how long a running job goes without its record being looked at for a
	// cancellation request (pkg/status's Cancel of a running job): a lease renewal or a progress
	// write returns the record at no extra cost, and when neither happened for CancelCheck the
	// record is read (ClaimReader: one eventually consistent GetItem, half a read unit). The first
	// look is one CancelCheck after the claim, so a job shorter than that costs nothing. A
	// requested cancellation is noticed within about CancelCheck plus a second (the read may lag
	// a write), and cancels the job's context with a *jobs.CancelRequestError. Defaults to 10
	// seconds (at most 6 reads, 3 read units, per minute of a job's run); negative: no reads (a
	// request is then noticed only by renewals and progress writes).
	CancelCheck time.Duration
	// ProgressInterval is the shortest time between two progress writes of one job
	// (jobs.Progress): a report within it is kept in memory, and the latest is written when it has
	// passed, or with the job's finishing write at no extra cost. Each write is one conditional
	// write (Store.Touch: 1 write unit for a record under 1 KB) that also tells whether a
	// cancellation was requested. Defaults to 5 seconds (at most 12 writes per minute of a job
	// that keeps reporting); negative: progress is written only with the finishing write.
	ProgressInterval time.Duration
	// AbandonGrace is added to the context's deadline (Lambda's, less the worker's margin) to make
	// the lease: a job abandoned at the deadline keeps its claim that long. Match the worker's
	// AbandonGrace. Defaults to 60 seconds.
	AbandonGrace time.Duration
	// SucceededTTL is how long a succeeded record keeps duplicates away. Defaults to 24 hours.
	SucceededTTL time.Duration
	// KindSucceededTTL overrides SucceededTTL per kind.
	KindSucceededTTL map[string]time.Duration
	// RecordTTL is the expiry of records that did not succeed (running, retrying, dead), long
	// enough to outlive the DLQ's retention. Defaults to 14 days.
	RecordTTL time.Duration
	// StoreRetryDelay is how long a job waits (deferred, without spending an attempt) when the
	// store fails. Defaults to 10 seconds, with up to 50% jitter.
	StoreRetryDelay time.Duration
	// FailOpen runs the job without its claim when the store fails (and logs it at Error).
	// Duplicates may then run twice. Defaults to false: the job is deferred, nothing runs without
	// its claim.
	FailOpen bool
	// ExpectRecords says that jobs usually have a record before their first run, because producers
	// record them as queued (producer.Config.Status, the HTTP API's idempotent requests, the
	// transactional outbox): a first delivery is then claimed with the general claim, which
	// updates that record in one write. Otherwise (the default, false) a job's first delivery
	// (receive count 1, no attempts before, no run_at) is claimed with a write that succeeds only
	// when the job has no record (ClaimRequest.Fresh), which is cheaper for the store, and a record
	// found there costs one refused write more. Either way the outcome is the same.
	ExpectRecords bool
	// CacheSize keeps the keys this process completed in an LRU of that many entries, so that
	// duplicates arriving at the same container skip the store. Defaults to 0 (off).
	CacheSize int
	// OnFinishError, when set, is called when a job's outcome could not be recorded (metrics count
	// it). The job's result stands: a success is acknowledged all the same. Defaults to nil.
	OnFinishError func(ctx context.Context, job *jobs.Info, err error)
	// Logger receives store failures. Defaults to slog.Default().
	Logger *slog.Logger
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
	// Rand returns a uniform int64 in [0, n), for jitter. Defaults to math/rand/v2's Int64N.
	Rand func(n int64) int64
	// NewToken makes claim tokens. Defaults to jobs.NewID.
	NewToken func() string
	// Cursors, when set, keeps the cursors larger than MaxCursorBytes (jobs.Checkpoint) in S3
	// (*payload.Store implements it): the record holds the object's pointer. Defaults to nil: a
	// larger cursor is refused with an error wrapping jobs.ErrCursorTooLarge.
	Cursors CursorStore
}

// Stats counts what the middleware did. All fields are read with atomic loads by Stats().
type Stats struct {
	Claims         int64 // claims won (jobs run)
	Duplicates     int64 // deliveries acknowledged without running (succeeded or cancelled)
	CacheHits      int64 // duplicates answered by the LRU
	InProgress     int64 // deliveries deferred because another worker holds the claim
	Mismatches     int64 // keys reused with a different payload
	StoreErrors    int64 // claims that failed on the store
	FinishErrors   int64 // completions or failures that could not be recorded
	FailOpenRuns   int64 // jobs run without a claim (FailOpen)
	LeaseRenewals  int64 // successful renewals
	LeaseLostStops int64 // jobs whose context was cancelled because the lease was lost
	DeadMarks      int64 // records made dead by RecordDeadLetter (jobs dead-lettered without a claim)
	CancelChecks   int64 // reads of a running job's record for a cancellation request (CancelCheck)
	ProgressWrites int64 // progress writes while jobs ran (not counting those in a finishing write)
	CancelRequests int64 // jobs whose context was cancelled because a cancellation was requested
	// CancelsRecorded counts jobs asked to cancel whose worker stopped before recording it (a
	// crash, a timeout): their next delivery recorded the cancellation and dead-lettered them.
	CancelsRecorded int64
	Checkpoints     int64 // cursors saved (jobs.Checkpoint), one conditional write each
	Continuations   int64 // runs that ended without ending their job (a slice that ended, a sleep)
}

// Middleware claims every job before it runs and records its outcome. It implements the worker's
// Middleware interface (worker.Config.Middleware), and worker.DeadLetterRecorder, so that the
// record of a job dead-lettered without a run (an unknown kind, a payload mismatch) becomes dead
// too.
type Middleware struct {
	cfg   MiddlewareConfig
	cache *lru
	stats struct {
		claims, duplicates, cacheHits, inProgress, mismatches, storeErrors, finishErrors,
		failOpenRuns, renewals, leaseLost, deadMarks, cancelChecks, progressWrites, cancelRequests,
		cancelsRecorded, checkpoints, continuations atomic.Int64
	}
}

// Defaults of [MiddlewareConfig].
const (
	DefaultLease           = 5 * time.Minute
	DefaultAbandonGrace    = 60 * time.Second
	DefaultSucceededTTL    = 24 * time.Hour
	DefaultRecordTTL       = 14 * 24 * time.Hour
	DefaultStoreRetryDelay = 10 * time.Second
	DefaultCancelCheck     = 10 * time.Second
	DefaultProgressWrite   = 5 * time.Second
)

// NewMiddleware validates cfg and returns the middleware.
func NewMiddleware(cfg MiddlewareConfig) (*Middleware, error) {
	if cfg.Store == nil {
		return nil, errors.New("idempotency: MiddlewareConfig.Store is required")
	}
	durations := []struct {
		name  string
		field *time.Duration
		def   time.Duration
	}{
		{"Lease", &cfg.Lease, DefaultLease},
		{"AbandonGrace", &cfg.AbandonGrace, DefaultAbandonGrace},
		{"SucceededTTL", &cfg.SucceededTTL, DefaultSucceededTTL},
		{"RecordTTL", &cfg.RecordTTL, DefaultRecordTTL},
		{"StoreRetryDelay", &cfg.StoreRetryDelay, DefaultStoreRetryDelay},
	}
	for _, d := range durations {
		if *d.field < 0 {
			return nil, fmt.Errorf("idempotency: %s %s must not be negative", d.name, *d.field)
		}
		if *d.field == 0 {
			*d.field = d.def
		}
	}
	if cfg.Lease < 3*time.Second {
		return nil, fmt.Errorf("idempotency: Lease %s is too short to renew (at least 3s)", cfg.Lease)
	}
	switch {
	case cfg.CancelCheck == 0:
		cfg.CancelCheck = DefaultCancelCheck
	case cfg.CancelCheck > 0 && cfg.CancelCheck < 10*time.Millisecond:
		return nil, fmt.Errorf("idempotency: CancelCheck %s is too short (at least 10ms; negative turns the checks off)", cfg.CancelCheck)
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = DefaultProgressWrite
	}
	for kind, ttl := range cfg.KindSucceededTTL {
		if ttl <= 0 {
			return nil, fmt.Errorf("idempotency: KindSucceededTTL[%q] %s must be positive", kind, ttl)
		}
	}
	if cfg.StoreRetryDelay > jobs.MaxVisibility {
		return nil, fmt.Errorf("idempotency: StoreRetryDelay %s is above SQS's 12h visibility limit", cfg.StoreRetryDelay)
	}
	if cfg.CacheSize < 0 {
		return nil, fmt.Errorf("idempotency: CacheSize %d must not be negative", cfg.CacheSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Int64N
	}
	if cfg.NewToken == nil {
		cfg.NewToken = jobs.NewID
	}
	m := &Middleware{cfg: cfg}
	if cfg.CacheSize > 0 {
		m.cache = newLRU(cfg.CacheSize)
	}
	return m, nil
}

// Stats returns the counters so far.
func (m *Middleware) Stats() Stats {
	s := &m.stats
	return Stats{
		Claims: s.claims.Load(), Duplicates: s.duplicates.Load(), CacheHits: s.cacheHits.Load(),
		InProgress: s.inProgress.Load(), Mismatches: s.mismatches.Load(), StoreErrors: s.storeErrors.Load(),
		FinishErrors: s.finishErrors.Load(), FailOpenRuns: s.failOpenRuns.Load(),
		LeaseRenewals: s.renewals.Load(), LeaseLostStops: s.leaseLost.Load(), DeadMarks: s.deadMarks.Load(),
		CancelChecks: s.cancelChecks.Load(), ProgressWrites: s.progressWrites.Load(), CancelRequests: s.cancelRequests.Load(),
		CancelsRecorded: s.cancelsRecorded.Load(), Checkpoints: s.checkpoints.Load(), Continuations: s.continuations.Load(),
	}
}

// Work claims the job, sets its attempt from the record's run count, runs it, and records the
// outcome. See the package documentation for the rules.
func (m *Middleware) Work(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
	now := m.cfg.Now()
	ik := ItemKey(job.Kind, job.Key)
	hash, err := jobs.PayloadHash(job.Kind, job.RawArgs)
	if err != nil {
		return jobs.DeadLetter(jobs.ReasonMalformed, err)
	}
	if m.cache != nil && m.cache.contains(ik, hash, now) {
		m.stats.cacheHits.Add(1)
		m.stats.duplicates.Add(1)
		return fmt.Errorf("%w: job key %q already succeeded in this process", jobs.ErrSkipped, job.Key)
	}
	token := m.cfg.NewToken()
	lease, renew := m.lease(ctx, now)
	cctx, endClaim := jobs.StartStep(ctx, "idempotency.claim")
	res, err := m.cfg.Store.Claim(cctx, ClaimRequest{
		Kind: job.Kind, Key: job.Key, JobID: job.ID, MessageID: job.MessageID, PayloadHash: hash, Token: token,
		AttemptsBefore: job.AttemptsBefore, Now: now, LeaseUntil: lease, ExpiresAt: now.Add(m.cfg.RecordTTL),
		Fresh: !m.cfg.ExpectRecords && job.ReceiveCount <= 1 && job.AttemptsBefore == 0 && job.RunAt.IsZero() && job.Continuation == 0,
		Meta:  job.Meta,
	})
	endClaim(err)
	if errors.Is(err, ErrKeyTooLong) {
		// A message no producer of this module wrote: every claim of it would fail the same way
		// (DynamoDB: ValidationException), until SQS's redrive policy moved it. Dead-letter it now.
		return jobs.DeadLetter(jobs.ReasonMalformed, &refusal{msg: err.Error(), noMark: true})
	}
	if err != nil {
		m.stats.storeErrors.Add(1)
		if m.cfg.FailOpen {
			m.stats.failOpenRuns.Add(1)
			m.cfg.Logger.ErrorContext(ctx, "sqsworker: idempotency store failed; running the job WITHOUT its claim (FailOpen)",
				"job_id", job.ID, "kind", job.Kind, "key", job.Key, "error", err)
			return next(ctx)
		}
		return jobs.Defer(m.jitter(m.cfg.StoreRetryDelay), fmt.Errorf("idempotency: claim %s: %w", job.Key, err))
	}
	if !res.Claimed {
		if rec := &res.Record; rec.State == StateRunning && !rec.CancelRequestedAt.IsZero() && !rec.LeaseUntil.After(now) &&
			(rec.PayloadHash == "" || rec.PayloadHash == hash) {
			return m.recordCancel(ctx, job, rec, now)
		}
		return m.refused(job, &res.Record, hash, now)
	}
	m.stats.claims.Add(1)
	job.Attempt = res.Record.Runs
	// A continued job's count and run time are its record's (a redrive resets them there).
	job.Continuation, job.RunTime = res.Record.Continuations, res.Record.RunTime

	result := &resultHolder{}
	runCtx, ctl := m.startControl(context.WithValue(ctx, resultKey{}, result), job, token, renew, res.Record.Cursor)
	workErr := m.run(runCtx, job, token, next, ctl, result)
	progress, requested := ctl.stop()
	if requested != nil && cancellable(workErr) {
		// The job stopped (or failed) after a cancellation was requested: it is cancelled, not
		// retried. A job that finished anyway keeps what happened.
		workErr = jobs.Cancel(fmt.Errorf("%w; the job returned: %w", requested, workErr))
	}
	if m.finish(ctx, job, token, workErr, result, progress, ctl) {
		// It failed before its worker noticed a cancellation request: recorded as cancelled.
		workErr = jobs.Cancel(fmt.Errorf("%w; the job returned: %w", ErrRecordedCancelled, workErr))
	}
	if workErr == nil && m.cache != nil {
		m.cache.add(ik, hash, m.cfg.Now().Add(m.succeededTTL(job.Kind)))
	}
	return workErr
}

// run calls next. If the job panics, the control loop stops and the failure is recorded before
// the panic goes on to the worker (which turns it into the item's failure), so that the claim
// does not stay "running" and keep the job from ever running again.
func (m *Middleware) run(ctx context.Context, job *jobs.Info, token string, next func(context.Context) error, ctl *control, result *resultHolder) error {
	defer func() {
		if v := recover(); v != nil {
			progress, _ := ctl.stop()
			m.finish(ctx, job, token, fmt.Errorf("job panicked: %v", v), result, progress, ctl)
			panic(v)
		}
	}()
	return next(ctx)
}

// cancellable reports whether a job's error becomes a cancellation when a cancellation was
// requested while it ran: any failure but a dead letter that says something else (args that do
// not decode, a middleware's reason).
func cancellable(err error) bool {
	var (
		dead *jobs.DeadLetterError
		args *jobs.ArgsError
	)
	return err != nil && !errors.Is(err, jobs.ErrSkipped) && !errors.As(err, &dead) && !errors.As(err, &args)
}

// lease returns the claim's end, and whether it must be renewed (no deadline).
func (m *Middleware) lease(ctx context.Context, now time.Time) (time.Time, bool) {
	if dl, ok := ctx.Deadline(); ok {
		return dl.Add(m.cfg.AbandonGrace), false
	}
	return now.Add(m.cfg.Lease), true
}

// refused turns a refused claim into the worker's answer.
func (m *Middleware) refused(job *jobs.Info, rec *Record, hash string, now time.Time) error {
	switch {
	case rec.PayloadHash != "" && rec.PayloadHash != hash:
		m.stats.mismatches.Add(1)
		// The record is another job's (nothing of this one's to mark dead), unless it carries
		// this job's id (a producer recorded it queued with other args).
		return jobs.DeadLetter(jobs.ReasonPayloadMismatch, &refusal{
			msg:    fmt.Sprintf("key %q of kind %s was used by job %s with different args", job.Key, job.Kind, rec.JobID),
			noMark: rec.JobID != job.ID,
		})
	case rec.State == StateSucceeded:
		m.stats.duplicates.Add(1)
		return fmt.Errorf("%w: duplicate of job %s, which succeeded", jobs.ErrSkipped, rec.JobID)
	case rec.State == StateCancelled:
		m.stats.duplicates.Add(1)
		return fmt.Errorf("%w: job key %q was cancelled", jobs.ErrSkippedCancelled, job.Key)
	case rec.State == StateDead:
		// This very message was dead-lettered before, but its DLQ send failed: send it again,
		// without running the job again.
		reason := rec.Reason
		if reason == "" {
			reason = jobs.ReasonExhausted
		}
		return jobs.DeadLetter(reason, &refusal{
			msg:    fmt.Sprintf("job %s was already dead-lettered; its message came back because the DLQ send failed", rec.JobID),
			noMark: true, // the record says dead already
		})
	case rec.State == StateRunning && rec.LeaseUntil.After(now):
		m.stats.inProgress.Add(1)
		remaining := rec.LeaseUntil.Sub(now)
		return jobs.Defer(remaining+m.jitter(min(remaining/4+time.Second, 30*time.Second)),
			fmt.Errorf("%w (job %s, lease until %s)", ErrInProgress, rec.JobID, rec.LeaseUntil.UTC().Format(time.RFC3339)))
	default: // the record changed between the write and the read: try again soon
		return jobs.Defer(m.jitter(time.Second), fmt.Errorf("idempotency: claim of %q refused in state %s", job.Key, rec.State))
	}
}

// recordCancel records the cancellation of a job asked to cancel while it ran, whose worker
// stopped (a crash, a timeout) before it could record it: the claim's lease has ended, and no
// other claim may take the job over (Store.Claim). It finishes the old claim as cancelled (with
// its token, from the record) and dead-letters this delivery with the reason "cancelled".
func (m *Middleware) recordCancel(ctx context.Context, job *jobs.Info, rec *Record, now time.Time) error {
	req := &jobs.CancelRequestError{RequestedAt: rec.CancelRequestedAt, Reason: rec.CancelReason}
	err := m.cfg.Store.Finish(ctx, Finish{Kind: job.Kind, Key: job.Key, JobID: job.ID, Token: rec.Token,
		State: StateCancelled, Reason: jobs.ReasonCancelled, MessageID: job.MessageID, Now: now, ExpiresAt: now.Add(m.cfg.RecordTTL),
		Error: "the run asked to cancel stopped before recording it (its worker crashed or timed out)"})
	switch {
	case errors.Is(err, ErrLeaseLost):
		// Recorded meanwhile (by its worker, late, or by another delivery): decide again.
		return jobs.Defer(m.jitter(time.Second), fmt.Errorf("idempotency: claim of %q refused: its record changed", job.Key))
	case err != nil:
		m.stats.storeErrors.Add(1)
		return jobs.Defer(m.jitter(m.cfg.StoreRetryDelay), fmt.Errorf("idempotency: record the cancellation of %s: %w", job.Key, err))
	}
	m.stats.cancelsRecorded.Add(1)
	return jobs.DeadLetter(jobs.ReasonCancelled, &refusal{msg: req.Error() + "; its run stopped before recording it", noMark: true})
}

// finish records the job's outcome, with the run's last progress report not yet written. A
// failed write is logged and counted; the job's own result stands (a success is acknowledged all
// the same). It reports whether the store recorded a failure as cancelled instead
// (ErrRecordedCancelled).
func (m *Middleware) finish(ctx context.Context, job *jobs.Info, token string, workErr error, result *resultHolder, progress *Progress, ctl *control) bool {
	now := m.cfg.Now()
	f := Finish{Kind: job.Kind, Key: job.Key, JobID: job.ID, Token: token, MessageID: job.MessageID, Now: now,
		ExpiresAt: now.Add(m.cfg.RecordTTL), Meta: job.Meta, Progress: progress, RunTime: max(time.Since(ctl.claimedAt), 0)}
	cursor := ctl.savedCursor()
	var (
		cont    *jobs.ContinueError
		restart *jobs.RestartError
	)
	switch state, reason := Outcome(job, workErr); {
	case state == StateSucceeded:
		f.State, f.ExpiresAt = StateSucceeded, now.Add(m.succeededTTL(job.Kind))
		result.mu.Lock()
		f.Result = result.val
		result.mu.Unlock()
		f.ClearCursor = cursor.Saved() // of no more use
	case (state == StateQueued || state == StateScheduled) && errors.As(workErr, &cont):
		// The run ended without ending the job: it continues in a new message (the worker sends
		// it), from its cursor, without spending an attempt.
		f.State, f.Continue = state, true
		if state == StateScheduled {
			f.RunAt = cont.WakeAt(now)
		}
		m.stats.continuations.Add(1)
	default:
		f.State, f.Reason, f.Error = state, reason, workErr.Error()
		// The worker dead-letters an attempt beyond MaxAttempts without running it (its check
		// runs inside next): the claim's run did not happen.
		f.NotRun = notRun(job, workErr)
		f.ClearCursor = cursor.Saved() && errors.As(workErr, &restart) // jobs.Restart: start over
	}
	if f.NotRun {
		f.RunTime = 0
	}
	// The job's context may be at its deadline: give the write its own short budget.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	wctx, endFinish := jobs.StartStep(wctx, "idempotency.finish")
	err := m.cfg.Store.Finish(wctx, f)
	if err == nil && f.ClearCursor && cursor.Pointer != "" {
		ctl.retireCursor(cursor.Pointer)
	}
	if errors.Is(err, ErrRecordedCancelled) {
		endFinish(nil)
		m.cfg.Logger.InfoContext(ctx, "sqsworker: the job failed after a cancellation was requested; recorded as cancelled",
			"job_id", job.ID, "kind", job.Kind, "key", job.Key)
		return true
	}
	endFinish(err)
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			// Taken over after its lease expired, or finished by an operator: the record is
			// someone else's now, which is what should happen.
			m.cfg.Logger.WarnContext(ctx, "sqsworker: the job's claim was taken while it ran; its outcome is not recorded",
				"job_id", job.ID, "kind", job.Kind, "key", job.Key, "state", f.State)
			return false
		}
		m.stats.finishErrors.Add(1)
		m.cfg.Logger.ErrorContext(ctx, "sqsworker: could not record the job's outcome", "job_id", job.ID, "kind", job.Kind,
			"key", job.Key, "state", f.State, "error", err)
		if m.cfg.OnFinishError != nil {
			m.cfg.OnFinishError(ctx, job, err)
		}
	}
	return false
}

// notRun reports whether the worker refused to run the claimed job as exhausted: its attempt was
// beyond MaxAttempts (the worker's check, inside next, answers with a dead letter).
func notRun(job *jobs.Info, workErr error) bool {
	var dead *jobs.DeadLetterError
	return job.Attempt > job.MaxAttempts && errors.As(workErr, &dead) && dead.Reason == jobs.ReasonExhausted
}

// refusal is the error of a job the middleware dead-letters from its record, without claiming
// it; noMark says that RecordDeadLetters has nothing to write for it (the record is already
// dead, or is another job's).
type refusal struct {
	msg    string
	noMark bool
}

func (e *refusal) Error() string { return e.msg }

// RecordDeadLetter implements worker.DeadLetterRecorder: the worker calls it for each job of a
// batch it dead-lettered, once the dead letters are in the DLQ. A job whose outcome came back
// through Work (calledNext: it was claimed and run, or judged on its claim: cancelled, exhausted,
// args that do not decode) was recorded by Work's finishing write and costs nothing more here.
// For the others — an unknown kind, which never reaches the middleware; a body that is no valid
// envelope but names a job id (recorded under that id, with its kind when the body has a valid
// one); a payload mismatch against a record of the same job id; a middleware outside this one
// that dead-lettered the job without calling next — it records the job as dead with the reason
// (Store.MarkDead: one conditional write): its record becomes dead, or a dead record is written
// where the job has none, so that status listings of dead jobs show every job in the DLQ. A
// record of another job, or in another state, is left alone, and so is a job whose key or id is
// too long for a record (ErrKeyTooLong). A failed write is logged, counted in FinishErrors and
// passed to OnFinishError; the message is in the DLQ all the same.
func (m *Middleware) RecordDeadLetter(ctx context.Context, job *jobs.Info, reason string, err error, calledNext bool) {
	var r *refusal
	if calledNext || job.ID == "" && (job.Kind == "" || job.Key == "") || errors.As(err, &r) && r.noMark {
		return
	}
	m.markDead(ctx, job, reason, err)
}

// markDead records a dead-lettered job as dead.
func (m *Middleware) markDead(ctx context.Context, job *jobs.Info, reason string, jobErr error) {
	kind, key := job.Kind, job.Key
	if key == "" || kind == "" {
		key = job.ID // a job known by its id alone (a malformed body): recorded under its id
	}
	var hash string
	if kind != "" {
		hash, _ = jobs.PayloadHash(kind, job.RawArgs) // "" for args that cannot be hashed: the job id decides
	}
	if hash == "" && job.ID == "" {
		return
	}
	now := m.cfg.Now()
	mark := DeadMark{Kind: kind, Key: key, JobID: job.ID, PayloadHash: hash, Reason: reason,
		MessageID: job.MessageID, Now: now, ExpiresAt: now.Add(m.cfg.RecordTTL), Meta: job.Meta}
	if jobErr != nil {
		mark.Error = jobErr.Error()
	}
	marked, err := m.cfg.Store.MarkDead(ctx, mark)
	if errors.Is(err, ErrKeyTooLong) {
		m.cfg.Logger.WarnContext(ctx, "sqsworker: the dead-lettered job has no record: its key or id is too long for one",
			"job_id_bytes", len(job.ID), "kind", kind, "reason", reason, "error", err)
		return
	}
	if err != nil {
		m.stats.finishErrors.Add(1)
		m.cfg.Logger.ErrorContext(ctx, "sqsworker: could not record the dead-lettered job as dead", "job_id", job.ID,
			"kind", job.Kind, "key", job.Key, "reason", reason, "error", err)
		if m.cfg.OnFinishError != nil {
			m.cfg.OnFinishError(ctx, job, err)
		}
		return
	}
	if marked {
		m.stats.deadMarks.Add(1)
	}
}

type resultKey struct{}

// resultHolder receives a job's result (SetResult).
type resultHolder struct {
	mu  sync.Mutex
	val string
}

// SetResult stores v (JSON, at most MaxResultBytes) as the job's result: it is kept on the job's
// record when the job succeeds, so status lookups (status.Table.Get, `sqsworker status`) show it.
// It returns an error when ctx is not the context of a job run by the idempotency middleware, or
// when v is too large.
func SetResult(ctx context.Context, v []byte) error {
	h, ok := ctx.Value(resultKey{}).(*resultHolder)
	if !ok {
		return errors.New("idempotency: SetResult outside a job run by the idempotency middleware")
	}
	if len(v) > MaxResultBytes {
		return fmt.Errorf("idempotency: result of %d bytes is above the limit of %d", len(v), MaxResultBytes)
	}
	h.mu.Lock()
	h.val = string(v)
	h.mu.Unlock()
	return nil
}

// Outcome returns the state (and dead-letter reason) a job's result leads to, as the worker
// decides it: nil succeeds; a run that ends without ending the job (a jobs.ContinueError: its
// slice ended, or it sleeps) is queued, or scheduled for a sleep; a job stopped on a cancellation
// request (a jobs.CancelError wrapping jobs.ErrCancelRequested) is cancelled; Cancel, DeadLetter,
// undecodable args and a failure on the last attempt are dead; other failures retry.
func Outcome(job *jobs.Info, err error) (State, string) {
	if err == nil || errors.Is(err, jobs.ErrSkipped) {
		return StateSucceeded, ""
	}
	var (
		dead   *jobs.DeadLetterError
		cancel *jobs.CancelError
		args   *jobs.ArgsError
		deferE *jobs.DeferError
		cont   *jobs.ContinueError
	)
	switch {
	case errors.As(err, &deferE):
		return StateRetrying, ""
	case errors.As(err, &args):
		return StateDead, jobs.ReasonMalformed
	case errors.As(err, &dead):
		return StateDead, dead.Reason
	case errors.As(err, &cancel) && errors.Is(cancel, jobs.ErrCancelRequested):
		return StateCancelled, jobs.ReasonCancelled // cancelled on request while it ran
	case errors.As(err, &cancel):
		return StateDead, jobs.ReasonCancelled
	// A continuation after the dead letters and cancellations, which may wrap one (a cancellation
	// requested while the job ran, a limit reached).
	case errors.As(err, &cont) && (cont.Delay > 0 || !cont.Until.IsZero()):
		return StateScheduled, "" // sleeping: it continues at its wake time (a new message)
	case errors.As(err, &cont):
		return StateQueued, "" // its slice ended: it continues at once (a new message)
	case job.Attempt >= job.MaxAttempts:
		return StateDead, jobs.ReasonExhausted
	}
	return StateRetrying, ""
}

func (m *Middleware) succeededTTL(kind string) time.Duration {
	if ttl, ok := m.cfg.KindSucceededTTL[kind]; ok {
		return ttl
	}
	return m.cfg.SucceededTTL
}

// jitter returns d plus up to 50% of it.
func (m *Middleware) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration(m.cfg.Rand(int64(d)/2+1))
}

// lru remembers recently completed keys with their expiry.
type lru struct {
	mu    sync.Mutex
	size  int
	order *list.List // front = most recent; values are *lruEntry
	byKey map[string]*list.Element
}

type lruEntry struct {
	key, hash string
	expires   time.Time
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), byKey: make(map[string]*list.Element, size)}
}

// contains reports whether key completed with the same payload hash and has not expired. A
// different hash is not a hit: the store decides (payload_mismatch).
func (c *lru) contains(key, hash string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok || el.Value.(*lruEntry).hash != hash {
		return false
	}
	if !now.Before(el.Value.(*lruEntry).expires) {
		c.order.Remove(el)
		delete(c.byKey, key)
		return false
	}
	c.order.MoveToFront(el)
	return true
}

func (c *lru) add(key, hash string, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		e := el.Value.(*lruEntry)
		e.hash, e.expires = hash, expires
		c.order.MoveToFront(el)
		return
	}
	c.byKey[key] = c.order.PushFront(&lruEntry{key: key, hash: hash, expires: expires})
	if c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*lruEntry).key)
	}
}
