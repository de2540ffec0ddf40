package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// schedCall is one call a fake scheduler took.
type schedCall struct {
	op    string // "create" or "move"
	queue string // the target queue's ARN; "" for the scheduler's own (ScheduleJob, RescheduleJob)
	job   string
	n     int // the args' n
	at    time.Time
}

func (c schedCall) String() string {
	q := c.queue
	if q == "" {
		q = "own queue"
	}
	return fmt.Sprintf("%s %s n=%d on %s", c.op, c.job, c.n, q)
}

// recordingScheduler is a fake dedup.Scheduler that records its calls and keeps the schedules it
// made, so that moving one it never made is schedule.ErrNotFound, as on AWS.
type recordingScheduler struct {
	t     *testing.T
	mu    sync.Mutex
	calls []schedCall
	live  map[string]bool
}

func (s *recordingScheduler) record(op, queue string, env jobs.Envelope, at time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]bool{}
	}
	name := schedule.ScheduleName(env.ID)
	if op == "move" && !s.live[name] {
		return "", fmt.Errorf("%w: %s", schedule.ErrNotFound, name)
	}
	s.live[name] = true
	s.calls = append(s.calls, schedCall{op: op, queue: queue, job: env.ID, n: argsOf(s.t, env).N, at: at})
	return name, nil
}

func (s *recordingScheduler) took() []schedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]schedCall(nil), s.calls...)
}

func (s *recordingScheduler) ScheduleJob(_ context.Context, env jobs.Envelope, at time.Time, _ string) (string, error) {
	return s.record("create", "", env, at)
}

func (s *recordingScheduler) RescheduleJob(_ context.Context, env jobs.Envelope, at time.Time, _ string) (string, error) {
	return s.record("move", "", env, at)
}

// queueRecordingScheduler is a recordingScheduler that sends to any queue (dedup.QueueScheduler).
type queueRecordingScheduler struct{ recordingScheduler }

func (s *queueRecordingScheduler) ScheduleJobOn(_ context.Context, queueARN string, env jobs.Envelope, at time.Time, _ string) (string, error) {
	if queueARN == "" {
		s.t.Error("ScheduleJobOn without a queue ARN")
	}
	return s.record("create", queueARN, env, at)
}

func (s *queueRecordingScheduler) RescheduleJobOn(_ context.Context, queueARN string, env jobs.Envelope, at time.Time, _ string) (string, error) {
	if queueARN == "" {
		s.t.Error("RescheduleJobOn without a queue ARN")
	}
	return s.record("move", queueARN, env, at)
}

var _ dedup.QueueScheduler = (*queueRecordingScheduler)(nil)

// TestDebounceRoutedKindSchedulesOnItsQueue: with a producer of two queues whose routes send
// report.export to "bulk", a debounced report.export waits in a schedule that targets the bulk
// queue's ARN (ScheduleJobOn), and every move keeps that target (RescheduleJobOn); an enqueue the
// producer prepares for the default queue (WithQueue) moves the job there with the scheduler's
// own RescheduleJob (the last enqueue's queue wins, as its args), and the next one back. A
// scheduler that cannot send to another queue is refused before anything is written.
func TestDebounceRoutedKindSchedulesOnItsQueue(t *testing.T) {
	ctx := context.Background()
	fake := &queueRecordingScheduler{recordingScheduler{t: t}}
	e := newEnv(t, envOptions{named: []queues.Spec{{Name: "bulk"}}, routes: queues.Routes{"report.export": "bulk"},
		mod: func(c *dedup.Config) { c.Scheduler = fake }})
	bulk, err := e.set.Get("bulk")
	if err != nil {
		t.Fatal(err)
	}
	rule := dedup.Debounce{Key: "doc-r", Period: 10 * time.Second, MaxWait: time.Hour}
	var job string
	for i, opts := range [][]producer.Option{nil, nil, {producer.WithQueue(queues.DefaultName)}, nil} {
		res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-r", N: i}, rule, opts...)
		if err != nil || res.Outcome != dedup.Debounced {
			t.Fatalf("enqueue %d: %+v, %v", i, res, err)
		}
		if i == 0 {
			job = res.ID
		}
		if res.ID != job || res.Events != i+1 {
			t.Fatalf("enqueue %d joined job %s (%d events), want job %s with %d", i, res.ID, res.Events, job, i+1)
		}
		e.clock.Add(time.Second)
	}
	want := []schedCall{
		{op: "create", queue: bulk.ARN, job: job, n: 0},
		{op: "move", queue: bulk.ARN, job: job, n: 1},
		{op: "move", queue: "", job: job, n: 2},
		{op: "move", queue: bulk.ARN, job: job, n: 3},
	}
	got := fake.took()
	if len(got) != len(want) {
		t.Fatalf("scheduler calls %v, want %v", got, want)
	}
	for i := range want {
		if got[i].op != want[i].op || got[i].queue != want[i].queue || got[i].job != want[i].job || got[i].n != want[i].n {
			t.Errorf("scheduler call %d: %v, want %v", i, got[i], want[i])
		}
	}

	// A Scheduler without ScheduleJobOn and RescheduleJobOn cannot debounce the bulk queue's kind.
	plain := &recordingScheduler{t: t}
	enq, err := dedup.New(dedup.Config{Producer: e.prod, DynamoDB: e.ddb, Table: e.table, Jobs: e.status, Scheduler: plain, LocalScheduler: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	other := dedup.Debounce{Key: "doc-plain", Period: 10 * time.Second}
	_, err = enq.Enqueue(ctx, exportArgs{User: "doc-plain"}, other)
	if !errors.Is(err, dedup.ErrNeedsScheduler) || !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), `goes to queue "bulk"`) {
		t.Fatalf("debounce of a routed kind through a scheduler of one queue: %v, want ErrNeedsScheduler and ErrInvalid naming the queue", err)
	}
	if calls := plain.took(); len(calls) != 0 {
		t.Fatalf("the refused debounce called the scheduler: %v", calls)
	}
	// Nothing was written: the key's next enqueue starts its first job.
	res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-plain"}, other)
	if err != nil || res.Events != 1 {
		t.Fatalf("after the refused debounce: %+v, %v; want the key's first job", res, err)
	}
	// The same scheduler serves the kind sent to the default queue, through its own methods.
	if res, err := enq.Enqueue(ctx, exportArgs{User: "doc-plain"}, dedup.Debounce{Key: "doc-default", Period: 10 * time.Second},
		producer.WithQueue(queues.DefaultName)); err != nil || res.Outcome != dedup.Debounced {
		t.Fatalf("debounce onto the default queue through a scheduler of one queue: %+v, %v", res, err)
	}
	if calls := plain.took(); len(calls) != 1 || calls[0].queue != "" || calls[0].op != "create" {
		t.Fatalf("scheduler calls %v, want one ScheduleJob", calls)
	}
}

// TestDebounceRoutedQueueWithoutARN: a routed kind's queue whose ARN the set does not know (an
// endpoint's URL, no ARN given) cannot be scheduled onto: refused with ErrInvalid before any
// call.
func TestDebounceRoutedQueueWithoutARN(t *testing.T) {
	t.Parallel()
	set, err := queues.New(queues.Queue{Name: queues.DefaultName, URL: "http://localhost:4566/000000000000/jobs"},
		queues.Queue{Name: "bulk", URL: "http://localhost:4566/000000000000/jobs-bulk"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: noCalls{t}, Queues: set, Routes: queues.Routes{"report.export": "bulk"}})
	if err != nil {
		t.Fatal(err)
	}
	fake := &queueRecordingScheduler{recordingScheduler{t: t}}
	e, err := dedup.New(dedup.Config{Producer: p, DynamoDB: noCalls{t}, Table: "jobs", Jobs: noCalls{t}, Scheduler: fake, LocalScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Enqueue(context.Background(), exportArgs{User: "u"}, dedup.Debounce{Period: 10 * time.Second})
	if !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), "queue's ARN is unknown") {
		t.Fatalf("debounce onto a queue without an ARN: %v, want ErrInvalid saying the ARN is unknown", err)
	}
	if calls := fake.took(); len(calls) != 0 {
		t.Fatalf("scheduler calls %v, want none", calls)
	}
}

// TestDebounceRoutedKindRunsOnItsQueue, on the embedded emulator with a stack of two queues:
// enqueues of a kind routed to "bulk" are one debounced job whose schedule the local dispatcher
// fires onto the bulk queue (the default queue gets nothing), and the bulk queue's worker runs it
// once, with the last args, not as misrouted.
func TestDebounceRoutedKindRunsOnItsQueue(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{named: []queues.Spec{{Name: "bulk"}}, routes: queues.Routes{"report.export": "bulk"}})
	rule := dedup.Debounce{Key: "doc-q", Period: 2 * time.Second, MaxWait: time.Minute}
	var job string
	for i := range 5 {
		res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-q", N: i}, rule)
		if err != nil || res.Outcome != dedup.Debounced {
			t.Fatalf("enqueue %d: %+v, %v", i, res, err)
		}
		if i == 0 {
			job = res.ID
		}
		if res.ID != job {
			t.Fatalf("enqueue %d joined job %s, want %s", i, res.ID, job)
		}
		if n := e.tick(); n != 0 {
			t.Fatalf("enqueue %d: %d schedules fired while enqueues keep coming", i, n)
		}
		e.clock.Add(500 * time.Millisecond)
	}
	e.clock.Add(2 * time.Second)
	if n := e.tick(); n != 1 {
		t.Fatalf("%d schedules fired after the quiet period, want 1", n)
	}
	if msgs := e.receiveFrom(e.stacks[queues.DefaultName]); len(msgs) != 0 {
		t.Fatalf("the default queue got %d messages; the routed kind's job belongs on bulk", len(msgs))
	}
	msgs := e.receiveFrom(e.stacks["bulk"])
	if len(msgs) != 1 {
		t.Fatalf("the bulk queue got %d messages, want the one debounced job", len(msgs))
	}
	if env := envelopes(t, msgs)[0]; env.ID != job || argsOf(t, env).N != 4 {
		t.Fatalf("the job sent: %s with %+v, want %s with the last args (n 4)", env.ID, argsOf(t, env), job)
	}
	e.workOn(e.handlers["bulk"], e.stacks["bulk"], msgs)
	runs, _ := e.ran()
	if len(runs) != 1 || runs[0].N != 4 {
		t.Fatalf("runs %v, want one with n 4", runs)
	}
	e.mu.Lock()
	misrouted := e.misrouted
	e.mu.Unlock()
	if misrouted != 0 {
		t.Fatalf("%d jobs ran as misrouted, want 0", misrouted)
	}
}

// TestRulesOnARoutedFIFOQueue: with a producer whose default queue is standard and whose kind is
// routed to a FIFO queue, the FIFO rules are those of the job's queue: a unique or debounced
// job with a deduplication id of its own is refused there (SQS would drop the key's next job),
// and a debounce with WithKey is refused for the FIFO reason, before any call.
func TestRulesOnARoutedFIFOQueue(t *testing.T) {
	t.Parallel()
	set, err := queues.New(queues.Queue{Name: queues.DefaultName, URL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"},
		queues.Queue{Name: "orders", URL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-orders.fifo"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: noCalls{t}, Queues: set, Routes: queues.Routes{"report.export": "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	fake := &queueRecordingScheduler{recordingScheduler{t: t}}
	e, err := dedup.New(dedup.Config{Producer: p, DynamoDB: noCalls{t}, Table: "jobs", Jobs: noCalls{t}, Scheduler: fake, LocalScheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	group := producer.WithGroupID("g")
	for _, tt := range []struct {
		name string
		rule dedup.Rule
		opts []producer.Option
		want string
	}{
		{"unique with a dedup id", dedup.Unique{Key: "k", Window: time.Hour}, []producer.Option{group, producer.WithDeduplicationID("d-1")}, "FIFO queue: the job has a deduplication id of its own"},
		{"unique with a key", dedup.Unique{Key: "k", Window: time.Hour}, []producer.Option{group, producer.WithKey("order-1")}, "FIFO queue: the job has a key of its own"},
		{"debounce with a dedup id", dedup.Debounce{Period: 10 * time.Second}, []producer.Option{group, producer.WithDeduplicationID("d-1")}, "FIFO queue: the job has a deduplication id of its own"},
		{"debounce with a key", dedup.Debounce{Period: 10 * time.Second}, []producer.Option{group, producer.WithKey("order-1")}, "FIFO queue: the job has a key of its own"},
	} {
		_, err := e.Enqueue(context.Background(), exportArgs{User: "u"}, tt.rule, tt.opts...)
		if !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", tt.name, err, tt.want)
		}
	}
	if calls := fake.took(); len(calls) != 0 {
		t.Errorf("scheduler calls %v, want none", calls)
	}
}
