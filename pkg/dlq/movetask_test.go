package dlq_test

// Move tasks against the fake SQS, which answers StartMessageMoveTask and ListMessageMoveTasks as
// AWS documents them (the embedded emulator has no move tasks).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/dlq"
)

// progressLog records what WaitMoveTask reported.
type progressLog struct {
	mu    sync.Mutex
	lines []string
	last  dlq.MoveTask
}

func (p *progressLog) add(t dlq.MoveTask) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, fmt.Sprintf("%s %d/%d", t.Status, t.Moved, t.ToMove))
	p.last = t
}

func (p *progressLog) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// startTask seeds n dead letters and starts a move task through RedriveAll.
func startTask(t *testing.T, f *fakeSQS, n int, clock *fakeClock, rs *fakeResetter) (*dlq.DLQ, dlq.RedriveResult) {
	t.Helper()
	seedFake(f, 0, n, nil)
	d, err := newFakeDLQ(f, func(c *dlq.Config) {
		c.RatePerSecond = 0
		if clock != nil {
			c.Now, c.Sleep = clock.Now, clock.Sleep
		}
		if rs != nil {
			c.Status = rs
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{})
	if err != nil || res.Method != dlq.MethodMoveTask || res.TaskHandle == "" || res.Attached {
		t.Fatalf("RedriveAll = %+v, %v; want a move task started", res, err)
	}
	return d, res
}

// TestWaitMoveTaskFollowsItToTheEnd: WaitMoveTask polls ListMessageMoveTasks every Interval,
// reports each step (moved / to move), and returns the task once SQS says COMPLETED, by which
// time every dead letter is in the job queue.
func TestWaitMoveTaskFollowsItToTheEnd(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	d, res := startTask(t, f, 4, clock, nil)
	var p progressLog
	task, err := d.WaitMoveTask(context.Background(), res.TaskHandle, dlq.WaitOptions{Progress: p.add})
	if err != nil || task.Status != dlq.MoveTaskCompleted || task.Moved != 4 || task.ToMove != 4 || task.Handle != res.TaskHandle {
		t.Fatalf("WaitMoveTask = %+v, %v; want COMPLETED, 4 of 4, handle %s", task, err, res.TaskHandle)
	}
	want := []string{"RUNNING 1/4", "RUNNING 2/4", "RUNNING 3/4", "COMPLETED 4/4"}
	if got := p.get(); !slices.Equal(got, want) {
		t.Errorf("progress %q, want %q", got, want)
	}
	if v, h := f.count(fakeDLQ); v+h != 0 {
		t.Errorf("%d messages left in the DLQ", v+h)
	}
	if v, _ := f.count(fakeSource); v != 4 {
		t.Errorf("%d messages in the job queue, want 4", v)
	}
	clock.mu.Lock()
	sleeps := slices.Clone(clock.sleeps)
	clock.mu.Unlock()
	if len(sleeps) != 3 || slices.ContainsFunc(sleeps, func(d time.Duration) bool { return d != dlq.DefaultWaitInterval }) {
		t.Errorf("slept %v between polls, want 3 × %v", sleeps, dlq.DefaultWaitInterval)
	}
	if task.StartedAt.IsZero() || task.SourceARN != fakeARN(fakeDLQ) || task.DestinationARN != fakeARN(fakeSource) || task.RatePerSecond != 100 {
		t.Errorf("task details %+v", task)
	}
}

// TestWaitMoveTaskEndings: a task that ended before the first poll is still found (SQS drops the
// handle of ended tasks); a failed or cancelled task is an error wrapping ErrMoveTask that says
// what it moved and why.
func TestWaitMoveTaskEndings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		setup      func(f *fakeSQS)
		cancelAt   int // cancel the task when the progress shows this many moved (0: never)
		wantStatus string
		wantMoved  int
		wantErr    string // "": none
	}{
		{name: "ended before the first poll", setup: func(f *fakeSQS) { f.step = 100 }, wantStatus: dlq.MoveTaskCompleted, wantMoved: 5},
		{name: "failed", setup: func(f *fakeSQS) { f.failAt, f.failReason = 2, "AWS.SimpleQueueService.NonExistentQueue" },
			wantStatus: dlq.MoveTaskFailed, wantMoved: 2, wantErr: "failed after moving about 2 of 5 messages: AWS.SimpleQueueService.NonExistentQueue"},
		{name: "cancelled", cancelAt: 3, wantStatus: dlq.MoveTaskCancelled, wantMoved: 3, wantErr: "was cancelled after moving about 3 of 5 messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSQS()
			if tc.setup != nil {
				tc.setup(f)
			}
			d, res := startTask(t, f, 5, &fakeClock{}, nil)
			var p progressLog
			task, err := d.WaitMoveTask(context.Background(), res.TaskHandle, dlq.WaitOptions{Progress: func(mt dlq.MoveTask) {
				p.add(mt)
				if tc.cancelAt > 0 && mt.Moved == tc.cancelAt && mt.Status == dlq.MoveTaskRunning {
					f.cancel(mt.Handle)
				}
			}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("WaitMoveTask error %v", err)
			case tc.wantErr != "" && (!errors.Is(err, dlq.ErrMoveTask) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("WaitMoveTask error %v, want ErrMoveTask with %q", err, tc.wantErr)
			}
			if task.Status != tc.wantStatus || task.Moved != tc.wantMoved || task.Handle != res.TaskHandle {
				t.Errorf("task %+v, want %s with %d moved", task, tc.wantStatus, tc.wantMoved)
			}
			if lines := p.get(); len(lines) == 0 || lines[len(lines)-1] != fmt.Sprintf("%s %d/5", tc.wantStatus, tc.wantMoved) {
				t.Errorf("progress %q does not end with the task's end", lines)
			}
		})
	}
}

// TestWaitMoveTaskInterrupted: when its context is cancelled, WaitMoveTask reads the task once
// more and returns what it moved so far with the context's error; the task keeps running in SQS.
func TestWaitMoveTaskInterrupted(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	d, res := startTask(t, f, 6, &fakeClock{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var p progressLog
	task, err := d.WaitMoveTask(ctx, res.TaskHandle, dlq.WaitOptions{Interval: time.Second, Progress: func(mt dlq.MoveTask) {
		p.add(mt)
		if mt.Moved == 2 {
			cancel() // Ctrl-C
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitMoveTask error %v, want context.Canceled", err)
	}
	// The last read came after the cancel: one more step moved.
	if task.Status != dlq.MoveTaskRunning || task.Moved != 3 || task.ToMove != 6 || task.Handle != res.TaskHandle {
		t.Errorf("task %+v, want RUNNING, 3 of 6 moved, handle %s", task, res.TaskHandle)
	}
	if got, want := p.get(), []string{"RUNNING 1/6", "RUNNING 2/6", "RUNNING 3/6"}; !slices.Equal(got, want) {
		t.Errorf("progress %q, want %q", got, want)
	}
	// It goes on without us.
	if task, err := d.WaitMoveTask(context.Background(), res.TaskHandle, dlq.WaitOptions{}); err != nil || task.Moved != 6 {
		t.Errorf("following it again = %+v, %v; want it completed with 6 moved", task, err)
	}
}

// TestWaitMoveTaskUnknownHandle: a handle that is none of the DLQ's tasks is an error after a few
// polls, not an endless wait.
func TestWaitMoveTaskUnknownHandle(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	f.frozen = true
	d, _ := startTask(t, f, 2, &fakeClock{}, nil)
	_, err := d.WaitMoveTask(context.Background(), "not-a-task", dlq.WaitOptions{})
	if err == nil || !strings.Contains(err.Error(), "not-a-task is not among") {
		t.Fatalf("WaitMoveTask error %v, want the task not found", err)
	}
	if _, err := d.WaitMoveTask(context.Background(), "", dlq.WaitOptions{}); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("empty handle: %v, want ErrInvalid", err)
	}
}

// TestRedriveAllFollowsARunningTask: a second redrive while a move task runs on the DLQ (SQS
// allows one per queue) starts none, resets no record again, and reports the running task, so
// that running redrive again after Ctrl-C is safe.
func TestRedriveAllFollowsARunningTask(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	f.frozen = true
	var rs fakeResetter
	d, first := startTask(t, f, 3, &fakeClock{}, &rs)
	resets := len(rs.get())
	res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{})
	if err != nil || !res.Attached || res.TaskHandle != first.TaskHandle || res.Method != dlq.MethodMoveTask || res.Total != 3 {
		t.Fatalf("second RedriveAll = %+v, %v; want the running task %s followed (Attached, 3 to move)", res, err, first.TaskHandle)
	}
	if len(f.moves) != 1 {
		t.Errorf("%d StartMessageMoveTask calls, want 1", len(f.moves))
	}
	if got := len(rs.get()); got != resets {
		t.Errorf("the second redrive reset %d records, want none", got-resets)
	}
}

// hidingSQS hides the running tasks from the first ListMessageMoveTasks, as when another redrive
// starts its task between this one's probe and its StartMessageMoveTask.
type hidingSQS struct {
	*fakeSQS
	mu     sync.Mutex
	hidden bool
}

func (h *hidingSQS) ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, opts ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	h.mu.Lock()
	first := !h.hidden
	h.hidden = true
	h.mu.Unlock()
	if first {
		return &sqs.ListMessageMoveTasksOutput{}, nil
	}
	return h.fakeSQS.ListMessageMoveTasks(ctx, in, opts...)
}

// TestRedriveAllStartRefusedWhileOneRuns: StartMessageMoveTask's InvalidParameterValue ("There
// is already a task running…") makes RedriveAll report the running task instead of failing.
func TestRedriveAllStartRefusedWhileOneRuns(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	f.frozen = true
	_, first := startTask(t, f, 3, &fakeClock{}, nil)
	d, err := dlq.New(dlq.Config{SQS: &hidingSQS{fakeSQS: f}, DLQURL: fakeDLQ, SourceURL: fakeSource})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.RedriveAll(context.Background(), dlq.RedriveOptions{})
	if err != nil || !res.Attached || res.TaskHandle != first.TaskHandle {
		t.Fatalf("RedriveAll = %+v, %v; want the running task %s followed", res, err, first.TaskHandle)
	}
	if len(f.moves) != 2 {
		t.Errorf("%d StartMessageMoveTask calls, want 2 (the second refused)", len(f.moves))
	}
	// Without a running task to follow, the refusal is the error.
	f.cancel(first.TaskHandle)
	f.moveErr = alreadyRunningErr
	_, err = d.RedriveAll(context.Background(), dlq.RedriveOptions{})
	if err == nil || !strings.Contains(err.Error(), "already a task running") {
		t.Errorf("RedriveAll error %v, want StartMessageMoveTask's", err)
	}
}
