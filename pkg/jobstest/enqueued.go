package jobstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// NewQueue returns an in-memory standard queue on a clock of its own, for code that takes a
// producer: pass it as producer.Config.SQS (and Scheduler) with QueueURL q.URL(), or use
// NewProducer.
func NewQueue() *Queue {
	return newQueue("jobstest-jobs", false, NewClock(time.Time{}), DefaultVisibility, 0)
}

// NewFIFOQueue is NewQueue for a FIFO queue.
func NewFIFOQueue() *Queue {
	return newQueue("jobstest-jobs", true, NewClock(time.Time{}), DefaultVisibility, 0)
}

// NewProducer returns a producer on a new in-memory queue (delays beyond 15 minutes become the
// queue's Schedules), to hand to the code under test, and the queue to assert on.
func NewProducer(t testing.TB) (*producer.Producer, *Queue) {
	t.Helper()
	q := NewQueue()
	p, err := producer.New(producer.Config{SQS: q, QueueURL: q.URL(), Scheduler: q, Clock: q.clock.Now})
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	return p, q
}

// Job is a job found in a queue, its args decoded as T.
type Job[T jobs.Args] struct {
	// Args are the decoded args.
	Args T
	// Envelope is the job as it was enqueued.
	Envelope jobs.Envelope
	// Delay is the message's DelaySeconds (0 for a scheduled job).
	Delay time.Duration
	// RunAt is when a job delayed through a one-time schedule runs (zero otherwise).
	RunAt time.Time
	// EnqueuedAt is when it was enqueued (the Clock's time): its message sent, or its schedule
	// made.
	EnqueuedAt time.Time
	// GroupID is the message group ("" without one).
	GroupID string
	// Attributes are the message attributes (string values).
	Attributes map[string]string
}

// Enqueued returns the jobs of kind T that were enqueued on q, in order: the messages producers
// sent (consumed or not) and the one-time schedules of delayed jobs. A job appears once: a
// worker's re-send of it (a long retry), or its schedule's firing, is not a new job.
func Enqueued[T jobs.Args](q *Queue) ([]Job[T], error) {
	var zero T
	kind := zero.Kind()
	seen := map[string]bool{}
	var out []Job[T]
	add := func(env jobs.Envelope, j Job[T]) error {
		if env.Kind != kind || seen[env.ID] {
			return nil
		}
		seen[env.ID] = true
		if err := json.Unmarshal(env.Args, &j.Args); err != nil {
			return fmt.Errorf("jobstest: job %s of kind %s: its args do not decode into %T: %w", env.ID, kind, j.Args, err)
		}
		j.Envelope = env
		out = append(out, j)
		return nil
	}
	for _, m := range q.Sent() {
		if m.FromSchedule {
			continue
		}
		env, err := jobs.ParseEnvelope(m.Body)
		if err != nil {
			continue // not a job (a raw message)
		}
		if err := add(env, Job[T]{Delay: m.Delay, EnqueuedAt: m.SentAt, GroupID: m.GroupID, Attributes: m.Attributes}); err != nil {
			return nil, err
		}
	}
	q.mu.Lock()
	scheduled := append([]Schedule(nil), q.scheduled...)
	q.mu.Unlock()
	for _, s := range scheduled {
		if err := add(s.Envelope, Job[T]{RunAt: s.RunAt, EnqueuedAt: s.ScheduledAt, GroupID: s.GroupID}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Want lists what RequireEnqueued checks besides the args; zero fields are not checked.
type Want struct {
	// Key is the job's idempotency key (the envelope's key; a job without one has its id).
	Key string
	// Delay is the delay the job was enqueued with (producer.WithDelay): its message's
	// DelaySeconds, or, for a job delayed through a one-time schedule (beyond 15 minutes, or any
	// delay on a FIFO queue), its RunAt less the time it was enqueued.
	Delay time.Duration
	// RunAt is the run time of a job delayed through a one-time schedule.
	RunAt time.Time
	// GroupID is the message group.
	GroupID string
	// MaxAttempts is the envelope's max_attempts.
	MaxAttempts int
	// Meta entries must be in the envelope's meta with these values.
	Meta map[string]string
}

// RequireEnqueued fails the test unless exactly one job of kind T whose args equal want (as
// JSON: the same fields and values) was enqueued on q, with what opts (nil: nothing more) asks
// for; it returns that job. The failure lists what was enqueued of the kind.
func RequireEnqueued[T jobs.Args](t testing.TB, q *Queue, want T, opts *Want) Job[T] {
	t.Helper()
	all, err := Enqueued[T](q)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatalf("jobstest: the wanted args do not encode: %v", err)
	}
	var matches []Job[T]
	var report []string
	for _, j := range all {
		why := mismatch(j, wantJSON, opts)
		if why == "" {
			matches = append(matches, j)
			continue
		}
		report = append(report, fmt.Sprintf("job %s %s: %s", j.Envelope.ID, compact(j.Envelope.Args), why))
	}
	switch {
	case len(matches) == 1:
		return matches[0]
	case len(matches) > 1:
		t.Fatalf("jobstest: %d jobs of kind %s match %s, want exactly one", len(matches), want.Kind(), wantJSON)
	case len(all) == 0:
		t.Fatalf("jobstest: no job of kind %s was enqueued (want args %s)", want.Kind(), wantJSON)
	default:
		t.Fatalf("jobstest: no job of kind %s matches args %s; enqueued:\n\t%s", want.Kind(), wantJSON, strings.Join(report, "\n\t"))
	}
	return Job[T]{}
}

// RequireNotEnqueued fails the test when any job of kind T was enqueued on q.
func RequireNotEnqueued[T jobs.Args](t testing.TB, q *Queue) {
	t.Helper()
	all, err := Enqueued[T](q)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) > 0 {
		var zero T
		t.Fatalf("jobstest: %d jobs of kind %s were enqueued, want none (the first: %s)", len(all), zero.Kind(), compact(all[0].Envelope.Args))
	}
}

// mismatch says why j is not the wanted job ("" when it is).
func mismatch[T jobs.Args](j Job[T], wantJSON []byte, o *Want) string {
	var got, want any
	_ = json.Unmarshal(j.Envelope.Args, &got)
	_ = json.Unmarshal(wantJSON, &want)
	if !reflect.DeepEqual(got, want) {
		return "other args"
	}
	if o == nil {
		return ""
	}
	switch {
	case o.Key != "" && j.Envelope.EffectiveKey() != o.Key:
		return fmt.Sprintf("key %q, want %q", j.Envelope.EffectiveKey(), o.Key)
	case o.Delay != 0 && j.RunAt.IsZero() && j.Delay != o.Delay:
		return fmt.Sprintf("delay %s, want %s", j.Delay, o.Delay)
	case o.Delay != 0 && !j.RunAt.IsZero() && j.RunAt.Sub(j.EnqueuedAt) != o.Delay:
		return fmt.Sprintf("delay %s (a one-time schedule), want %s", j.RunAt.Sub(j.EnqueuedAt), o.Delay)
	case !o.RunAt.IsZero() && !j.RunAt.Equal(o.RunAt):
		return fmt.Sprintf("run at %s, want %s", j.RunAt.Format(time.RFC3339Nano), o.RunAt.Format(time.RFC3339Nano))
	case o.GroupID != "" && j.GroupID != o.GroupID:
		return fmt.Sprintf("group %q, want %q", j.GroupID, o.GroupID)
	case o.MaxAttempts != 0 && j.Envelope.MaxAttempts != o.MaxAttempts:
		return fmt.Sprintf("max attempts %d, want %d", j.Envelope.MaxAttempts, o.MaxAttempts)
	}
	for k, v := range o.Meta {
		if got, ok := j.Envelope.Meta[k]; !ok || got != v {
			return fmt.Sprintf("meta %s = %q, want %q", k, got, v)
		}
	}
	return ""
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// Result is what became of one job in an Env.
type Result struct {
	// JobID is the job's id.
	JobID string
	// Outcomes are its deliveries' outcomes, in order: attempts, retries, deferrals.
	Outcomes []worker.Outcome
	// Final is the last of them.
	Final worker.Outcome
	// Record is the job's record in the store afterwards (zero with Config.NoStore).
	Record idempotency.Record
	// DeadLetter is the failure attribute of its copy in the DLQ, nil when it has none.
	DeadLetter *worker.Failure
	// Took is how far the clock moved while it ran (its backoffs and delays).
	Took time.Duration
}

// Work enqueues args with the Env's producer (with opts), runs the queue until it is idle, and
// returns what became of the job. It fails the test when the enqueue fails, the queue never gets
// idle, or the job was never delivered.
func (e *Env) Work(ctx context.Context, args jobs.Args, opts ...producer.Option) Result {
	e.t.Helper()
	start := e.Clock.Now()
	res, err := e.Producer.Enqueue(ctx, args, opts...)
	if err != nil {
		e.t.Fatalf("jobstest: enqueue %s: %v", args.Kind(), err)
	}
	if _, err := e.RunUntilIdle(ctx); err != nil {
		e.t.Fatal(err)
	}
	r := e.Result(ctx, res.ID)
	r.Took = e.Clock.Now().Sub(start)
	if len(r.Outcomes) == 0 {
		e.t.Fatalf("jobstest: job %s (%s) was never delivered", res.ID, args.Kind())
	}
	return r
}

// Result returns what became of the job jobID so far: its outcomes, its record and its dead
// letter.
func (e *Env) Result(ctx context.Context, jobID string) Result {
	e.t.Helper()
	r := Result{JobID: jobID}
	var kind, key string
	for _, o := range e.Outcomes() {
		if o.JobID == jobID {
			r.Outcomes = append(r.Outcomes, o)
			kind, key = o.Kind, o.Key
		}
	}
	if len(r.Outcomes) > 0 {
		r.Final = r.Outcomes[len(r.Outcomes)-1]
	}
	if e.Store != nil && kind != "" {
		rec, err := e.Store.Get(ctx, kind, key)
		if err == nil {
			r.Record = rec
		}
	}
	for _, m := range e.DLQ.Sent() {
		env, err := jobs.ParseEnvelope(m.Body)
		if err != nil || env.ID != jobID {
			continue
		}
		var f worker.Failure
		if a, ok := m.Attributes[worker.FailureAttribute]; ok && json.Unmarshal([]byte(a), &f) == nil {
			r.DeadLetter = &f
		} else {
			r.DeadLetter = &worker.Failure{Reason: "redrive policy: maxReceiveCount reached", JobID: jobID}
		}
	}
	return r
}
