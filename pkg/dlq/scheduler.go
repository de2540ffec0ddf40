package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Message attributes EventBridge Scheduler sets on the messages of a schedule's dead-letter queue
// (the body is the target input that could not be delivered).
const (
	SchedulerErrorCode     = "ERROR_CODE"
	SchedulerErrorMessage  = "ERROR_MESSAGE"
	SchedulerExecutionID   = "EXECUTION_ID"
	SchedulerScheduleARN   = "SCHEDULE_ARN"
	SchedulerScheduledTime = "SCHEDULED_TIME"
	SchedulerTargetARN     = "TARGET_ARN"
	SchedulerRetryAttempts = "RETRY_ATTEMPTS"
)

// SkippedMessage is a message [DLQ.ReplaySchedulerDLQ] left in the scheduler's dead-letter queue.
type SkippedMessage struct {
	// MessageID and Body are the message's.
	MessageID, Body string
	// Attributes are its message attributes (see the Scheduler* names).
	Attributes map[string]string
	// Err says why it was skipped: the body is not a job envelope (wraps jobs.ErrMalformed), or
	// the job queue refused the copy.
	Err error
}

// ReplayError lists the messages [DLQ.ReplaySchedulerDLQ] could not replay. errors.Is sees
// through it to each message's error.
type ReplayError struct {
	// Skipped are the messages left in the scheduler's dead-letter queue.
	Skipped []SkippedMessage
}

// Error summarises the skipped messages.
func (e *ReplayError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dlq: %d scheduler dead letters were not replayed and stay in their queue", len(e.Skipped))
	for i, s := range e.Skipped {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Skipped)-i)
			break
		}
		fmt.Fprintf(&b, "; message %s", s.MessageID)
		if code := s.Attributes[SchedulerErrorCode]; code != "" {
			fmt.Fprintf(&b, " (scheduler error %s)", code)
		}
		fmt.Fprintf(&b, ": %v", s.Err)
	}
	return b.String()
}

// Unwrap returns each skipped message's error.
func (e *ReplayError) Unwrap() []error {
	errs := make([]error, len(e.Skipped))
	for i, s := range e.Skipped {
		errs[i] = s.Err
	}
	return errs
}

// ReplaySchedulerDLQ re-enqueues the jobs of failed EventBridge Scheduler firings. A schedule
// whose target is the job queue delivers its input — the job's envelope — and when that delivery
// fails after the schedule's retries, Scheduler sends the input to the schedule's dead-letter
// queue (schedulerDLQURL, a standard queue) as the message body, with attributes that describe
// the error (ERROR_CODE, ERROR_MESSAGE, …). ReplaySchedulerDLQ sends each body that is a valid
// envelope to the job queue as it is (without those attributes; a FIFO job queue gets the job's
// kind as message group and a fresh deduplication id), deletes it from the scheduler's queue once
// sent, and returns how many it replayed. Messages whose body is not an envelope, or that the job
// queue refused, stay in the scheduler's queue (visible again at once) and are reported in a
// *ReplayError. It stops when a receive brings nothing new, or between steps when ctx is
// cancelled; running it again continues.
func (d *DLQ) ReplaySchedulerDLQ(ctx context.Context, schedulerDLQURL string) (n int, err error) {
	switch schedulerDLQURL {
	case "":
		return 0, fmt.Errorf("%w: scheduler DLQ URL is empty", ErrInvalid)
	case d.cfg.SourceURL:
		return 0, fmt.Errorf("%w: the scheduler DLQ URL is the job queue's", ErrInvalid)
	}
	skipped := &held{d: d, queueURL: schedulerDLQURL}
	defer func() {
		if rerr := skipped.release(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	skippedIDs := map[string]bool{}
	var report ReplayError
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		msgs, err := d.receive(ctx, schedulerDLQURL, maxBatch, holdVisibility)
		if err != nil {
			return n, err
		}
		var todo []dead
		for _, m := range msgs {
			id := aws.ToString(m.MessageId)
			if skippedIDs[id] {
				skipped.add(m)
				continue
			}
			dm := decode(m)
			if dm.env == nil {
				skippedIDs[id] = true
				skipped.add(m)
				report.Skipped = append(report.Skipped, SkippedMessage{MessageID: id, Body: dm.Body, Attributes: dm.Attributes, Err: dm.envErr})
				continue
			}
			todo = append(todo, dm)
		}
		if len(todo) == 0 {
			break
		}
		out, err := d.moveBatch(ctx, schedulerDLQURL, todo, moveOptions{keepAttempts: true, bodyOnly: true})
		n += out.sentCount()
		for i, m := range todo {
			if out.sent[i] {
				continue
			}
			skipped.add(m.raw)
			if err == nil {
				skippedIDs[m.MessageID] = true
				rerr := out.refused[i]
				if rerr == nil {
					rerr = errors.New("SendMessageBatch reported no result for the entry")
				}
				report.Skipped = append(report.Skipped, SkippedMessage{MessageID: m.MessageID, Body: m.Body, Attributes: m.Attributes, Err: rerr})
			}
		}
		if err != nil {
			return n, err
		}
	}
	if len(report.Skipped) > 0 {
		return n, &report
	}
	return n, nil
}
