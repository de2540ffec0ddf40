package flow

import (
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

// ErrLimited is wrapped by the cause of a job deferred because a limit had no room.
var ErrLimited = errors.New("flow: limit reached")

// ErrPaused is wrapped by the cause of a job deferred because its kind is paused.
var ErrPaused = errors.New("flow: kind paused")

// Store is what the middleware needs of the table: *Table implements it. Tests wrap it to
// inject failures.
type Store interface {
	AcquireSlot(ctx context.Context, req SlotRequest) (SlotResult, error)
	ReleaseSlot(ctx context.Context, s Slot) error
	RenewSlot(ctx context.Context, s Slot, until time.Time) (Slot, error)
	HandoffSlot(ctx context.Context, s Slot, jobID string, until time.Time) (Slot, error)
	PeekSlot(ctx context.Context, name, key string, limit int, now time.Time) (bool, error)
	TakeToken(ctx context.Context, req TokenRequest) (TokenResult, error)
	Pauses(ctx context.Context) (Pauses, error)
}

var _ Store = (*Table)(nil)

// Defaults of Config.
const (
	DefaultMaxDeferral     = 24 * time.Hour
	DefaultLease           = 5 * time.Minute
	DefaultAbandonGrace    = 60 * time.Second
	DefaultPauseCheck      = 5 * time.Second
	DefaultPausedDelay     = time.Minute
	DefaultMinDelay        = time.Second
	DefaultStoreRetryDelay = 10 * time.Second
	DefaultMaxHold         = time.Second
)

// Config configures NewMiddleware. Store is required; every other field's zero value is its
// default.
type Config struct {
	// Store keeps the slots, buckets and pauses: a *Table on the job table. Required.
	Store Store
	// Concurrency and Rates are the limits, each of one kind; a kind may have several of both.
	// They are checked here: a limit that cannot work is an error wrapping ErrConfig.
	Concurrency []Concurrency
	Rates       []Rate
	// MaxDeferral bounds how long a job waits for its limits: a job denied a slot or a token
	// after waiting that long (since its first deferral, as its re-sent copies carry it) is
	// dead-lettered with the reason jobs.ReasonDeferredTooLong. Time spent paused does not
	// count. Defaults to 24 hours.
	MaxDeferral time.Duration
	// Lease is a slot's lease when the job's context has no deadline (a poller in a container):
	// renewed every Lease/3 while the job runs; if a renewal fails, the job's context is
	// cancelled. In Lambda the lease is the invocation's deadline plus AbandonGrace. At least
	// 3 s. Defaults to 5 minutes.
	Lease time.Duration
	// AbandonGrace is added to the context's deadline to make a slot's lease: a job abandoned at
	// the deadline keeps its slot that long. Match the worker's AbandonGrace. Defaults to 60 s.
	AbandonGrace time.Duration
	// PauseCheck is how long the paused kinds read from the table are used before they are read
	// again: at most one read per PauseCheck per process. Defaults to 5 s.
	PauseCheck time.Duration
	// PausedDelay is how long a job of a paused kind is deferred (plus up to half of it as
	// jitter). Each deferral is a receive and a visibility change; a longer delay costs less and
	// resumes later. Defaults to 1 minute.
	PausedDelay time.Duration
	// MinDelay is the shortest deferral for a limit. Defaults to 1 s (SQS counts visibility in
	// whole seconds).
	MinDelay time.Duration
	// StoreRetryDelay is how long a job waits (deferred) when the table fails. Defaults to 10 s,
	// plus up to half of it as jitter.
	StoreRetryDelay time.Duration
	// MaxHold is how long a job denied a slot or a token may wait in the process before it is
	// deferred through SQS: a job that another job of this process will hand its slot to when it
	// ends, or whose rate token is due within MaxHold (it reserves the token and waits for it).
	// SQS counts visibility in whole seconds, so without holding, deferred jobs come back in
	// clumps and a limit runs below its capacity between them. Holding costs the wait's duration
	// (billed in Lambda) and never passes the invocation's deadline. Defaults to 1 s; a negative
	// value turns holding off.
	MaxHold time.Duration
	// Logger receives the table's failures. Defaults to slog.Default().
	Logger *slog.Logger
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
	// Rand returns a uniform int64 in [0, n), for jitter. Defaults to math/rand/v2's Int64N.
	Rand func(n int64) int64
}

// Stats counts what the middleware did.
type Stats struct {
	Acquired     int64 // concurrency slots acquired (Handoffs of them from a job of this process)
	Handoffs     int64
	Held         int64 // jobs that waited in the process (MaxHold) for a slot or a reserved token
	Released     int64 // slots released
	Pruned       int64 // expired holders removed (their jobs died)
	SlotDenied   int64 // jobs deferred for want of a slot
	Tokens       int64 // rate tokens taken
	TokenDenied  int64 // jobs deferred for want of a token (LocalDenied of them without a write)
	LocalDenied  int64
	Paused       int64 // jobs deferred because their kind is paused
	TooLong      int64 // jobs dead-lettered as deferred_too_long
	KeyErrors    int64 // jobs dead-lettered as flow_key
	StoreErrors  int64 // table failures (the job was deferred)
	ReleaseFails int64 // releases that failed (the slot returns when its lease ends)
	LeaseLost    int64 // jobs whose context was cancelled because a slot's renewal failed
}

// Middleware applies the limits and pauses to every job. It implements the worker's
// Middleware interface; place it before (outside) the idempotency middleware, so that its
// deferrals spend no attempt.
type Middleware struct {
	cfg    Config
	limits map[string][]limit
	pauses *pauseCache

	hints     sync.Map // rate item pk → *atomic.Int64: the bucket's TAT seen last (unix µs)
	durMu     sync.Mutex
	durations map[string]time.Duration // limit name → moving average of its jobs' run time

	waitMu  sync.Mutex
	waiters map[string][]*waiter // limit item pk → jobs of this process waiting for a slot, in order

	stats struct {
		handoffs, held,
		acquired, released, pruned, slotDenied, tokens, tokenDenied, localDenied, paused, tooLong,
		keyErrors, storeErrors, releaseFails, leaseLost atomic.Int64
	}
}

// NewMiddleware validates cfg (every problem, each wrapping ErrConfig) and returns the
// middleware.
func NewMiddleware(cfg Config) (*Middleware, error) {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, fmt.Errorf("%w: Store is required", ErrConfig))
	}
	limits, err := compile(cfg.Concurrency, cfg.Rates)
	if err != nil {
		errs = append(errs, err)
	}
	durations := []struct {
		name     string
		field    *time.Duration
		def, min time.Duration
		max      time.Duration
	}{
		{"MaxDeferral", &cfg.MaxDeferral, DefaultMaxDeferral, time.Second, 14 * 24 * time.Hour},
		{"Lease", &cfg.Lease, DefaultLease, 3 * time.Second, jobs.MaxVisibility},
		{"AbandonGrace", &cfg.AbandonGrace, DefaultAbandonGrace, 0, jobs.MaxVisibility},
		{"PauseCheck", &cfg.PauseCheck, DefaultPauseCheck, 100 * time.Millisecond, 10 * time.Minute},
		{"PausedDelay", &cfg.PausedDelay, DefaultPausedDelay, time.Second, jobs.MaxVisibility},
		{"MinDelay", &cfg.MinDelay, DefaultMinDelay, 0, 15 * time.Minute},
		{"StoreRetryDelay", &cfg.StoreRetryDelay, DefaultStoreRetryDelay, time.Second, jobs.MaxVisibility},
		{"MaxHold", &cfg.MaxHold, DefaultMaxHold, -1 << 62, time.Minute},
	}
	for _, d := range durations {
		if *d.field == 0 {
			*d.field = d.def
		}
		if *d.field < d.min || *d.field > d.max {
			errs = append(errs, fmt.Errorf("%w: %s %s is out of range %s-%s", ErrConfig, d.name, *d.field, d.min, d.max))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
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
	return &Middleware{
		cfg:       cfg,
		limits:    limits,
		pauses:    &pauseCache{src: cfg.Store, ttl: cfg.PauseCheck, now: cfg.Now},
		durations: map[string]time.Duration{},
		waiters:   map[string][]*waiter{},
	}, nil
}

// Stats returns the counters so far.
func (m *Middleware) Stats() Stats {
	s := &m.stats
	return Stats{
		Handoffs: s.handoffs.Load(), Held: s.held.Load(),
		Acquired: s.acquired.Load(), Released: s.released.Load(), Pruned: s.pruned.Load(), SlotDenied: s.slotDenied.Load(),
		Tokens: s.tokens.Load(), TokenDenied: s.tokenDenied.Load(), LocalDenied: s.localDenied.Load(), Paused: s.paused.Load(),
		TooLong: s.tooLong.Load(), KeyErrors: s.keyErrors.Load(), StoreErrors: s.storeErrors.Load(),
		ReleaseFails: s.releaseFails.Load(), LeaseLost: s.leaseLost.Load(),
	}
}

// Work applies the pauses and limits to the job, runs it (next) once it holds every limit, and
// gives its concurrency slots back when next returns, whether it succeeded, failed or panicked.
func (m *Middleware) Work(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
	now := m.cfg.Now()
	pauses, err := m.pauses.get(ctx)
	if err != nil {
		m.cfg.Logger.WarnContext(ctx, "sqsworker: could not read the paused kinds; using the last ones read", "error", err)
	}
	if pauses.KindPaused(job.Kind) {
		m.stats.paused.Add(1)
		// The deferral's start is reset to now: time spent paused does not count towards
		// MaxDeferral.
		return jobs.DeferUntilSince(m.jitter(m.cfg.PausedDelay), now, fmt.Errorf("%w: %s", ErrPaused, job.Kind))
	}
	ls := m.limits[job.Kind]
	if len(ls) == 0 {
		return next(ctx)
	}
	keys := make([]string, len(ls))
	for i := range ls {
		k, err := m.key(&ls[i], job)
		if err != nil {
			m.stats.keyErrors.Add(1)
			return jobs.DeadLetter(jobs.ReasonFlowKey, err)
		}
		keys[i] = k
	}
	since := deferralStart(job, now)

	// A rate limit whose bucket this process saw full denies at once, without a write: the
	// bucket's time only grows, so what was seen is a lower bound.
	for i := range ls {
		l := &ls[i]
		if l.kind != kindRate {
			continue
		}
		if wait, full := m.seenFull(l, keys[i], now, m.holdUntil(ctx, now).Sub(now)); full {
			m.stats.tokenDenied.Add(1)
			m.stats.localDenied.Add(1)
			return m.deny(job, since, now, m.rateDelay(l, wait),
				fmt.Errorf("%w: rate %s key %q: %d per %s, burst %d", ErrLimited, l.name, keys[i], l.limit, l.period, l.burst))
		}
	}

	lease, renew := m.lease(ctx, now)
	holdUntil := m.holdUntil(ctx, now)
	startAt := now // the latest reserved start of the job's rate tokens
	var held []Slot
	for i := range ls {
		l := &ls[i]
		switch l.kind {
		case kindConcurrency:
			req := SlotRequest{Name: l.name, Key: keys[i], Limit: l.limit, JobID: job.ID, LeaseUntil: lease, Now: now}
			var res SlotResult
			var err error
			if holdUntil.After(now) && m.hasWaiters(limitPK(l.name, keys[i])) {
				// Jobs of this process already wait for this limit (it was full a moment ago):
				// queue behind them without a write that would most likely be refused.
				res, err = m.waitForSlot(ctx, req, holdUntil)
			} else {
				res, err = m.cfg.Store.AcquireSlot(ctx, req)
				if err == nil && !res.Acquired && res.HeldUntil.IsZero() && holdUntil.After(m.cfg.Now()) {
					res, err = m.waitForSlot(ctx, req, holdUntil)
				}
			}
			if err != nil {
				m.release(ctx, held)
				return m.storeFailed(ctx, job, since, now, err)
			}
			m.stats.pruned.Add(int64(res.Pruned))
			if !res.Acquired {
				m.release(ctx, held)
				m.stats.slotDenied.Add(1)
				delay, cause := m.slotDelay(l, keys[i], &res, now)
				return m.deny(job, since, now, delay, cause)
			}
			m.stats.acquired.Add(1)
			held = append(held, res.Slot)
		case kindRate:
			tnow := m.cfg.Now()
			res, err := m.cfg.Store.TakeToken(ctx, TokenRequest{Name: l.name, Key: keys[i], Limit: l.limit, Period: l.period,
				Burst: l.burst, Now: tnow, Hint: m.hint(l, keys[i]), Hold: max(holdUntil.Sub(tnow), 0)})
			if err != nil {
				m.release(ctx, held)
				return m.storeFailed(ctx, job, since, now, err)
			}
			m.see(l, keys[i], res.TAT)
			if !res.Granted {
				m.release(ctx, held)
				m.stats.tokenDenied.Add(1)
				return m.deny(job, since, now, m.rateDelay(l, res.Wait),
					fmt.Errorf("%w: rate %s key %q: %d per %s, burst %d", ErrLimited, l.name, keys[i], l.limit, l.period, l.burst))
			}
			m.stats.tokens.Add(1)
			if res.StartAt.After(startAt) {
				startAt = res.StartAt
			}
		}
	}
	if wait := startAt.Sub(m.cfg.Now()); wait > 0 {
		// A reserved token: wait for its time (within MaxHold).
		m.stats.held.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			m.release(ctx, held)
			return m.deny(job, since, now, m.cfg.MinDelay, fmt.Errorf("flow: stopped while waiting for a reserved token: %w", ctx.Err()))
		}
	}
	if len(held) == 0 {
		return next(ctx)
	}
	return m.run(ctx, job, held, renew, ls, next)
}

// run calls next while the job holds its slots, renewing them when they have no deadline, and
// releases them when next returns or panics.
func (m *Middleware) run(ctx context.Context, job *jobs.Info, held []Slot, renew bool, ls []limit, next func(context.Context) error) error {
	start := m.cfg.Now()
	runCtx := ctx
	var sh *heldSlots
	stop := func() {}
	if renew {
		sh = &heldSlots{slots: held}
		runCtx, stop = m.renewWhileRunning(ctx, job, sh)
	}
	defer func() {
		stop()
		if sh != nil {
			held = sh.get()
		}
		m.release(ctx, held)
		m.observe(ls, m.cfg.Now().Sub(start))
	}()
	return next(runCtx)
}

// heldSlots are the slots of a job whose renewals replace them.
type heldSlots struct {
	mu    sync.Mutex
	slots []Slot
}

func (h *heldSlots) get() []Slot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Slot(nil), h.slots...)
}

// renewWhileRunning renews the slots every Lease/3 until stopped; when a renewal fails twice in a
// row, or the slot was lost, the job's context is cancelled (the slot may be someone else's).
func (m *Middleware) renewWhileRunning(ctx context.Context, job *jobs.Info, sh *heldSlots) (context.Context, func()) {
	runCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(m.cfg.Lease / 3)
		defer t.Stop()
		failures := 0
		for {
			select {
			case <-done:
				return
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			until := m.cfg.Now().Add(m.cfg.Lease)
			var failed error
			sh.mu.Lock()
			for i, s := range sh.slots {
				r, err := m.cfg.Store.RenewSlot(runCtx, s, until)
				if err != nil {
					failed = err
					if errors.Is(err, ErrSlotLost) {
						break
					}
					continue
				}
				sh.slots[i] = r
			}
			sh.mu.Unlock()
			if failed == nil {
				failures = 0
				continue
			}
			if failures++; !errors.Is(failed, ErrSlotLost) && failures < 2 {
				m.cfg.Logger.WarnContext(ctx, "sqsworker: flow slot renewal failed; retrying", "job_id", job.ID, "error", failed)
				continue
			}
			m.stats.leaseLost.Add(1)
			m.cfg.Logger.ErrorContext(ctx, "sqsworker: flow slot renewal failed; cancelling the job", "job_id", job.ID,
				"kind", job.Kind, "error", failed)
			cancel(fmt.Errorf("flow: slot lease lost: %w", failed))
			return
		}
	}()
	return runCtx, func() { close(done); wg.Wait(); cancel(nil) }
}

// release gives the slots back, with a budget of its own (the job's context may be at its
// deadline). A failure is logged: the slot returns when its lease ends.
func (m *Middleware) release(ctx context.Context, held []Slot) {
	if len(held) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, s := range held {
		if m.handOff(rctx, s) {
			continue
		}
		if err := m.cfg.Store.ReleaseSlot(rctx, s); err != nil {
			m.stats.releaseFails.Add(1)
			m.cfg.Logger.ErrorContext(ctx, "sqsworker: could not release a flow slot; it returns when its lease ends",
				"limit", s.Name, "key", s.Key, "lease_until", s.LeaseUntil, "error", err)
			continue
		}
		m.stats.released.Add(1)
	}
}

// key returns the job's key for a limit. A key function that fails, panics or returns "" is a
// flow_key dead letter.
func (m *Middleware) key(l *limit, job *jobs.Info) (key string, err error) {
	if l.key == nil {
		return "", nil
	}
	defer func() {
		if v := recover(); v != nil {
			key, err = "", fmt.Errorf("key function of %s limit %q panicked: %v", l.kind, l.name, v)
		}
	}()
	key, err = l.key(job)
	switch {
	case err != nil:
		return "", fmt.Errorf("key function of %s limit %q: %w", l.kind, l.name, err)
	case key == "":
		return "", fmt.Errorf("key function of %s limit %q returned an empty key", l.kind, l.name)
	}
	return key, nil
}

// deferralStart returns when the job's wait began: the start its re-sent copy carries, else
// the first receive of this copy, else now.
func deferralStart(job *jobs.Info, now time.Time) time.Time {
	if t, ok := jobs.DeferredSince(job, now); ok {
		return t
	}
	if !job.FirstReceivedAt.IsZero() && !job.FirstReceivedAt.After(now) {
		return job.FirstReceivedAt
	}
	return now
}

// deny defers the job for delay, or dead-letters it when it has waited MaxDeferral already. The
// delay never takes the job past its bound by more than a second, so that a job that cannot
// get in is dead-lettered near the bound.
func (m *Middleware) deny(job *jobs.Info, since, now time.Time, delay time.Duration, cause error) error {
	waited := now.Sub(since)
	if waited >= m.cfg.MaxDeferral {
		m.stats.tooLong.Add(1)
		return jobs.DeadLetter(jobs.ReasonDeferredTooLong,
			fmt.Errorf("waited %s since %s, more than MaxDeferral %s: %w", waited.Round(time.Second),
				since.UTC().Format(time.RFC3339), m.cfg.MaxDeferral, cause))
	}
	if left := m.cfg.MaxDeferral - waited + time.Second; delay > left {
		delay = left
	}
	return jobs.DeferUntilSince(delay, since, cause)
}

// storeFailed defers a job whose limits could not be checked: nothing runs over a limit.
func (m *Middleware) storeFailed(ctx context.Context, job *jobs.Info, since, now time.Time, err error) error {
	m.stats.storeErrors.Add(1)
	m.cfg.Logger.WarnContext(ctx, "sqsworker: flow limits could not be checked; deferring the job", "job_id", job.ID,
		"kind", job.Kind, "error", err)
	return m.deny(job, since, now, m.jitter(m.cfg.StoreRetryDelay), err)
}

// slotDelay is how long a job denied a slot waits: about one of the limit's runs (as measured in
// this process, at least MinDelay), or until the earliest lease ends if that is sooner (a holder
// that died), with up to as much again as jitter so that waiting jobs spread out.
func (m *Middleware) slotDelay(l *limit, key string, res *SlotResult, now time.Time) (time.Duration, error) {
	if !res.HeldUntil.IsZero() {
		// Another delivery of this very job holds a slot: wait for it to end.
		remaining := max(res.HeldUntil.Sub(now), 0)
		return remaining + m.jitter(min(remaining/4+time.Second, 30*time.Second)),
			fmt.Errorf("%w: concurrency %s key %q: another delivery of this job holds a slot until %s", ErrLimited, l.name, key,
				res.HeldUntil.UTC().Format(time.RFC3339))
	}
	base := max(m.avgDuration(l.name), m.cfg.MinDelay)
	if !res.EarliestEnd.IsZero() {
		if until := res.EarliestEnd.Sub(now); until < base {
			base = max(until, m.cfg.MinDelay)
		}
	}
	return m.spread(base), fmt.Errorf("%w: concurrency %s key %q: %d of %d slots held", ErrLimited, l.name, key, res.Holders, l.limit)
}

// rateDelay is how long a job denied a token waits: until the next token is due (at least
// MinDelay), plus jitter of up to half of that or one token interval.
func (m *Middleware) rateDelay(l *limit, wait time.Duration) time.Duration {
	base := max(wait, m.cfg.MinDelay)
	step := time.Duration(interval(l.limit, l.period)) * time.Microsecond
	return base + time.Duration(m.cfg.Rand(int64(max(base/2, step))+1))
}

// spread returns d plus a uniform jitter of up to d.
func (m *Middleware) spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration(m.cfg.Rand(int64(d)+1))
}

// jitter returns d plus up to half of it.
func (m *Middleware) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration(m.cfg.Rand(int64(d)/2+1))
}

// lease returns a slot's lease end, and whether it must be renewed (no deadline).
func (m *Middleware) lease(ctx context.Context, now time.Time) (time.Time, bool) {
	if dl, ok := ctx.Deadline(); ok {
		return dl.Add(m.cfg.AbandonGrace), false
	}
	return now.Add(m.cfg.Lease), true
}

// hint returns the bucket time this process saw last (zero when none).
func (m *Middleware) hint(l *limit, key string) time.Time {
	if v, ok := m.hints.Load(ratePK(l.name, key)); ok {
		return time.UnixMicro(v.(*atomic.Int64).Load())
	}
	return time.Time{}
}

// see records a bucket time seen (keeping the largest: it only grows).
func (m *Middleware) see(l *limit, key string, tat time.Time) {
	if tat.IsZero() {
		return
	}
	v, _ := m.hints.LoadOrStore(ratePK(l.name, key), new(atomic.Int64))
	h := v.(*atomic.Int64)
	us := tat.UnixMicro()
	for {
		old := h.Load()
		if us <= old || h.CompareAndSwap(old, us) {
			return
		}
	}
}

// seenFull reports whether the bucket, as last seen, has no token due now, and how long until
// one is.
func (m *Middleware) seenFull(l *limit, key string, now time.Time, hold time.Duration) (time.Duration, bool) {
	h := m.hint(l, key)
	if h.IsZero() {
		return 0, false
	}
	T := interval(l.limit, l.period)
	maxTAT := now.UnixMicro() + int64(l.burst-1)*T + max(hold, 0).Microseconds()
	if over := h.UnixMicro() - maxTAT; over > 0 {
		return time.Duration(over) * time.Microsecond, true
	}
	return 0, false
}

// observe feeds a run's duration into the moving average of each of its concurrency limits.
func (m *Middleware) observe(ls []limit, d time.Duration) {
	m.durMu.Lock()
	defer m.durMu.Unlock()
	for i := range ls {
		if ls[i].kind != kindConcurrency {
			continue
		}
		if old, ok := m.durations[ls[i].name]; ok {
			m.durations[ls[i].name] = old + (d-old)/5
		} else {
			m.durations[ls[i].name] = d
		}
	}
}

func (m *Middleware) avgDuration(name string) time.Duration {
	m.durMu.Lock()
	defer m.durMu.Unlock()
	return m.durations[name]
}

// waiter is a job of this process waiting for a slot (MaxHold).
type waiter struct {
	jobID   string
	lease   time.Time
	claimed atomic.Bool // set by whoever ends the wait: a releaser (handoff) or the waiter
	got     chan Slot   // the slot handed over; a zero Slot: try to acquire
}

// holdUntil returns until when a job may wait in the process: MaxHold from now, never closer
// than a second to the context's deadline (zero when holding is off or there is no time).
func (m *Middleware) holdUntil(ctx context.Context, now time.Time) time.Time {
	if m.cfg.MaxHold <= 0 {
		return time.Time{}
	}
	until := now.Add(m.cfg.MaxHold)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-time.Second).Before(until) {
		until = dl.Add(-time.Second)
	}
	if !until.After(now) {
		return time.Time{}
	}
	return until
}

// waitForSlot waits, until holdUntil, for a job of this process to hand its slot over. The first
// waiter of the process for the limit also reads the limit's item now and then (PeekSlot, about
// a quarter of the limit's average run, between 25 and 250 ms) and tries to acquire when a slot
// is free (another process released it). When the wait ends without a slot (or the handoff
// failed) it tries to acquire once more.
func (m *Middleware) waitForSlot(ctx context.Context, req SlotRequest, holdUntil time.Time) (SlotResult, error) {
	pk := limitPK(req.Name, req.Key)
	m.stats.held.Add(1)
	poll := min(max(m.avgDuration(req.Name)/4, 25*time.Millisecond), 250*time.Millisecond)
	if m.avgDuration(req.Name) == 0 {
		poll = 100 * time.Millisecond
	}
	for {
		w := &waiter{jobID: req.JobID, lease: req.LeaseUntil, got: make(chan Slot, 1)}
		m.waitMu.Lock()
		m.waiters[pk] = append(m.waiters[pk], w)
		m.waitMu.Unlock()
		end := time.NewTimer(holdUntil.Sub(m.cfg.Now()))
		tick := time.NewTicker(poll)
		var got *Slot
		peeked, stop := false, false
	wait:
		for {
			select {
			case s := <-w.got:
				got, stop = &s, true
				break wait
			case <-end.C:
				stop = true
				break wait
			case <-ctx.Done():
				stop = true
				break wait
			case <-tick.C:
				if !m.firstWaiter(pk, w) {
					continue
				}
				free, err := m.cfg.Store.PeekSlot(ctx, req.Name, req.Key, req.Limit, m.cfg.Now())
				if err == nil && free {
					peeked = true
					break wait
				}
			}
		}
		end.Stop()
		tick.Stop()
		if got == nil && !w.claimed.CompareAndSwap(false, true) {
			// A releaser took this waiter at the last moment: its answer is coming.
			s := <-w.got
			got = &s
		}
		if got != nil && got.attr != "" {
			return SlotResult{Acquired: true, Slot: *got}, nil
		}
		m.dropWaiter(pk, w)
		req.Now = m.cfg.Now()
		if !peeked && ctx.Err() == nil {
			// The wait ended: read before writing, so that a limit still full costs a read,
			// not a refused write.
			if free, err := m.cfg.Store.PeekSlot(ctx, req.Name, req.Key, req.Limit, req.Now); err == nil && !free {
				return SlotResult{}, nil
			}
		}
		res, err := m.cfg.Store.AcquireSlot(ctx, req)
		if err != nil || res.Acquired || stop || !res.HeldUntil.IsZero() || !peeked || !holdUntil.After(m.cfg.Now()) {
			return res, err
		}
		// Another process was quicker: wait on.
	}
}

// hasWaiters reports whether jobs of this process wait for the limit item pk.
func (m *Middleware) hasWaiters(pk string) bool {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	return len(m.waiters[pk]) > 0
}

// firstWaiter reports whether w is the first job of this process waiting for the limit item pk.
func (m *Middleware) firstWaiter(pk string, w *waiter) bool {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	ws := m.waiters[pk]
	return len(ws) > 0 && ws[0] == w
}

func (m *Middleware) dropWaiter(pk string, w *waiter) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	ws := m.waiters[pk]
	for i, x := range ws {
		if x == w {
			m.waiters[pk] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(m.waiters[pk]) == 0 {
		delete(m.waiters, pk)
	}
}

// handOff passes a released slot to the first job of this process waiting for it, and reports
// whether it did (the slot is then the waiter's, not the releaser's to release). When the
// handoff's write is refused, the waiter is told to acquire by itself and the releaser releases
// as usual.
func (m *Middleware) handOff(ctx context.Context, s Slot) bool {
	pk := limitPK(s.Name, s.Key)
	m.waitMu.Lock()
	ws := m.waiters[pk]
	var w *waiter
	for len(ws) > 0 {
		w, ws = ws[0], ws[1:]
		if w.claimed.CompareAndSwap(false, true) {
			break
		}
		w = nil
	}
	if len(ws) == 0 {
		delete(m.waiters, pk)
	} else {
		m.waiters[pk] = ws
	}
	m.waitMu.Unlock()
	if w == nil {
		return false
	}
	next, err := m.cfg.Store.HandoffSlot(ctx, s, w.jobID, w.lease)
	if err != nil {
		w.got <- Slot{}
		return false
	}
	m.stats.handoffs.Add(1)
	w.got <- next
	return true
}
