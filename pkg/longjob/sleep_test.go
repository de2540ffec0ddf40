package longjob_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

var _ worker.Scheduler = (*schedule.Client)(nil)

type reportArgs struct{ Name string }

func (reportArgs) Kind() string { return "test.report" }

// phase is the cursor of the sleeping job.
type phase struct {
	Step string `json:"step"`
}

// TestSleepTwentyMinutesResumesOnce runs a job that saves a cursor and sleeps for 20 minutes, on
// one fake clock shared by the worker, the middleware, the schedule client and the local
// dispatcher (which fires EventBridge Scheduler's schedules where the emulator does not): the
// worker hands the sleeping copy to the scheduler (nothing waits in SQS, nothing runs), the
// record says scheduled until the wake time with one continuation and no attempt spent; at 19
// minutes nothing fires; at 20 the copy is sent, the job runs once more from its cursor and
// succeeds; the schedule is gone and nothing fires again.
func TestSleepTwentyMinutesResumesOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	clk := &clock{now: time.Now().UTC()}
	sch := scheduler.NewFromConfig(s.b.Config)
	group, err := awslocal.ProvisionScheduleGroup(ctx, sch, s.stack.Name)
	if err != nil {
		t.Fatal(err)
	}
	client, err := schedule.NewClient(schedule.Config{Scheduler: sch, Group: group, QueueARN: s.stack.QueueARN,
		RoleARN: "arn:aws:iam::000000000000:role/sqsworker-scheduler", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: sch, SQS: s.sqs, Group: group, Now: clk.Now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu   sync.Mutex
		runs []phase // the cursor each run found
	)
	work := func(ctx context.Context, job *jobs.Job[reportArgs]) error {
		var p phase
		if _, err := jobs.Cursor(ctx, &p); err != nil {
			return err
		}
		mu.Lock()
		runs = append(runs, p)
		mu.Unlock()
		if p.Step == "" {
			if err := jobs.Checkpoint(ctx, phase{Step: "exported"}); err != nil {
				return err
			}
			return jobs.Sleep(20 * time.Minute)
		}
		return nil
	}
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: s.store, Logger: logger(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[reportArgs](work))
	h, err := worker.New(worker.Config{Registry: reg, SQS: s.sqs, QueueURL: s.stack.QueueURL, DLQURL: s.stack.DLQURL,
		Middleware: []worker.Middleware{mw}, Scheduler: client, Now: clk.Now, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	s.startPoller(h, poller.Config{Concurrency: 2, VisibilityTimeout: 20 * time.Second})

	res, err := s.prod.Enqueue(ctx, reportArgs{Name: "monthly"})
	if err != nil {
		t.Fatal(err)
	}
	wake := clk.Now().Add(20 * time.Minute)
	j := s.waitState(res.ID, idempotency.StateScheduled, time.Minute)
	if j.Continuations != 1 || j.Runs != 0 || j.RunAt.Before(wake.Add(-time.Second)) || j.RunAt.After(wake.Add(time.Second)) {
		t.Errorf("sleeping record: continuations %d, runs %d, run at %v; want 1, 0 (no attempt spent), about %v", j.Continuations, j.Runs, j.RunAt, wake)
	}
	if j.Cursor.Value != `{"step":"exported"}` {
		t.Errorf("sleeping record's cursor %+v", j.Cursor)
	}
	page, err := client.ListJobs(ctx, schedule.JobListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].Envelope.ID != res.ID || page.Jobs[0].Envelope.Meta[jobs.MetaContinuation] != "1" ||
		page.Jobs[0].Name != schedule.ResendScheduleName(res.ID, page.Jobs[0].RunAt) {
		t.Fatalf("job schedules: %+v; want the sleeping copy of %s", page.Jobs, res.ID)
	}
	if !page.Jobs[0].Envelope.RunAt.Equal(j.RunAt) {
		t.Errorf("the copy's run_at %v and the record's %v differ; want one wake time", page.Jobs[0].Envelope.RunAt, j.RunAt)
	}
	if depth := s.queueDepth(); depth != 0 {
		t.Errorf("%d messages wait in the queue while the job sleeps in the scheduler, want 0", depth)
	}

	clk.Add(19 * time.Minute)
	if n, err := disp.Tick(ctx); err != nil || n != 0 {
		t.Fatalf("dispatcher at 19 minutes: fired %d, %v; want nothing yet", n, err)
	}
	clk.Add(time.Minute + time.Second)
	if n, err := disp.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("dispatcher at 20 minutes: fired %d, %v; want the sleeping copy", n, err)
	}
	j = s.waitState(res.ID, idempotency.StateSucceeded, time.Minute)
	if n, err := disp.Tick(ctx); err != nil || n != 0 {
		t.Errorf("dispatcher after the wake: fired %d, %v; want nothing more", n, err)
	}
	if page, err := client.ListJobs(ctx, schedule.JobListQuery{}); err != nil || len(page.Jobs) != 0 {
		t.Errorf("job schedules after the wake: %+v, %v; want none", page.Jobs, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || runs[0].Step != "" || runs[1].Step != "exported" {
		t.Errorf("runs found cursors %+v; want two runs, the second from the saved cursor", runs)
	}
	if j.Continuations != 1 || j.Runs != 1 {
		t.Errorf("record after the wake: continuations %d, runs %d; want 1 and 1", j.Continuations, j.Runs)
	}
	s.dlqEmpty()
}

// queueDepth returns the queue's ApproximateNumberOfMessages + ApproximateNumberOfMessagesDelayed.
func (s *stack) queueDepth() int {
	s.t.Helper()
	out, err := s.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.stack.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"}})
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for name, v := range out.Attributes {
		k, err := strconv.Atoi(v)
		if err != nil {
			s.t.Fatalf("queue attribute %s = %q", name, v)
		}
		n += k
	}
	return n
}
