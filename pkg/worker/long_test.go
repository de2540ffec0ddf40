package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// memCheckpointer keeps a job's cursor in memory, standing in for the idempotency middleware.
type memCheckpointer struct {
	mu    sync.Mutex
	saved []byte
	saves int
}

func (m *memCheckpointer) SaveCheckpoint(_ context.Context, c []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saved, m.saves = c, m.saves+1
	return nil
}

func (m *memCheckpointer) LoadCheckpoint(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saved, nil
}

const testFIFOURL = "https://sqs.test/jobs.fifo"

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// longArgs is the kind of these tests; its work is the test's.
type longArgs struct{}

func (longArgs) Kind() string { return "test.long" }

type longSetup struct {
	sqs    *fakeSQS
	h      *Handler
	ck     *memCheckpointer
	mu     sync.Mutex
	causes []error // context.Cause of the job's context when it returned
	infos  []jobs.Info
	out    []Outcome
}

// newLongHandler registers work as test.long under a middleware that installs a memory
// checkpointer (and, when runTime is set, says the record's total run time so far).
func newLongHandler(t *testing.T, work func(ctx context.Context) error, mutate func(*Config), runTime time.Duration, opts ...jobs.Option) *longSetup {
	t.Helper()
	s := &longSetup{sqs: newFakeSQS(), ck: &memCheckpointer{}}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[longArgs](func(ctx context.Context, job *jobs.Job[longArgs]) error {
		err := work(ctx)
		s.mu.Lock()
		s.causes = append(s.causes, context.Cause(ctx))
		s.infos = append(s.infos, *job.Info)
		s.mu.Unlock()
		return err
	}), opts...)
	cfg := Config{Registry: reg, SQS: s.sqs, QueueURL: testURL, DLQURL: testDLQURL, Logger: discardLogger(),
		Middleware: []Middleware{MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
			job.RunTime = runTime
			return next(jobs.WithCheckpointer(ctx, s.ck))
		})},
		OnBatch: func(_ context.Context, o []Outcome) { s.mu.Lock(); s.out = append(s.out, o...); s.mu.Unlock() },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	return s
}

func longMsg(id string, mutate ...func(*jobs.Envelope, *events.SQSMessage)) events.SQSMessage {
	m := msg(id, testArgs{}, mutate...)
	env, _ := jobs.DecodeEnvelope([]byte(m.Body))
	env.Kind, env.Args = "test.long", json.RawMessage(`{}`)
	for _, f := range mutate {
		f(&env, &m)
	}
	b, _ := env.MarshalJSON()
	m.Body = string(b)
	return m
}

func (s *longSetup) handle(t *testing.T, ctx context.Context, msgs ...events.SQSMessage) ([]string, []Outcome) {
	t.Helper()
	resp, err := s.h.HandleSQS(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return failedIDs(resp), append([]Outcome(nil), s.out...)
}

// copyOf decodes the one copy re-sent to the queue.
func (s *longSetup) copyOf(t *testing.T) (jobs.Envelope, int32) {
	t.Helper()
	sent := s.sqs.sentTo(testURL)
	if len(sent) != 1 {
		t.Fatalf("re-sent %d copies, want 1", len(sent))
	}
	env, err := jobs.DecodeEnvelope([]byte(aws.ToString(sent[0].MessageBody)))
	if err != nil {
		t.Fatal(err)
	}
	return env, sent[0].DelaySeconds
}

// A job that saved a checkpoint has its slice ended before the invocation's deadline: its
// context is cancelled with jobs.ErrSliceEnded, it returns, and the worker acknowledges it and
// re-sends a copy that continues it (meta continuation 1, no attempt spent, no delay) before the
// deadline.
func TestSliceEndsACheckpointingJobBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	s := newLongHandler(t, func(ctx context.Context) error {
		if err := jobs.Checkpoint(ctx, 1); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}, func(c *Config) { c.DeadlineMargin, c.SliceGrace = 300*time.Millisecond, 300*time.Millisecond }, 0)
	deadline := time.Now().Add(1500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	failed, out := s.handle(t, ctx, longMsg("1", receives(2), func(e *jobs.Envelope, _ *events.SQSMessage) { e.AttemptsBefore = 1 }))
	if time.Now().After(deadline) {
		t.Error("the batch ended after the invocation's deadline")
	}
	if len(failed) != 0 || len(out) != 1 || out[0].Outcome != OutcomeContinued {
		t.Fatalf("failed %v, outcomes %+v; want the message acknowledged as continued", failed, out)
	}
	s.mu.Lock()
	cause := s.causes[0]
	s.mu.Unlock()
	if !errors.Is(cause, jobs.ErrSliceEnded) {
		t.Errorf("the job's context was cancelled by %v, want ErrSliceEnded", cause)
	}
	env, delay := s.copyOf(t)
	// Attempt 3 (attempts_before 1 + receive 2) was no attempt: the copy says 2 were spent.
	if env.AttemptsBefore != 2 || env.Meta[jobs.MetaContinuation] != "1" || !env.RunAt.IsZero() || delay != 0 || env.ID != "job-1" {
		t.Errorf("copy %+v, delay %d; want the same job, attempts_before 2, continuation 1, at once", env, delay)
	}
}

// A job that never checkpoints keeps the worker's usual behaviour at the deadline: no slice
// ends, its context ends at the deadline (not with ErrSliceEnded), it is reported failed and
// nothing is re-sent.
func TestJobWithoutCheckpointsOverrunsAsBefore(t *testing.T) {
	t.Parallel()
	cause := make(chan error, 1)
	s := newLongHandler(t, func(ctx context.Context) error {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, func(c *Config) { c.DeadlineMargin, c.SliceGrace = 300*time.Millisecond, 300*time.Millisecond }, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	failed, _ := s.handle(t, ctx, longMsg("1"))
	if !equal(failed, []string{"1"}) {
		t.Errorf("failed %v, want the overrunning job", failed)
	}
	if c := <-cause; errors.Is(c, jobs.ErrSliceEnded) || len(s.sqs.sentTo(testURL)) != 0 {
		t.Errorf("cause %v, copies %d; want the deadline's cause and no copy", c, len(s.sqs.sentTo(testURL)))
	}
}

// Without a deadline (a container), the slice (the kind's, or Config.Slice) ends a
// checkpointing job: its next checkpoint after the slice returns ErrSliceEnded with the cursor
// saved; a job that keeps checkpointing without looking at its context stops there.
func TestSliceWithoutADeadline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		opts   []jobs.Option
	}{
		{"kind", nil, []jobs.Option{jobs.WithSlice(time.Second)}},
		{"worker", func(c *Config) { c.Slice = time.Second }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var lastErr error
			var n int
			s := newLongHandler(t, func(ctx context.Context) error {
				for n = 1; ; n++ {
					if lastErr = jobs.Checkpoint(ctx, n); lastErr != nil {
						return lastErr
					}
					time.Sleep(20 * time.Millisecond)
				}
			}, tt.mutate, 0, tt.opts...)
			start := time.Now()
			failed, out := s.handle(t, context.Background(), longMsg("1"))
			if took := time.Since(start); took < time.Second {
				t.Errorf("the slice ended after %s, want at least the 1s slice", took)
			}
			if !errors.Is(lastErr, jobs.ErrSliceEnded) || len(failed) != 0 || out[0].Outcome != OutcomeContinued {
				t.Fatalf("last checkpoint %v, failed %v, outcome %s; want ErrSliceEnded and a continuation", lastErr, failed, out[0].Outcome)
			}
			var saved int
			s.ck.mu.Lock()
			_ = json.Unmarshal(s.ck.saved, &saved)
			s.ck.mu.Unlock()
			if saved != n {
				t.Errorf("the cursor saved is %d, want the last checkpoint's %d", saved, n)
			}
			if env, _ := s.copyOf(t); env.Meta[jobs.MetaContinuation] != "1" {
				t.Errorf("copy meta %v", env.Meta)
			}
		})
	}
}

// fakeScheduler records ScheduleResend calls, or fails them.
type fakeScheduler struct {
	mu    sync.Mutex
	envs  []jobs.Envelope
	ats   []time.Time
	err   error
	calls int
}

func (f *fakeScheduler) ScheduleResend(_ context.Context, env jobs.Envelope, at time.Time, group string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return "", f.err
	}
	f.envs, f.ats = append(f.envs, env), append(f.ats, at)
	return "sched-" + env.ID, nil
}

// A sleeping job is re-sent to continue at its wake time, without an attempt: within 15 minutes
// with DelaySeconds; further ahead through Config.Scheduler when set (no SQS send), else with
// DelaySeconds 900 and run_at (the copy then waits in its visibility); on a FIFO queue, or when
// the scheduler fails, in SQS.
func TestSleepResendsTheJob(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		sleep     error
		sched     *fakeScheduler
		fifo      bool
		wantDelay int32
		scheduled bool
	}{
		{"10m", jobs.Sleep(10 * time.Minute), nil, false, 600, false},
		{"until", jobs.SleepUntil(now.Add(90 * time.Second)), nil, false, 90, false},
		{"2h-no-scheduler", jobs.Sleep(2 * time.Hour), nil, false, 900, false},
		{"2h-scheduler", jobs.Sleep(2 * time.Hour), &fakeScheduler{}, false, 0, true},
		{"10m-scheduler", jobs.Sleep(10 * time.Minute), &fakeScheduler{}, false, 600, false},
		{"2h-scheduler-fails", jobs.Sleep(2 * time.Hour), &fakeScheduler{err: errors.New("AccessDenied")}, false, 900, false},
		{"2h-fifo", jobs.Sleep(2 * time.Hour), &fakeScheduler{}, true, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newLongHandler(t, func(context.Context) error { return tt.sleep }, func(c *Config) {
				c.Now = func() time.Time { return now }
				if tt.sched != nil {
					c.Scheduler = tt.sched
				}
				if tt.fifo {
					c.QueueURL = testFIFOURL
				}
			}, 0)
			m := longMsg("1")
			if tt.fifo {
				m = longMsg("1", group("g"))
			}
			failed, out := s.handle(t, context.Background(), m)
			if len(failed) != 0 || out[0].Outcome != OutcomeContinued {
				t.Fatalf("failed %v, outcome %s; want a continuation", failed, out[0].Outcome)
			}
			var cont *jobs.ContinueError
			errors.As(tt.sleep, &cont)
			wake := cont.WakeAt(now)
			if tt.scheduled {
				if len(s.sqs.sentTo(testURL)) != 0 || len(tt.sched.envs) != 1 || !tt.sched.ats[0].Equal(wake) ||
					!tt.sched.envs[0].RunAt.Equal(wake) || tt.sched.envs[0].Meta[jobs.MetaContinuation] != "1" {
					t.Errorf("scheduled %+v at %v, SQS copies %d; want one schedule at %v, nothing in SQS", tt.sched.envs, tt.sched.ats, len(s.sqs.sentTo(testURL)), wake)
				}
				return
			}
			url := testURL
			if tt.fifo {
				url = testFIFOURL
			}
			sent := s.sqs.sentTo(url)
			if len(sent) != 1 {
				t.Fatalf("re-sent %d copies to %s, want 1", len(sent), url)
			}
			env, _ := jobs.DecodeEnvelope([]byte(aws.ToString(sent[0].MessageBody)))
			if sent[0].DelaySeconds != tt.wantDelay || !env.RunAt.Equal(wake) || env.AttemptsBefore != 0 || env.Meta[jobs.MetaContinuation] != "1" {
				t.Errorf("copy %+v, delay %d; want run_at %v, delay %d, attempts_before 0, continuation 1", env, sent[0].DelaySeconds, wake, tt.wantDelay)
			}
			if tt.sched != nil && tt.sched.err == nil && tt.sched.calls != 0 {
				t.Errorf("the scheduler was called %d times for a copy it must not take", tt.sched.calls)
			}
		})
	}
}

// The kind's limits: a continuation beyond MaxContinuations, or a job past its MaxRunTime, is
// dead-lettered as exhausted with a jobs.LimitError saying which (a job already past its run time
// does not run).
func TestContinuationLimits(t *testing.T) {
	t.Parallel()
	t.Run("continuations", func(t *testing.T) {
		t.Parallel()
		s := newLongHandler(t, func(context.Context) error { return jobs.Sleep(time.Minute) }, nil, 0, jobs.WithMaxContinuations(3))
		failed, out := s.handle(t, context.Background(), longMsg("1", func(e *jobs.Envelope, _ *events.SQSMessage) {
			e.Meta = map[string]string{jobs.MetaContinuation: "3"}
		}))
		s.mu.Lock()
		if s.infos[0].Continuation != 3 {
			t.Errorf("Info.Continuation = %d, want the meta's 3", s.infos[0].Continuation)
		}
		s.mu.Unlock()
		if len(failed) != 0 || out[0].Outcome != OutcomeDeadLettered || out[0].Reason != jobs.ReasonExhausted ||
			!errors.Is(out[0].Err, jobs.ErrContinuationsExhausted) {
			t.Fatalf("outcome %+v; want dead-lettered exhausted (continuations)", out[0])
		}
		dead := s.sqs.sentTo(testDLQURL)
		if len(dead) != 1 || !strings.Contains(decodeFailure(t, &dead[0]).Error, "was continued 3 times, its kind's limit") {
			t.Errorf("dead letters %+v", dead)
		}
	})
	t.Run("run-time", func(t *testing.T) {
		t.Parallel()
		ran := false
		s := newLongHandler(t, func(context.Context) error { ran = true; return nil }, nil, 2*time.Hour, jobs.WithMaxRunTime(time.Hour))
		_, out := s.handle(t, context.Background(), longMsg("1"))
		if ran || out[0].Outcome != OutcomeDeadLettered || out[0].Reason != jobs.ReasonExhausted || !errors.Is(out[0].Err, jobs.ErrRunTimeExhausted) {
			t.Fatalf("ran %v, outcome %+v; want dead-lettered exhausted (run time) without running", ran, out[0])
		}
	})
	t.Run("run-time-at-the-slice-end", func(t *testing.T) {
		t.Parallel()
		s := newLongHandler(t, func(context.Context) error { return jobs.Sleep(0) }, nil, time.Hour-time.Nanosecond, jobs.WithMaxRunTime(time.Hour))
		_, out := s.handle(t, context.Background(), longMsg("1"))
		if out[0].Outcome != OutcomeDeadLettered || !errors.Is(out[0].Err, jobs.ErrRunTimeExhausted) {
			t.Fatalf("outcome %+v; want dead-lettered exhausted (run time)", out[0])
		}
	})
}

// TestSleepCostWithoutScheduler plays SQS for a job that sleeps without Config.Scheduler, on a
// fake clock: the copy's DelaySeconds and each visibility the worker sets move the clock, a
// re-send starts a new message (receive count 1), a visibility change keeps it (one more
// receive). It counts what the sleep costs until the job runs again — deliveries that ran nothing
// (each a short invocation), SendMessageBatch and ChangeMessageVisibilityBatch calls — and checks
// that the job runs once, on time. docs/LONG-JOBS.md quotes the table it logs.
func TestSleepCostWithoutScheduler(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{20 * time.Minute, 2 * time.Hour, 13 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(by time.Duration) { mu.Lock(); now = now.Add(by); mu.Unlock() }
			runs := 0
			var wake time.Time
			s := newLongHandler(t, func(context.Context) error {
				runs++
				if runs == 1 {
					wake = clock().Add(d)
					return jobs.Sleep(d)
				}
				return nil
			}, func(c *Config) { c.Now = clock }, 0)
			m := longMsg("1")
			receives, idle, sent := 1, 0, 0
			for runs < 2 {
				if idle > 100 {
					t.Fatalf("still asleep after %d deliveries", idle)
				}
				m.Attributes["ApproximateReceiveCount"] = strconv.Itoa(receives)
				m.Attributes["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(clock().UnixMilli(), 10)
				before := runs
				failed, _ := s.handle(t, context.Background(), m)
				if runs == before {
					idle++
				}
				if copies := s.sqs.sentTo(testURL); len(copies) > sent {
					c := copies[len(copies)-1]
					sent = len(copies)
					m.Body, m.MessageId, m.ReceiptHandle = aws.ToString(c.MessageBody), "m"+strconv.Itoa(sent), "rh-m"+strconv.Itoa(sent)
					receives = 1
					advance(time.Duration(c.DelaySeconds) * time.Second)
					continue
				}
				if len(failed) == 1 {
					v, _ := s.sqs.visibilityOf(m.ReceiptHandle)
					receives++
					advance(time.Duration(v) * time.Second)
					continue
				}
				if runs < 2 {
					t.Fatal("the message was acknowledged without a copy, and the job did not run")
				}
			}
			late := clock().Sub(wake)
			if late < -runAtTolerance || late > time.Second {
				t.Errorf("the job ran %s after its wake time, want on time", late)
			}
			t.Logf("sleep %s: %d deliveries ran nothing, %d SendMessageBatch, %d ChangeMessageVisibilityBatch",
				d, idle, s.sqs.callCount("SendMessageBatch"), s.sqs.callCount("ChangeMessageVisibilityBatch"))
		})
	}
}

// queueScheduler is a fakeScheduler that can also send to other queues (QueueScheduler).
type queueScheduler struct {
	fakeScheduler
	arns []string
}

func (q *queueScheduler) ScheduleResendOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, group string) (string, error) {
	q.mu.Lock()
	q.arns = append(q.arns, queueARN)
	q.mu.Unlock()
	return q.ScheduleResend(ctx, env, at, group)
}

// A worker of several queues schedules a sleeping job's copy onto the queue its message came
// from (the event source), not onto the scheduler's own queue.
func TestSleepScheduledOntoItsOwnQueue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	sched := &queueScheduler{}
	s := newLongHandler(t, func(context.Context) error { return jobs.Sleep(2 * time.Hour) }, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.Scheduler = sched
	}, 0)
	bulk := testARN + "-bulk"
	m := longMsg("1", func(_ *jobs.Envelope, m *events.SQSMessage) { m.EventSourceARN = bulk })
	failed, out := s.handle(t, context.Background(), m)
	if len(failed) != 0 || out[0].Outcome != OutcomeContinued {
		t.Fatalf("failed %v, outcome %s; want a continuation", failed, out[0].Outcome)
	}
	if len(sched.arns) != 1 || sched.arns[0] != bulk || len(sched.envs) != 1 {
		t.Errorf("scheduled onto %v (%d copies), want one copy onto %s", sched.arns, len(sched.envs), bulk)
	}
}

// A continued job's copy does not carry the deferral start of an earlier copy (meta
// deferred_since, written when a flow limit re-sent the job): the job ran since, so a deferral of
// its next run begins anew. Carried over, the next run's first deferral would count the wait from
// before the job ran (and every slice and sleep since) against flow's MaxDeferral and dead-letter
// it as deferred_too_long.
func TestContinuationDropsAnEarlierDeferralStart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := newLongHandler(t, func(context.Context) error { return jobs.Sleep(time.Minute) }, func(c *Config) {
		c.Now = func() time.Time { return now }
	}, 0)
	failed, out := s.handle(t, context.Background(), longMsg("1", func(e *jobs.Envelope, _ *events.SQSMessage) {
		e.Meta = map[string]string{jobs.MetaDeferredSince: now.Add(-2 * time.Hour).Format(jobs.TimeLayout), "tenant": "acme"}
	}))
	if len(failed) != 0 || out[0].Outcome != OutcomeContinued {
		t.Fatalf("failed %v, outcome %s; want a continuation", failed, out[0].Outcome)
	}
	env, _ := s.copyOf(t)
	if _, ok := env.Meta[jobs.MetaDeferredSince]; ok || env.Meta["tenant"] != "acme" || env.Meta[jobs.MetaContinuation] != "1" {
		t.Errorf("copy meta %v; want the tenant and the continuation, no deferred_since", env.Meta)
	}
}
