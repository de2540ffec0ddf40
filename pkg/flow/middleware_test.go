package flow_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// spyStore counts the store's calls and can fail them.
type spyStore struct {
	flow.Store
	pauses, acquires, renews atomic.Int64
	failRenew                error
	lastReq                  atomic.Value // flow.SlotRequest
}

func (s *spyStore) Pauses(ctx context.Context) (flow.Pauses, error) {
	s.pauses.Add(1)
	return s.Store.Pauses(ctx)
}

func (s *spyStore) AcquireSlot(ctx context.Context, req flow.SlotRequest) (flow.SlotResult, error) {
	s.acquires.Add(1)
	s.lastReq.Store(req)
	return s.Store.AcquireSlot(ctx, req)
}

func (s *spyStore) RenewSlot(ctx context.Context, sl flow.Slot, until time.Time) (flow.Slot, error) {
	s.renews.Add(1)
	if s.failRenew != nil {
		return sl, s.failRenew
	}
	return s.Store.RenewSlot(ctx, sl, until)
}

func info(id, kind string, meta map[string]string) *jobs.Info {
	return &jobs.Info{ID: id, Kind: kind, Key: id, Attempt: 1, MaxAttempts: 3, Meta: meta, RawArgs: []byte(`{"account":"a1"}`)}
}

func newMiddleware(t *testing.T, store flow.Store, clk *clock, mutate func(*flow.Config)) *flow.Middleware {
	t.Helper()
	cfg := flow.Config{Store: store, Now: clk.Now, Rand: func(n int64) int64 { return 0 }}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := flow.NewMiddleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	key := func(*jobs.Info) (string, error) { return "k", nil }
	for _, tc := range []struct {
		name string
		cfg  flow.Config
	}{
		{"no store", flow.Config{}},
		{"limit 0", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Limit: 0}}}},
		{"negative limit", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Limit: -1}}}},
		{"limit above MaxLimit", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Limit: flow.MaxLimit + 1}}}},
		{"bad kind", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "Bad!", Limit: 1}}}},
		{"bad name", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Name: "x#y", Limit: 1}}}},
		{"rate 0", flow.Config{Store: tbl, Rates: []flow.Rate{{Kind: "a", Limit: 0, Period: time.Second}}}},
		{"period under a second", flow.Config{Store: tbl, Rates: []flow.Rate{{Kind: "a", Limit: 1, Period: 999 * time.Millisecond}}}},
		{"negative burst", flow.Config{Store: tbl, Rates: []flow.Rate{{Kind: "a", Limit: 1, Period: time.Second, Burst: -1}}}},
		{"same name twice for a kind", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Limit: 1}, {Kind: "a", Limit: 2}}}},
		{"shared name, other limit", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Name: "api", Limit: 1}, {Kind: "b", Name: "api", Limit: 2}}}},
		{"shared name, keyed and not", flow.Config{Store: tbl, Concurrency: []flow.Concurrency{{Kind: "a", Name: "api", Limit: 1, Key: key}, {Kind: "b", Name: "api", Limit: 1}}}},
		{"lease under 3s", flow.Config{Store: tbl, Lease: time.Second}},
		{"negative max deferral", flow.Config{Store: tbl, MaxDeferral: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := flow.NewMiddleware(tc.cfg); !errors.Is(err, flow.ErrConfig) {
				t.Errorf("NewMiddleware: %v, want an error wrapping ErrConfig", err)
			}
		})
	}
	ok := flow.Config{Store: tbl,
		Concurrency: []flow.Concurrency{{Kind: "a", Name: "api", Limit: 2, Key: key}, {Kind: "b", Name: "api", Limit: 2, Key: key}, {Kind: "a", Limit: 5}},
		Rates:       []flow.Rate{{Kind: "a", Limit: 10, Period: time.Second}, {Kind: "a", Name: "per-account", Limit: 1, Period: time.Minute, Burst: 5, Key: key}}}
	if _, err := flow.NewMiddleware(ok); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

// TestConcurrencyLimitDefersAndReleases: with a limit of 1 per account, a second job of the same
// account is deferred (not run, its deferral's start given) while the first runs, a job of another
// account runs, and the slot comes back when the first returns, whether it succeeded, failed or
// panicked.
func TestConcurrencyLimitDefersAndReleases(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	clk := &clock{t: time.Now()}
	m := newMiddleware(t, tbl, clk, func(c *flow.Config) {
		c.Concurrency = []flow.Concurrency{{Kind: "partner.call", Limit: 1, Key: flow.ArgsKey(func(a struct {
			Account string `json:"account"`
		}) string {
			return a.Account
		})}}
	})
	ctx := context.Background()
	inside, leave := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- m.Work(ctx, info("J1", "partner.call", nil), func(context.Context) error {
			close(inside)
			<-leave
			return nil
		})
	}()
	<-inside
	second := info("J2", "partner.call", nil)
	second.FirstReceivedAt = clk.Now().Add(-time.Minute)
	ran := false
	err := m.Work(ctx, second, func(context.Context) error { ran = true; return nil })
	var d *jobs.DeferError
	if ran || !errors.As(err, &d) || !errors.Is(err, flow.ErrLimited) || d.Delay < time.Second || !d.Since.Equal(second.FirstReceivedAt) {
		t.Fatalf("second job: ran %v, %v; want deferred (ErrLimited, ≥ 1s, since its first receive)", ran, err)
	}
	other := info("J3", "partner.call", nil)
	other.RawArgs = []byte(`{"account":"a2"}`)
	if err := m.Work(ctx, other, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("another account's job: %v", err)
	}
	close(leave)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := m.Work(ctx, info("J4", "partner.call", nil), func(context.Context) error { return boom }); err != boom {
		t.Fatalf("failing job: %v", err)
	}
	func() {
		defer func() {
			if v := recover(); v != "kaboom" {
				t.Errorf("panic = %v, want it to go on to the worker", v)
			}
		}()
		_ = m.Work(ctx, info("J5", "partner.call", nil), func(context.Context) error { panic("kaboom") })
	}()
	ran = false
	if err := m.Work(ctx, info("J6", "partner.call", nil), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("after a success, a failure and a panic the slot is free: ran %v, %v", ran, err)
	}
	if s := m.Stats(); s.Acquired != 5 || s.Released != 5 || s.SlotDenied != 1 {
		t.Errorf("stats %+v; want 5 acquired and released, 1 denied", s)
	}
}

// TestKeyFunctionFailuresDeadLetter: a key function that returns an error, an empty key or panics
// dead-letters the job as flow_key, without running it or taking anything.
func TestKeyFunctionFailuresDeadLetter(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	spy := &spyStore{Store: tbl}
	for name, key := range map[string]flow.KeyFunc{
		"error":          func(*jobs.Info) (string, error) { return "", errors.New("no account") },
		"empty":          func(*jobs.Info) (string, error) { return "", nil },
		"panic":          func(*jobs.Info) (string, error) { panic("nil map") },
		"tenant missing": flow.TenantKey,
		"args":           flow.ArgsKey(func(a struct{ N int }) string { return "x" }),
	} {
		t.Run(name, func(t *testing.T) {
			m := newMiddleware(t, spy, &clock{t: t0}, func(c *flow.Config) {
				c.Concurrency = []flow.Concurrency{{Kind: "k", Limit: 1, Key: key}}
			})
			j := info("J", "k", nil)
			j.RawArgs = []byte(`{"N":"not a number"}`)
			ran := false
			err := m.Work(context.Background(), j, func(context.Context) error { ran = true; return nil })
			var dl *jobs.DeadLetterError
			if ran || !errors.As(err, &dl) || dl.Reason != jobs.ReasonFlowKey {
				t.Errorf("ran %v, %v; want a flow_key dead letter", ran, err)
			}
		})
	}
	if n := spy.acquires.Load(); n != 0 {
		t.Errorf("%d acquisitions; want none", n)
	}
}

// TestTenantKey: the tenant from the envelope's meta, else the message group.
func TestTenantKey(t *testing.T) {
	t.Parallel()
	if k, err := flow.TenantKey(&jobs.Info{Meta: map[string]string{jobs.MetaTenant: "acme"}, GroupID: "g"}); k != "acme" || err != nil {
		t.Errorf("meta tenant: %q, %v", k, err)
	}
	if k, err := flow.TenantKey(&jobs.Info{GroupID: "g"}); k != "g" || err != nil {
		t.Errorf("group: %q, %v", k, err)
	}
}

// TestMaxDeferral: a job denied after waiting MaxDeferral (since its re-sent copy's start, or its
// first receive) is dead-lettered as deferred_too_long; before that it is deferred with its start,
// and never past the bound by more than a second.
func TestMaxDeferral(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	clk := &clock{t: t0}
	m := newMiddleware(t, tbl, clk, func(c *flow.Config) {
		c.Concurrency = []flow.Concurrency{{Kind: "k", Limit: 1}}
		c.MaxDeferral = time.Hour
	})
	ctx := context.Background()
	holder := make(chan struct{})
	defer close(holder)
	inside := make(chan struct{})
	go m.Work(ctx, info("HOLDER", "k", nil), func(context.Context) error { close(inside); <-holder; return nil })
	<-inside

	since := t0.Add(-59*time.Minute - 59*time.Second)
	j := info("W", "k", map[string]string{jobs.MetaDeferredSince: since.Format(jobs.TimeLayout)})
	err := m.Work(ctx, j, func(context.Context) error { return nil })
	var d *jobs.DeferError
	if !errors.As(err, &d) || !d.Since.Equal(since) || d.Delay > 2*time.Second {
		t.Fatalf("one second before the bound: %v; want deferred with its start, for at most the rest (+1s)", err)
	}
	clk.Add(time.Second)
	err = m.Work(ctx, j, func(context.Context) error { return nil })
	var dl *jobs.DeadLetterError
	if !errors.As(err, &dl) || dl.Reason != jobs.ReasonDeferredTooLong || !errors.Is(err, flow.ErrLimited) {
		t.Fatalf("at the bound: %v; want a deferred_too_long dead letter", err)
	}
	old := info("OLD", "k", nil)
	old.FirstReceivedAt = t0.Add(-2 * time.Hour)
	if err := m.Work(ctx, old, func(context.Context) error { return nil }); !errors.As(err, &dl) {
		t.Fatalf("first received two hours ago: %v; want a dead letter", err)
	}
}

// TestPausedKind: a paused kind's jobs are deferred without running, their deferral's start reset
// (time paused does not count), other kinds run; the pauses are read at most once per PauseCheck;
// after a resume the kind runs again once the cache expires.
func TestPausedKind(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	spy := &spyStore{Store: tbl}
	clk := &clock{t: t0}
	m := newMiddleware(t, spy, clk, func(c *flow.Config) { c.PauseCheck = 5 * time.Second; c.PausedDelay = 30 * time.Second })
	ctx := context.Background()
	if err := tbl.PauseKind(ctx, flow.Pause{Kind: "email.send", By: "test"}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		ran := false
		err := m.Work(ctx, info("E", "email.send", map[string]string{jobs.MetaDeferredSince: t0.Add(-time.Hour).Format(jobs.TimeLayout)}),
			func(context.Context) error { ran = true; return nil })
		var d *jobs.DeferError
		if ran || !errors.As(err, &d) || !errors.Is(err, flow.ErrPaused) || !d.Since.Equal(t0) || d.Delay != 30*time.Second {
			t.Fatalf("paused kind: ran %v, %v; want deferred 30s, since now", ran, err)
		}
		if err := m.Work(ctx, info("O", "other.kind", nil), func(context.Context) error { return nil }); err != nil {
			t.Fatalf("another kind: %v", err)
		}
	}
	if n := spy.pauses.Load(); n != 1 {
		t.Errorf("%d pause reads for 40 jobs within PauseCheck; want 1", n)
	}
	if _, err := tbl.ResumeKind(ctx, "email.send"); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second)
	if err := m.Work(ctx, info("E", "email.send", nil), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("after resume and PauseCheck: %v", err)
	}
	if n := spy.pauses.Load(); n != 2 {
		t.Errorf("%d pause reads; want 2", n)
	}
}

// TestRateLimitDefersUntilTheNextToken: 1 per second: the second job is deferred until the next
// token (denied by the process's own view of the bucket, without a write), and runs when due.
func TestRateLimitDefersUntilTheNextToken(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	clk := &clock{t: t0}
	m := newMiddleware(t, tbl, clk, func(c *flow.Config) {
		c.Rates = []flow.Rate{{Kind: "sms.send", Limit: 1, Period: time.Second}}
		c.MinDelay = 100 * time.Millisecond
		c.MaxHold = -1 // no reservations: TestRateReservation
	})
	ctx := context.Background()
	if err := m.Work(ctx, info("A", "sms.send", nil), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	clk.Add(300 * time.Millisecond)
	err := m.Work(ctx, info("B", "sms.send", nil), func(context.Context) error { return nil })
	var d *jobs.DeferError
	if !errors.As(err, &d) || d.Delay != 700*time.Millisecond {
		t.Fatalf("second job: %v; want deferred 700ms (the next token)", err)
	}
	if s := m.Stats(); s.LocalDenied != 1 || s.Tokens != 1 {
		t.Errorf("stats %+v; want the denial without a write", s)
	}
	clk.Add(700 * time.Millisecond)
	if err := m.Work(ctx, info("B", "sms.send", nil), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("when due: %v", err)
	}
}

// TestSlotLeases: in Lambda (a deadline) the lease is the deadline plus AbandonGrace and is not
// renewed; without a deadline it is Lease, renewed every third, and a lost slot cancels the job.
func TestSlotLeases(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	spy := &spyStore{Store: tbl}
	m := newMiddleware(t, spy, &clock{t: time.Now()}, func(c *flow.Config) {
		c.Concurrency = []flow.Concurrency{{Kind: "k", Limit: 3}}
		c.Lease = 3 * time.Second
		c.AbandonGrace = 7 * time.Second
	})
	dl := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	if err := m.Work(ctx, info("L", "k", nil), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if req := spy.lastReq.Load().(flow.SlotRequest); !req.LeaseUntil.Equal(dl.Add(7 * time.Second)) {
		t.Errorf("lease in Lambda = %s, want the deadline + 7s", req.LeaseUntil)
	}

	spy.failRenew = flow.ErrSlotLost
	var cause error
	err := m.Work(context.Background(), info("C", "k", nil), func(ctx context.Context) error {
		<-ctx.Done() // cancelled once the first renewal (after Lease/3) finds the slot lost
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(cause, flow.ErrSlotLost) || spy.renews.Load() < 1 {
		t.Fatalf("lost slot: %v, cause %v, %d renewals; want the job cancelled", err, cause, spy.renews.Load())
	}
	if s := m.Stats(); s.LeaseLost != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestRateReservation: with MaxHold, a job whose token is due within it reserves the token (one
// write) and starts when it is due, instead of being deferred; a token due later is deferred.
func TestRateReservation(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	clk := &clock{t: time.Now()}
	m := newMiddleware(t, tbl, clk, func(c *flow.Config) {
		c.Rates = []flow.Rate{{Kind: "sms.send", Limit: 4, Period: time.Second}} // a token every 250 ms
		c.MaxHold = 400 * time.Millisecond
	})
	ctx := context.Background()
	ran := 0
	for _, id := range []string{"A", "B"} {
		if err := m.Work(ctx, info(id, "sms.send", nil), func(context.Context) error { ran++; return nil }); err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
	}
	if s := m.Stats(); ran != 2 || s.Tokens != 2 || s.Held != 1 || s.TokenDenied != 0 {
		t.Fatalf("ran %d, stats %+v; want B to reserve the next token and wait for it", ran, s)
	}
	// C's token is due 500 ms from now (after B's): beyond MaxHold, so C is deferred.
	err := m.Work(ctx, info("C", "sms.send", nil), func(context.Context) error { ran++; return nil })
	var d *jobs.DeferError
	if !errors.As(err, &d) || ran != 2 {
		t.Fatalf("C: %v; want deferred", err)
	}
}
