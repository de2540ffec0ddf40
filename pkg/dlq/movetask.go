package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Statuses of an SQS message move task ([MoveTask.Status]), as ListMessageMoveTasks reports them.
const (
	MoveTaskRunning    = "RUNNING"
	MoveTaskCompleted  = "COMPLETED"
	MoveTaskCancelling = "CANCELLING"
	MoveTaskCancelled  = "CANCELLED"
	MoveTaskFailed     = "FAILED"
)

// ErrMoveTask: a message move task ended without completing (cancelled, or failed); the message
// names its status, what it moved and SQS's failure reason.
var ErrMoveTask = errors.New("dlq: the message move task did not complete")

// MoveTask is an SQS message move task (StartMessageMoveTask) as ListMessageMoveTasks reports it.
type MoveTask struct {
	// Handle identifies the task for CancelMessageMoveTask. SQS reports it only while the task
	// runs; WaitMoveTask keeps the handle it was given.
	Handle string
	// Status is MoveTaskRunning, MoveTaskCompleted, MoveTaskCancelling, MoveTaskCancelled or
	// MoveTaskFailed.
	Status string
	// Moved is SQS's ApproximateNumberOfMessagesMoved. It is approximate, and may still grow for
	// a little while after the task completed.
	Moved int
	// ToMove is SQS's ApproximateNumberOfMessagesToMove: the DLQ's count when the task started
	// (0 until SQS has started it).
	ToMove int
	// FailureReason is SQS's reason for a failed task ("" otherwise), such as
	// "AWS.SimpleQueueService.NonExistentQueue".
	FailureReason string
	// StartedAt is when SQS started the task (zero when not reported).
	StartedAt time.Time
	// SourceARN and DestinationARN are the DLQ and the queue the messages go to ("" when SQS
	// moves them to their original queues).
	SourceARN, DestinationARN string
	// RatePerSecond is the task's MaxNumberOfMessagesPerSecond (0: SQS's own rate).
	RatePerSecond int
}

// Ended reports whether the task has ended: completed, cancelled or failed.
func (t MoveTask) Ended() bool {
	return t.Status != MoveTaskRunning && t.Status != MoveTaskCancelling
}

// WaitOptions tunes [DLQ.WaitMoveTask].
type WaitOptions struct {
	// Interval is the time between two ListMessageMoveTasks calls. Defaults to 2s.
	Interval time.Duration
	// Progress, when set, is called with the task after each ListMessageMoveTasks that found it,
	// the last time with the task ended (or as it was when ctx was cancelled).
	Progress func(MoveTask)
}

// DefaultWaitInterval is [WaitOptions.Interval]'s default.
const DefaultWaitInterval = 2 * time.Second

// maxListedTasks is ListMessageMoveTasks's largest MaxResults.
const maxListedTasks = 10

// maxMissedPolls bounds the polls in a row that do not find the task before WaitMoveTask gives up.
const maxMissedPolls = 3

// finalReadTimeout bounds the read of a task's counts after WaitMoveTask's context was cancelled.
const finalReadTimeout = 5 * time.Second

// WaitMoveTask follows the message move task handle of the DLQ (the handle StartMessageMoveTask
// or [DLQ.RedriveAll] returned) until it ends, polling ListMessageMoveTasks every
// opts.Interval and calling opts.Progress with what SQS reports (moved, to move, status). It
// returns the task as it ended: with a nil error when it completed, an error wrapping
// ErrMoveTask when it was cancelled or failed (with SQS's FailureReason).
//
// A move task runs in SQS, not here: when ctx is cancelled, WaitMoveTask reads the task's counts
// once more (within a few seconds) and returns them with ctx's error; the task goes on until it
// completes or is cancelled (CancelMessageMoveTask with its handle). SQS names a task by its
// handle only while it runs; WaitMoveTask then recognises it by its start time, and a task that
// ended before the first poll is the DLQ's most recent one.
func (d *DLQ) WaitMoveTask(ctx context.Context, handle string, opts WaitOptions) (MoveTask, error) {
	if handle == "" {
		return MoveTask{}, fmt.Errorf("%w: the move task handle is empty", ErrInvalid)
	}
	if opts.Interval < 0 {
		return MoveTask{}, fmt.Errorf("%w: WaitOptions.Interval is %v, want ≥ 0", ErrInvalid, opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultWaitInterval
	}
	dlqARN, err := d.queueARN(ctx, d.cfg.DLQARN, d.cfg.DLQURL)
	if err != nil {
		return MoveTask{}, err
	}
	w := &taskWatch{handle: handle, t: MoveTask{Handle: handle, Status: MoveTaskRunning}}
	missed := 0
	for {
		found, err := w.poll(ctx, d, dlqARN)
		if ctx.Err() != nil {
			return w.interrupted(ctx, d, dlqARN, opts.Progress)
		}
		if err != nil {
			return w.t, err
		}
		if !found {
			if missed++; missed >= maxMissedPolls {
				return w.t, fmt.Errorf("dlq: the message move task %s is not among the %d most recent tasks of %s",
					handle, maxListedTasks, QueueName(d.cfg.DLQURL))
			}
		} else {
			missed = 0
			if opts.Progress != nil {
				opts.Progress(w.t)
			}
			if w.t.Ended() {
				return w.t, w.t.err()
			}
		}
		if err := d.cfg.Sleep(ctx, opts.Interval); err != nil {
			return w.interrupted(ctx, d, dlqARN, opts.Progress)
		}
	}
}

// taskWatch recognises one move task across ListMessageMoveTasks calls.
type taskWatch struct {
	handle string
	seen   bool // listed with its handle at least once: its StartedAt is known
	t      MoveTask
}

// poll lists the DLQ's recent move tasks and updates w.t from the watched one. It reports
// whether it was found.
func (w *taskWatch) poll(ctx context.Context, d *DLQ, dlqARN string) (bool, error) {
	tasks, err := d.moveTasks(ctx, dlqARN, maxListedTasks)
	if err != nil {
		return false, err
	}
	for i, t := range tasks {
		switch {
		case t.Handle == w.handle: // running
		case w.seen && t.Handle == "" && t.StartedAt.Equal(w.t.StartedAt): // ended since the last poll
		case !w.seen && i == 0 && t.Ended(): // ended before the first poll: the most recent task
		default:
			continue
		}
		w.seen = w.seen || t.Handle == w.handle
		t.Handle = w.handle
		w.t = t
		return true, nil
	}
	return false, nil
}

// interrupted returns the watched task after ctx was cancelled, its counts read once more.
func (w *taskWatch) interrupted(ctx context.Context, d *DLQ, dlqARN string, progress func(MoveTask)) (MoveTask, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalReadTimeout)
	defer cancel()
	if found, err := w.poll(rctx, d, dlqARN); err == nil && found && progress != nil {
		progress(w.t)
	}
	return w.t, ctx.Err()
}

// err is the error of an ended task: nil when it completed.
func (t MoveTask) err() error {
	switch t.Status {
	case MoveTaskCompleted:
		return nil
	case MoveTaskFailed:
		reason := t.FailureReason
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Errorf("%w: it failed after moving about %d of %d messages: %s", ErrMoveTask, t.Moved, t.ToMove, reason)
	}
	return fmt.Errorf("%w: it was %s after moving about %d of %d messages", ErrMoveTask, strings.ToLower(t.Status), t.Moved, t.ToMove)
}

// moveTasks returns the DLQ's most recent move tasks, newest first (at most limit, ≤ 10).
func (d *DLQ) moveTasks(ctx context.Context, dlqARN string, limit int) ([]MoveTask, error) {
	out, err := d.cfg.SQS.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{
		SourceArn: aws.String(dlqARN), MaxResults: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: list message move tasks: %w", err)
	}
	tasks := make([]MoveTask, 0, len(out.Results))
	for _, r := range out.Results {
		t := MoveTask{
			Handle: aws.ToString(r.TaskHandle), Status: aws.ToString(r.Status),
			Moved: int(r.ApproximateNumberOfMessagesMoved), ToMove: int(aws.ToInt64(r.ApproximateNumberOfMessagesToMove)),
			FailureReason: aws.ToString(r.FailureReason), SourceARN: aws.ToString(r.SourceArn),
			DestinationARN: aws.ToString(r.DestinationArn), RatePerSecond: int(aws.ToInt32(r.MaxNumberOfMessagesPerSecond)),
		}
		if r.StartedTimestamp > 0 {
			t.StartedAt = time.UnixMilli(r.StartedTimestamp)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// runningTask returns the DLQ's running move task, if there is one (only one may run per queue).
func (d *DLQ) runningTask(ctx context.Context, dlqARN string) (MoveTask, bool, error) {
	tasks, err := d.moveTasks(ctx, dlqARN, 1)
	if err != nil {
		return MoveTask{}, false, err
	}
	if len(tasks) > 0 && !tasks[0].Ended() && tasks[0].Handle != "" {
		return tasks[0], true, nil
	}
	return MoveTask{}, false, nil
}

// alreadyRunning reports whether err is StartMessageMoveTask's answer while a task runs on the
// source queue: InvalidParameterValue, "There is already a task running. Only one active task is
// allowed for a source queue arn at a given time." (recorded against AWS).
func alreadyRunning(err error) bool {
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if !errors.As(err, &api) {
		return false
	}
	msg := strings.ToLower(api.ErrorMessage())
	return strings.HasSuffix(api.ErrorCode(), "InvalidParameterValue") || strings.Contains(msg, "already a task running") ||
		strings.Contains(msg, "only one active task")
}
