package dlq_test

// Tests against the embedded emulator (real queue semantics: visibility, receive counts, FIFO).
// It has no StartMessageMoveTask, so RedriveAll takes the fallback mover here.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

const within = 15 * time.Second

func TestPeekLeavesMessagesVisible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fifo  bool
		limit int
		want  int
	}{
		{"standard all", false, 0, 3},
		{"standard some", false, 2, 2},
		{"fifo all", true, 10, 3},
		{"fifo some", true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEmu(t, tc.fifo, false)
			e.seedDead(0, 3)
			d := e.dlq(nil)
			got, err := d.Peek(context.Background(), tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("Peek returned %d messages, want %d", len(got), tc.want)
			}
			for _, m := range got {
				env := envelope(jobNumber(t, m.JobID))
				if m.Kind != testKind || m.Body != body(env) || m.Failure == nil || m.Failure.JobID != m.JobID ||
					m.Reason != jobs.ReasonExhausted || m.Attempts != 3 || m.Attributes["tenant"] != "acme" ||
					!m.FailedAt.Equal(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)) || m.SentAt.IsZero() || m.ReceiveCount < 1 {
					t.Errorf("Peek message = %+v", m)
				}
			}
			// Every message, peeked or not, can be received again at once.
			if again := e.receive(e.stack.DLQURL, 3, within); len(again) != 3 {
				t.Fatalf("after Peek, received %d messages again, want 3", len(again))
			}
		})
	}
}

func jobNumber(t *testing.T, jobID string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(jobID, "job-%d", &n); err != nil {
		t.Fatalf("job id %q: %v", jobID, err)
	}
	return n
}

func TestShow(t *testing.T) {
	t.Parallel()
	e := newEmu(t, false, false)
	e.seedDead(0, 4)
	e.send(e.stack.DLQURL, "not an envelope", nil)
	d := e.dlq(nil)
	for _, tc := range []struct {
		jobID   string
		wantErr error
	}{
		{"job-002", nil},
		{"job-000", nil},
		{"job-999", dlq.ErrNotFound},
		{"", dlq.ErrInvalid},
	} {
		m, err := d.Show(context.Background(), tc.jobID)
		if !errors.Is(err, tc.wantErr) {
			t.Fatalf("Show(%q) error = %v, want %v", tc.jobID, err, tc.wantErr)
		}
		if tc.wantErr == nil && (m.JobID != tc.jobID || m.Failure == nil || m.Reason != jobs.ReasonExhausted) {
			t.Errorf("Show(%q) = %+v", tc.jobID, m)
		}
	}
	if again := e.receive(e.stack.DLQURL, 5, within); len(again) != 5 {
		t.Fatalf("after Show, received %d messages again, want 5", len(again))
	}
}

// TestRedriveAllGivesFreshBudget dead-letters real jobs through the worker (they cancel), redrives
// them, and runs them again with a worker on which they succeed.
func TestRedriveAllGivesFreshBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		keep           bool
		wantRuns       int // the status record's run count after the redrive
		wantBefore     int // the redriven envelope's attempts_before
		wantNewAttempt int // the attempt number the successful run sees
	}{
		{"fresh", false, 0, 0, 1},
		// The jobs' envelopes say attempts_before 2, so their one run was attempt 3.
		{"keep attempts", true, 3, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 5
			e := newEmu(t, false, true)
			ctx := context.Background()
			for i := range n {
				e.send(e.stack.QueueURL, body(envelope(i)), nil)
			}
			cancelling := e.handler(func(context.Context, *jobs.Job[testArgs]) error {
				return jobs.Cancel(errors.New("not today"))
			})
			msgs := e.receive(e.stack.QueueURL, n, within)
			if len(msgs) != n {
				t.Fatalf("received %d jobs, want %d", len(msgs), n)
			}
			if failed := e.deliver(cancelling, msgs); len(failed) != 0 {
				t.Fatalf("failed items %v", failed)
			}
			for i := range n {
				j, err := e.table.Get(ctx, testKind, envelope(i).Key)
				if err != nil || j.State != idempotency.StateDead || j.Runs != 3 {
					t.Fatalf("record before redrive = %+v, %v; want dead with 3 runs (attempts_before 2 + its run)", j, err)
				}
			}

			res, err := e.dlq(nil).RedriveAll(ctx, dlq.RedriveOptions{KeepAttempts: tc.keep})
			if err != nil || res.Moved != n || res.Method != dlq.MethodFallback {
				t.Fatalf("RedriveAll = %+v, %v; want %d moved by the fallback", res, err, n)
			}
			for i := range n {
				j, err := e.table.Get(ctx, testKind, envelope(i).Key)
				if err != nil || j.State != idempotency.StateRetrying || j.Runs != tc.wantRuns || j.Reason != "" || j.LastError == "" {
					t.Fatalf("record after redrive = %+v, %v; want retrying with %d runs, its last error kept and no dead-letter reason", j, err, tc.wantRuns)
				}
			}

			back := e.receive(e.stack.QueueURL, n, within)
			if len(back) != n {
				t.Fatalf("received %d redriven jobs, want %d", len(back), n)
			}
			for _, m := range back {
				if _, ok := m.MessageAttributes[worker.FailureAttribute]; ok {
					t.Errorf("redriven message %s still has the failure attribute", aws.ToString(m.MessageId))
				}
				env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
				if err != nil || env.AttemptsBefore != tc.wantBefore {
					t.Errorf("redriven envelope %+v, %v; want attempts_before %d", env, err, tc.wantBefore)
				}
			}
			var ran attempts
			succeeding := e.handler(func(_ context.Context, job *jobs.Job[testArgs]) error {
				ran.record(job.ID, job.Attempt)
				return nil
			})
			if failed := e.deliver(succeeding, back); len(failed) != 0 {
				t.Fatalf("failed items %v", failed)
			}
			got := ran.get()
			for i := range n {
				if a, ok := got[envelope(i).ID]; !ok || a != tc.wantNewAttempt {
					t.Errorf("job %s ran with attempt %d (ran: %v), want %d", envelope(i).ID, a, ok, tc.wantNewAttempt)
				}
				j, err := e.table.Get(ctx, testKind, envelope(i).Key)
				if err != nil || j.State != idempotency.StateSucceeded {
					t.Errorf("record after the run = %+v, %v; want succeeded", j, err)
				}
			}
			if left := e.drain(e.stack.DLQURL, within); len(left) != 0 {
				t.Errorf("%d messages left in the DLQ", len(left))
			}
		})
	}
}

func TestRedriveAllMovesEveryMessage(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			const n = 23
			e := newEmu(t, fifo, false)
			e.seedDead(0, n)
			e.send(e.stack.DLQURL, "not an envelope", nil)
			var calls [][2]int
			res, err := e.dlq(nil).RedriveAll(context.Background(), dlq.RedriveOptions{
				Progress: func(moved, total int) { calls = append(calls, [2]int{moved, total}) },
			})
			if err != nil || res.Moved != n+1 || res.Method != dlq.MethodFallback || res.TaskHandle != "" {
				t.Fatalf("RedriveAll = %+v, %v", res, err)
			}
			if len(calls) == 0 || calls[len(calls)-1][0] != n+1 || calls[len(calls)-1][1] < n+1 {
				t.Errorf("Progress calls %v", calls)
			}
			back := e.drain(e.stack.QueueURL, within)
			if len(back) != n+1 {
				t.Fatalf("%d messages in the job queue, want %d", len(back), n+1)
			}
			for _, m := range back {
				b := aws.ToString(m.Body)
				if _, ok := m.MessageAttributes[worker.FailureAttribute]; ok {
					t.Errorf("message %q still has the failure attribute", b)
				}
				if v := m.MessageAttributes["tenant"]; aws.ToString(v.StringValue) != "acme" {
					t.Errorf("message %q lost its tenant attribute: %+v", b, m.MessageAttributes)
				}
				if b == "not an envelope" {
					continue
				}
				env, err := jobs.ParseEnvelope(b)
				if err != nil || env.AttemptsBefore != 0 {
					t.Errorf("redriven body %q: %v; want attempts_before 0", b, err)
				}
			}
			if left := e.drain(e.stack.DLQURL, within); len(left) != 0 {
				t.Errorf("%d messages left in the DLQ", len(left))
			}
		})
	}
}

func TestRedriveJobMovesOnlyThatJob(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			e := newEmu(t, fifo, false)
			e.seedDead(0, 4)
			d := e.dlq(nil)
			ctx := context.Background()
			if err := d.RedriveJob(ctx, "job-002", false); err != nil {
				t.Fatal(err)
			}
			if err := d.RedriveJob(ctx, "job-404", false); !errors.Is(err, dlq.ErrNotFound) {
				t.Fatalf("RedriveJob(unknown) error = %v, want ErrNotFound", err)
			}
			// The others are visible again at once.
			rest := e.receive(e.stack.DLQURL, 3, within)
			if got := sorted(jobIDs(rest)); !slices.Equal(got, []string{"job-000", "job-001", "job-003"}) {
				t.Errorf("DLQ holds %v", got)
			}
			moved := e.drain(e.stack.QueueURL, within)
			if got := jobIDs(moved); !slices.Equal(got, []string{"job-002"}) {
				t.Fatalf("job queue holds %v, want [job-002]", got)
			}
			if _, ok := moved[0].MessageAttributes[worker.FailureAttribute]; ok {
				t.Error("the redriven job still has the failure attribute")
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestRedriveAllResumesAfterCancel cancels the mover from its Progress callback, runs it again,
// and checks that every job is in exactly one of the queues, once.
func TestRedriveAllResumesAfterCancel(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			const n, stopAt = 25, 10
			e := newEmu(t, fifo, false)
			e.seedDead(0, n)
			d := e.dlq(nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, err := d.RedriveAll(ctx, dlq.RedriveOptions{Progress: func(moved, _ int) {
				if moved >= stopAt {
					cancel()
				}
			}})
			// A receive may bring fewer than 10 messages: the stop comes after the first batch
			// that reaches stopAt.
			if !errors.Is(err, context.Canceled) || res.Moved < stopAt || res.Moved >= n {
				t.Fatalf("cancelled RedriveAll = %+v, %v; want %d–%d moved and context.Canceled", res, err, stopAt, n-1)
			}
			first := res.Moved
			// Nothing is left hidden: the second run moves the rest at once.
			res, err = d.RedriveAll(context.Background(), dlq.RedriveOptions{})
			if err != nil || res.Moved != n-first {
				t.Fatalf("resumed RedriveAll = %+v, %v; want %d moved", res, err, n-first)
			}
			count := map[string]int{}
			for _, id := range jobIDs(e.drain(e.stack.QueueURL, within)) {
				count[id]++
			}
			for _, id := range jobIDs(e.drain(e.stack.DLQURL, within)) {
				count["dlq:"+id]++
			}
			for i := range n {
				if id := envelope(i).ID; count[id] != 1 {
					t.Errorf("job %s is %d times in the job queue", id, count[id])
				}
			}
			if len(count) != n {
				t.Errorf("queues hold %v, want each of %d jobs once in the job queue", count, n)
			}
		})
	}
}

// TestFIFORedriveUsesFreshDeduplicationIDs redrives two identical dead letters within the
// deduplication window: both reach the job queue.
func TestFIFORedriveUsesFreshDeduplicationIDs(t *testing.T) {
	t.Parallel()
	e := newEmu(t, true, false)
	env := envelope(7)
	env.AttemptsBefore = 0
	d := e.dlq(nil)
	for range 2 {
		e.send(e.stack.DLQURL, body(env), failureAttr(env))
		if err := d.RedriveJob(context.Background(), env.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := jobIDs(e.drain(e.stack.QueueURL, within)); !slices.Equal(got, []string{env.ID, env.ID}) {
		t.Fatalf("job queue holds %v, want the job twice", got)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	e := newEmu(t, false, false)
	e.seedDead(0, 3)
	d := e.dlq(nil)
	ctx := context.Background()
	name := dlq.QueueName(e.stack.DLQURL)
	for _, wrong := range []string{"", "yes", e.stack.Name, dlq.QueueName(e.stack.QueueURL)} {
		if err := d.Purge(ctx, wrong); !errors.Is(err, dlq.ErrConfirm) || !strings.Contains(err.Error(), name) {
			t.Fatalf("Purge(%q) error = %v, want ErrConfirm naming %q", wrong, err, name)
		}
	}
	if got, err := d.Peek(ctx, 10); err != nil || len(got) != 3 {
		t.Fatalf("after refused purges, Peek = %d messages, %v; want 3", len(got), err)
	}
	if err := d.Purge(ctx, name); err != nil {
		t.Fatal(err)
	}
	if left := e.drain(e.stack.DLQURL, within); len(left) != 0 {
		t.Errorf("%d messages left after the purge", len(left))
	}
}

func TestReplaySchedulerDLQ(t *testing.T) {
	t.Parallel()
	e := newEmu(t, false, false)
	ctx := context.Background()
	out, err := e.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(e.stack.Name + "-sched-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	schedDLQ := aws.ToString(out.QueueUrl)
	errAttrs := map[string]sqstypes.MessageAttributeValue{
		dlq.SchedulerErrorCode:    {DataType: aws.String("String"), StringValue: aws.String("AWS.Scheduler.ThrottlingException")},
		dlq.SchedulerErrorMessage: {DataType: aws.String("String"), StringValue: aws.String("Rate exceeded")},
	}
	for i := range 3 {
		e.send(schedDLQ, body(envelope(i)), errAttrs)
	}
	e.send(schedDLQ, `{"hello":"world"}`, errAttrs)
	e.send(schedDLQ, `not json`, errAttrs)

	n, err := e.dlq(nil).ReplaySchedulerDLQ(ctx, schedDLQ)
	var report *dlq.ReplayError
	if n != 3 || !errors.As(err, &report) || len(report.Skipped) != 2 || !errors.Is(err, jobs.ErrMalformed) {
		t.Fatalf("ReplaySchedulerDLQ = %d, %v; want 3 and a report of 2 malformed bodies", n, err)
	}
	for _, s := range report.Skipped {
		if s.Attributes[dlq.SchedulerErrorCode] != "AWS.Scheduler.ThrottlingException" || s.MessageID == "" {
			t.Errorf("skipped %+v", s)
		}
	}
	replayed := e.drain(e.stack.QueueURL, within)
	if got := sorted(jobIDs(replayed)); !slices.Equal(got, []string{"job-000", "job-001", "job-002"}) {
		t.Fatalf("job queue holds %v", got)
	}
	for _, m := range replayed {
		if aws.ToString(m.Body) != body(envelope(jobNumber(t, jobIDs([]sqstypes.Message{m})[0]))) || len(m.MessageAttributes) != 0 {
			t.Errorf("replayed message body %q attributes %v; want the envelope as it was, no attributes", aws.ToString(m.Body), m.MessageAttributes)
		}
	}
	// The skipped ones stay, visible at once.
	if left := e.receive(schedDLQ, 2, within); len(left) != 2 {
		t.Errorf("%d messages left in the scheduler DLQ, want 2", len(left))
	}
}
