package jobstest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/jobstest"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// recorder is a testing.TB that records a failure instead of failing (run it in a goroutine:
// Fatal ends that goroutine, as testing does).
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// fails runs f with a recorder and returns what it failed with ("" when it passed).
func fails(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r.failed
}

type report struct {
	Month string `json:"month"`
	Rows  int    `json:"rows,omitempty"`
}

func (report) Kind() string { return "report.build" }

func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	prod, q := jobstest.NewProducer(t)
	ctx := context.Background()
	if _, err := prod.Enqueue(ctx, report{Month: "2026-11"}, producer.WithKey("report-2026-11"), producer.WithMaxAttempts(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Enqueue(ctx, report{Month: "2026-10"}, producer.WithDelay(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Enqueue(ctx, WelcomeEmail{To: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	j := jobstest.RequireEnqueued(t, q, report{Month: "2026-11"}, &jobstest.Want{Key: "report-2026-11", MaxAttempts: 3})
	if j.Args.Month != "2026-11" || j.Envelope.Kind != "report.build" {
		t.Errorf("job %+v", j)
	}
	// A delay beyond 15 minutes is a one-time schedule: RunAt, not Delay.
	later := jobstest.RequireEnqueued(t, q, report{Month: "2026-10"}, nil)
	if later.RunAt.IsZero() || later.Delay != 0 || len(q.Schedules()) != 1 {
		t.Errorf("delayed job %+v, schedules %d", later, len(q.Schedules()))
	}
	// Want.Delay is the delay the code asked for, whichever way the producer delays the job.
	if got := fails(t, func(tb testing.TB) {
		jobstest.RequireEnqueued(tb, q, report{Month: "2026-10"}, &jobstest.Want{Delay: 2 * time.Hour})
	}); got != "" {
		t.Errorf("Want{Delay: 2h} of a job enqueued WithDelay(2h): %s", got)
	}
	all, err := jobstest.Enqueued[report](q)
	if err != nil || len(all) != 2 {
		t.Errorf("Enqueued[report] = %d jobs, %v", len(all), err)
	}

	for _, tt := range []struct {
		name string
		f    func(tb testing.TB)
		want string
	}{
		{"other args", func(tb testing.TB) { jobstest.RequireEnqueued(tb, q, report{Month: "2026-09"}, nil) },
			`no job of kind report.build matches args {"month":"2026-09"}`},
		{"other key", func(tb testing.TB) {
			jobstest.RequireEnqueued(tb, q, report{Month: "2026-11"}, &jobstest.Want{Key: "other"})
		}, `key "report-2026-11", want "other"`},
		{"other delay", func(tb testing.TB) {
			jobstest.RequireEnqueued(tb, q, report{Month: "2026-11"}, &jobstest.Want{Delay: time.Minute})
		}, "delay 0s, want 1m0s"},
		{"other delay of a scheduled job", func(tb testing.TB) {
			jobstest.RequireEnqueued(tb, q, report{Month: "2026-10"}, &jobstest.Want{Delay: time.Hour})
		}, "delay 2h0m0s (a one-time schedule), want 1h0m0s"},
		{"nothing of the kind", func(tb testing.TB) {
			_, q2 := jobstest.NewProducer(tb)
			jobstest.RequireEnqueued(tb, q2, report{Month: "2026-11"}, nil)
		}, "no job of kind report.build was enqueued"},
		{"not enqueued", func(tb testing.TB) { jobstest.RequireNotEnqueued[WelcomeEmail](tb, q) },
			"1 jobs of kind email.welcome were enqueued, want none"},
	} {
		if got := fails(t, tt.f); !strings.Contains(got, tt.want) {
			t.Errorf("%s: failed with %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := fails(t, func(tb testing.TB) { jobstest.RequireNotEnqueued[lonely](tb, q) }); got != "" {
		t.Errorf("RequireNotEnqueued of a kind never enqueued failed: %s", got)
	}
}

type lonely struct{}

func (lonely) Kind() string { return "never.enqueued" }

// registry registers report with the given work and a one-minute backoff.
func registry(maxAttempts int, work func(ctx context.Context, job *jobs.Job[report]) error) *jobs.Registry {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[report](work), jobs.WithMaxAttempts(maxAttempts),
		jobs.WithPolicy(jobs.PolicyFunc(func(int) time.Duration { return time.Minute })))
	return reg
}

func TestWorkOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("exhausted to the DLQ", func(t *testing.T) {
		env := jobstest.New(t, jobstest.Config{Registry: registry(3, func(context.Context, *jobs.Job[report]) error {
			return errors.New("warehouse timeout")
		})})
		res := env.Work(ctx, report{Month: "2026-11"})
		if len(res.Outcomes) != 3 || res.Final.Outcome != worker.OutcomeDeadLettered || res.Final.Reason != jobs.ReasonExhausted {
			t.Fatalf("outcomes %+v", res.Outcomes)
		}
		if res.Record.State != idempotency.StateDead || res.Record.Runs != 3 || res.DeadLetter == nil || res.DeadLetter.Reason != jobs.ReasonExhausted {
			t.Errorf("record %+v, dead letter %+v", res.Record, res.DeadLetter)
		}
		if res.Took != 2*time.Minute || env.Queue.Len() != 0 || env.DLQ.Len() != 1 {
			t.Errorf("took %s (want the two backoffs, 2m); queue %d, DLQ %d", res.Took, env.Queue.Len(), env.DLQ.Len())
		}
	})

	t.Run("cancel", func(t *testing.T) {
		env := jobstest.New(t, jobstest.Config{Registry: registry(5, func(context.Context, *jobs.Job[report]) error {
			return jobs.Cancel(errors.New("month closed"))
		})})
		res := env.Work(ctx, report{Month: "2026-11"})
		if len(res.Outcomes) != 1 || res.Final.Reason != jobs.ReasonCancelled || res.DeadLetter == nil {
			t.Errorf("result %+v", res)
		}
	})

	t.Run("delayed through a schedule", func(t *testing.T) {
		env := jobstest.New(t, jobstest.Config{Registry: registry(5, func(context.Context, *jobs.Job[report]) error { return nil })})
		res := env.Work(ctx, report{Month: "2026-11"}, producer.WithDelay(3*time.Hour))
		if res.Final.Outcome != worker.OutcomeSucceeded || res.Took != 3*time.Hour {
			t.Errorf("result %+v, took %s; want succeeded after the 3 h delay", res.Final, res.Took)
		}
	})

	t.Run("duplicate key runs once", func(t *testing.T) {
		runs := 0
		env := jobstest.New(t, jobstest.Config{Registry: registry(5, func(context.Context, *jobs.Job[report]) error { runs++; return nil })})
		for range 2 {
			if _, err := env.Producer.Enqueue(ctx, report{Month: "2026-11"}, producer.WithKey("nov")); err != nil {
				t.Fatal(err)
			}
		}
		out, err := env.RunUntilIdle(ctx)
		got := map[string]int{}
		for _, o := range out {
			got[o.Outcome]++
			// Both messages arrive in one batch and run concurrently: the duplicate may find the
			// first one's claim held (deferred, ErrInProgress) before it finds it succeeded.
			if o.Outcome == worker.OutcomeDeferred && !errors.Is(o.Err, idempotency.ErrInProgress) {
				t.Errorf("deferred for another reason: %+v", o)
			}
		}
		if err != nil || runs != 1 || got[worker.OutcomeSucceeded] != 1 || got[worker.OutcomeSkipped] != 1 ||
			len(out) != 2+got[worker.OutcomeDeferred] || got[worker.OutcomeDeferred] > 1 {
			t.Errorf("runs %d, outcomes %+v, %v; want one run and a skipped duplicate (deferred at most once while the run held its claim)", runs, out, err)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		// Timeout 3 s: the worker keeps 2 s of margin, so a job gets 1 s (of real time) before
		// its context ends; the first attempt overstays it, the second does not.
		first := true
		env := jobstest.New(t, jobstest.Config{Timeout: 3 * time.Second, Registry: registry(5, func(ctx context.Context, _ *jobs.Job[report]) error {
			if first {
				first = false
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})})
		res := env.Work(ctx, report{Month: "2026-11"})
		// The first attempt is cut at the deadline: abandoned (still running then), or a retry
		// when the job returned its context's error first; an abandoned job keeps its claim
		// for the abandon grace, so a delivery may be deferred before the second attempt runs.
		o0 := res.Outcomes[0]
		if o0.Outcome != worker.OutcomeAbandoned && o0.Outcome != worker.OutcomeRetry || !errors.Is(o0.Err, context.DeadlineExceeded) && !errors.Is(o0.Err, context.Canceled) {
			t.Errorf("first outcome %+v, want cut at the deadline", o0)
		}
		if res.Final.Outcome != worker.OutcomeSucceeded || res.Final.Attempt != 2 || len(res.Outcomes) > 3 {
			t.Errorf("outcomes %+v, want the second attempt to succeed", res.Outcomes)
		}
	})

	t.Run("progress", func(t *testing.T) {
		env := jobstest.New(t, jobstest.Config{Registry: registry(5, func(ctx context.Context, _ *jobs.Job[report]) error {
			return jobs.Progress(ctx, 0.5, "half way")
		})})
		res := env.Work(ctx, report{Month: "2026-11"})
		if res.Record.Progress.Fraction != 0.5 || res.Record.Progress.Message != "half way" {
			t.Errorf("record progress %+v", res.Record.Progress)
		}
	})

	t.Run("without a store", func(t *testing.T) {
		env := jobstest.New(t, jobstest.Config{NoStore: true, Registry: registry(2, func(context.Context, *jobs.Job[report]) error {
			return errors.New("no")
		})})
		res := env.Work(ctx, report{Month: "2026-11"})
		if len(res.Outcomes) != 2 || res.Final.Reason != jobs.ReasonExhausted || res.Record.State != "" {
			t.Errorf("result %+v", res)
		}
	})

	t.Run("redrive policy", func(t *testing.T) {
		// A job that keeps deferring (its claim held elsewhere) spends receives, not attempts:
		// SQS's maxReceiveCount moves it to the DLQ.
		env := jobstest.New(t, jobstest.Config{MaxReceiveCount: 3, Registry: registry(5, func(context.Context, *jobs.Job[report]) error { return nil }),
			Middleware: []worker.Middleware{deferAll{}}})
		res := env.Work(ctx, report{Month: "2026-11"})
		if len(res.Outcomes) != 3 || res.DeadLetter == nil || env.DLQ.Len() != 1 {
			t.Errorf("outcomes %d, dead letter %+v, DLQ %d", len(res.Outcomes), res.DeadLetter, env.DLQ.Len())
		}
	})
}

// deferAll defers every job by a minute.
type deferAll struct{}

func (deferAll) Work(_ context.Context, _ *jobs.Info, _ func(context.Context) error) error {
	return jobs.Defer(time.Minute, errors.New("not yet"))
}

func TestFIFOOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	env := jobstest.New(t, jobstest.Config{FIFO: true, Registry: registry(5, func(_ context.Context, j *jobs.Job[report]) error {
		mu.Lock()
		order = append(order, j.Args.Month)
		mu.Unlock()
		return nil
	})})
	ctx := context.Background()
	for _, m := range []string{"01", "02", "03"} {
		if _, err := env.Producer.Enqueue(ctx, report{Month: m}, producer.WithGroupID("tenant-7")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.RunUntilIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "01,02,03" {
		t.Errorf("order %v", order)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []jobstest.Config{
		{},
		{Registry: jobs.NewRegistry(), Timeout: time.Second},
		{Registry: jobs.NewRegistry(), MaxReceiveCount: 1001},
		{Registry: jobs.NewRegistry(), FIFO: true, BatchSize: 11},
	} {
		if got := fails(t, func(tb testing.TB) { jobstest.New(tb, cfg) }); !strings.HasPrefix(got, "jobstest: Config.") {
			t.Errorf("New(%+v) failed with %q", cfg, got)
		}
	}
}
