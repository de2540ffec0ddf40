package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// maxMoveTaskRate is StartMessageMoveTask's largest MaxNumberOfMessagesPerSecond.
const maxMoveTaskRate = 500

// RedriveOptions tunes [DLQ.RedriveAll].
type RedriveOptions struct {
	// KeepAttempts keeps the jobs' spent attempts: the status records' run counts, and (fallback
	// mover) the envelopes' attempts_before. By default both are reset to 0.
	KeepAttempts bool
	// UseMoveTask requires StartMessageMoveTask: RedriveAll returns the backend's error when it
	// does not support it, instead of falling back. By default (UseMoveTask and NoMoveTask both
	// false) RedriveAll tries StartMessageMoveTask and falls back to the receive/send/delete
	// mover when the backend answers that the operation is unsupported or unknown.
	UseMoveTask bool
	// NoMoveTask skips StartMessageMoveTask and uses the receive/send/delete mover, which also
	// resets the envelopes' attempts_before and removes the failure attribute. It may not be set
	// with UseMoveTask.
	NoMoveTask bool
	// Progress, when set, is called after each batch the fallback mover moved, with the count
	// moved so far and the DLQ's approximate message count when the redrive began (at least the
	// count moved). Cancelling the redrive's context from it stops the mover before its next
	// batch, with nothing left in flight.
	Progress func(moved, total int)
}

// Methods [RedriveResult.Method] reports.
const (
	// MethodMoveTask: an SQS message move task (StartMessageMoveTask) moves the messages.
	MethodMoveTask = "move-task"
	// MethodFallback: RedriveAll moved the messages itself (receive, send, delete).
	MethodFallback = "receive-send-delete"
)

// RedriveResult is what [DLQ.RedriveAll] did.
type RedriveResult struct {
	// Moved counts the messages the fallback mover sent back to the job queue. It is 0 for a move
	// task, which goes on in SQS after RedriveAll returns (see ListMessageMoveTasks).
	Moved int
	// Method is MethodMoveTask or MethodFallback.
	Method string
	// TaskHandle is the move task's handle (MethodMoveTask), for CancelMessageMoveTask.
	TaskHandle string
}

// RedriveAll moves every dead letter back to the job queue, with a fresh attempt budget unless
// opts.KeepAttempts, by a move task or by the fallback mover (see the package documentation).
//
// With a move task, when Config.Status is set, RedriveAll first scans the DLQ (as Peek does) and
// resets the status record of each job found, then starts the task at Config.RatePerSecond
// (at most 500) and returns its handle; dead letters that arrive after the scan keep their run
// counts.
//
// The fallback mover moves batches of up to 10 messages at Config.RatePerSecond until a receive
// brings nothing new; it stops between steps when ctx is cancelled (returning ctx's error and
// what it moved) and is resumed by calling RedriveAll again. A stop between a batch's status
// resets and its send leaves those jobs listed as retrying while their messages are still in the
// DLQ, until the next redrive. Messages the job queue refused stay in the DLQ; RedriveAll then
// moves the others and returns an error that counts them.
func (d *DLQ) RedriveAll(ctx context.Context, opts RedriveOptions) (RedriveResult, error) {
	if opts.UseMoveTask && opts.NoMoveTask {
		return RedriveResult{}, fmt.Errorf("%w: RedriveOptions.UseMoveTask and NoMoveTask are both set", ErrInvalid)
	}
	if !opts.NoMoveTask {
		res, err := d.moveTask(ctx, opts)
		if err == nil || opts.UseMoveTask || !unsupported(err) {
			return res, err
		}
	}
	return d.fallback(ctx, opts)
}

// moveTask redrives with StartMessageMoveTask.
func (d *DLQ) moveTask(ctx context.Context, opts RedriveOptions) (RedriveResult, error) {
	res := RedriveResult{Method: MethodMoveTask}
	dlqARN, err := d.queueARN(ctx, d.cfg.DLQARN, d.cfg.DLQURL)
	if err != nil {
		return res, err
	}
	// Probe first, unless the task is required: a backend without move tasks then costs no
	// status scan before the fallback.
	if !opts.UseMoveTask {
		_, err := d.cfg.SQS.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqARN)})
		if err != nil && unsupported(err) {
			return res, fmt.Errorf("dlq: list message move tasks: %w", err)
		}
	}
	srcARN, err := d.queueARN(ctx, d.cfg.SourceARN, d.cfg.SourceURL)
	if err != nil {
		return res, err
	}
	if d.cfg.Status != nil {
		if err := d.resetAll(ctx, opts.KeepAttempts); err != nil {
			return res, err
		}
	}
	out, err := d.cfg.SQS.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{
		SourceArn:                    aws.String(dlqARN),
		DestinationArn:               aws.String(srcARN),
		MaxNumberOfMessagesPerSecond: aws.Int32(int32(min(d.cfg.RatePerSecond, maxMoveTaskRate))),
	})
	if err != nil {
		return res, fmt.Errorf("dlq: start message move task: %w", err)
	}
	res.TaskHandle = aws.ToString(out.TaskHandle)
	return res, nil
}

// resetAll resets the status record of every job in the DLQ, scanning it.
func (d *DLQ) resetAll(ctx context.Context, keepRuns bool) error {
	done := map[string]bool{}
	return d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		if m.env == nil {
			return false, false, nil
		}
		ik := m.env.Kind + "#" + m.env.EffectiveKey()
		if done[ik] {
			return false, false, nil
		}
		done[ik] = true
		return false, false, d.reset(ctx, m.env, keepRuns)
	})
}

func (d *DLQ) reset(ctx context.Context, env *jobs.Envelope, keepRuns bool) error {
	if err := d.cfg.Status.ResetForRedrive(ctx, env.Kind, env.EffectiveKey(), keepRuns); err != nil {
		return fmt.Errorf("dlq: reset the status of job %s (%s/%s): %w", env.ID, env.Kind, env.EffectiveKey(), err)
	}
	return nil
}

// queueARN returns arn, or the queue's ARN looked up with GetQueueAttributes when arn is empty.
func (d *DLQ) queueARN(ctx context.Context, arn, queueURL string) (string, error) {
	if arn != "" {
		return arn, nil
	}
	out, err := d.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("dlq: get the ARN of %s: %w", queueURL, err)
	}
	arn = out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("dlq: get the ARN of %s: no QueueArn attribute", queueURL)
	}
	return arn, nil
}

// approxCount returns the DLQ's ApproximateNumberOfMessages, 0 when unknown.
func (d *DLQ) approxCount(ctx context.Context) int {
	out, err := d.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(d.cfg.DLQURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}

// unsupported reports whether err says the backend does not know the operation.
func unsupported(err error) bool {
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "InvalidAction", "UnsupportedOperation", "UnknownOperation", "UnknownOperationException",
			"NotImplemented", "NotImplementedException":
			return true
		}
		msg := strings.ToLower(api.ErrorMessage())
		for _, s := range []string{"not supported", "unsupported", "not implemented", "unknown operation", "unknown action"} {
			if strings.Contains(msg, s) {
				return true
			}
		}
	}
	var status interface{ HTTPStatusCode() int }
	return errors.As(err, &status) && status.HTTPStatusCode() == 501
}

// fallback redrives with receive, send, delete.
func (d *DLQ) fallback(ctx context.Context, opts RedriveOptions) (res RedriveResult, err error) {
	res.Method = MethodFallback
	total := 0
	if opts.Progress != nil {
		total = d.approxCount(ctx)
	}
	// back holds the messages that stay in the DLQ (refused by the job queue, or not sent when
	// the run stops), to make them visible again when RedriveAll returns.
	back := &held{d: d, queueURL: d.cfg.DLQURL}
	defer func() {
		if rerr := back.release(ctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	refusedIDs := map[string]bool{}
	var refusals []error
	rate := d.cfg.RatePerSecond
	start := d.cfg.Now()
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		msgs, err := d.receive(ctx, d.cfg.DLQURL, min(maxBatch, rate), holdVisibility)
		if err != nil {
			return res, err
		}
		var todo []dead
		for _, m := range msgs {
			if refusedIDs[aws.ToString(m.MessageId)] {
				back.add(m)
				continue
			}
			todo = append(todo, decode(m))
		}
		if len(todo) == 0 {
			break
		}
		// Pace: the messages moved so far took at least moved/rate. A batch holds at most
		// rate messages, so the wait (≤ 1 s) fits well within the messages' visibility.
		if res.Moved > 0 {
			due := start.Add(time.Duration(res.Moved) * time.Second / time.Duration(rate))
			if wait := due.Sub(d.cfg.Now()); wait > 0 {
				if err := d.cfg.Sleep(ctx, wait); err != nil {
					for _, m := range todo {
						back.add(m.raw) // made visible again on return
					}
					return res, err
				}
			}
		}
		out, err := d.moveBatch(ctx, d.cfg.DLQURL, todo, moveOptions{keepAttempts: opts.KeepAttempts, resetStatus: true})
		res.Moved += out.sentCount()
		// Unsent messages go back to the DLQ at once after a stop; refused ones at the end.
		for i, m := range todo {
			if !out.sent[i] {
				back.add(m.raw)
				if err == nil {
					refusedIDs[m.MessageID] = true
				}
			}
		}
		refusals = append(refusals, out.refusals()...)
		if err != nil {
			return res, err
		}
		if opts.Progress != nil {
			opts.Progress(res.Moved, max(total, res.Moved))
		}
	}
	if len(refusedIDs) > 0 {
		return res, fmt.Errorf("dlq: %d dead letters could not be sent to the job queue and stay in the DLQ: %w",
			len(refusedIDs), errors.Join(firstN(refusals, 5)...))
	}
	return res, nil
}

func firstN(errs []error, n int) []error {
	if len(errs) > n {
		return append(errs[:n:n], fmt.Errorf("and %d more", len(errs)-n))
	}
	return errs
}

// RedriveJob moves the dead letter of the job jobID back to the job queue, as the fallback mover
// does (reset status record, no failure attribute, attempts_before 0 unless keepAttempts, fresh
// deduplication id), scanning the DLQ to find it; every other message it received is made visible
// again at once. It returns an error wrapping ErrNotFound when no dead letter carries that job
// id. When several copies of the job are dead-lettered, it moves the first one found.
func (d *DLQ) RedriveJob(ctx context.Context, jobID string, keepAttempts bool) error {
	if jobID == "" {
		return fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	found := false
	err := d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		if m.JobID != jobID {
			return false, false, nil
		}
		found = true
		out, err := d.moveBatch(ctx, d.cfg.DLQURL, []dead{m}, moveOptions{keepAttempts: keepAttempts, resetStatus: true})
		if err == nil && out.refused[0] != nil {
			err = fmt.Errorf("dlq: redrive job %s: %w", jobID, out.refused[0])
		}
		return out.deleted[0], true, err
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: job id %q", ErrNotFound, jobID)
	}
	return nil
}

// moveOptions tunes moveBatch.
type moveOptions struct {
	// keepAttempts keeps the envelope's attempts_before and the status record's run count.
	keepAttempts bool
	// resetStatus resets the job's status record (when Config.Status is set).
	resetStatus bool
	// bodyOnly sends the body without the message's attributes.
	bodyOnly bool
}

// moveOutcome is what moveBatch did with each message.
type moveOutcome struct {
	sent, deleted []bool
	// refused holds the job queue's error for each entry it refused (nil for the others).
	refused []error
}

// refusals returns the errors of the refused entries.
func (o *moveOutcome) refusals() []error {
	var errs []error
	for _, err := range o.refused {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (o *moveOutcome) sentCount() int {
	n := 0
	for _, s := range o.sent {
		if s {
			n++
		}
	}
	return n
}

// moveBatch moves messages received from fromURL (and held) to the job queue: it resets their
// jobs' status records, sends them (SendMessageBatch, within SQS's request size), and deletes from
// fromURL the ones whose send succeeded — nothing else. An error means the caller should stop: the
// context was cancelled before the send, a status reset or a send request failed, or a delete
// failed (those messages are in both queues: a duplicate the job's key absorbs). Entries the job
// queue refused are in the outcome's refusals, not an error.
func (d *DLQ) moveBatch(ctx context.Context, fromURL string, msgs []dead, opt moveOptions) (moveOutcome, error) {
	out := moveOutcome{sent: make([]bool, len(msgs)), deleted: make([]bool, len(msgs)), refused: make([]error, len(msgs))}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if opt.resetStatus && d.cfg.Status != nil {
		done := map[string]bool{}
		for _, m := range msgs {
			if m.env == nil || done[m.env.Kind+"#"+m.env.EffectiveKey()] {
				continue
			}
			done[m.env.Kind+"#"+m.env.EffectiveKey()] = true
			if err := d.reset(ctx, m.env, opt.keepAttempts); err != nil {
				return out, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	type request struct {
		idx     []int
		entries []sqstypes.SendMessageBatchRequestEntry
		size    int
	}
	var reqs []request
	var cur request
	for i, m := range msgs {
		e, n := d.entry(m, opt)
		if len(cur.entries) == maxBatch || (len(cur.entries) > 0 && cur.size+n > maxRequestBytes) {
			reqs = append(reqs, cur)
			cur = request{}
		}
		e.Id = aws.String(strconv.Itoa(len(cur.entries)))
		cur.idx = append(cur.idx, i)
		cur.entries = append(cur.entries, e)
		cur.size += n
	}
	if len(cur.entries) > 0 {
		reqs = append(reqs, cur)
	}
	var sendErr error
	for _, r := range reqs {
		res, err := d.cfg.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(d.cfg.SourceURL), Entries: r.entries})
		if err != nil {
			// Whether SQS took them is unknown: they stay in the DLQ (a duplicate at worst).
			sendErr = fmt.Errorf("dlq: send to %s: %w", d.cfg.SourceURL, err)
			break
		}
		for _, s := range res.Successful {
			if j, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && j >= 0 && j < len(r.idx) {
				out.sent[r.idx[j]] = true
			}
		}
		for _, f := range res.Failed {
			j, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || j < 0 || j >= len(r.idx) || out.sent[r.idx[j]] {
				continue
			}
			out.refused[r.idx[j]] = fmt.Errorf("message %s: %s: %s", msgs[r.idx[j]].MessageID, aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	delErr := d.deleteSent(ctx, fromURL, msgs, &out)
	return out, errors.Join(sendErr, delErr)
}

// entry builds the job queue's copy of a dead letter and its size in SQS's accounting.
func (d *DLQ) entry(m dead, opt moveOptions) (sqstypes.SendMessageBatchRequestEntry, int) {
	body := m.Body
	if m.env != nil && !opt.keepAttempts && m.env.AttemptsBefore != 0 {
		env := *m.env
		env.AttemptsBefore = 0
		body = string(env.AppendJSON(make([]byte, 0, len(body))))
	}
	e := sqstypes.SendMessageBatchRequestEntry{MessageBody: aws.String(body)}
	size := len(body)
	if !opt.bodyOnly {
		for name, v := range m.raw.MessageAttributes {
			if name == worker.FailureAttribute {
				continue
			}
			if e.MessageAttributes == nil {
				e.MessageAttributes = make(map[string]sqstypes.MessageAttributeValue, len(m.raw.MessageAttributes))
			}
			e.MessageAttributes[name] = sqstypes.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue, BinaryValue: v.BinaryValue}
			size += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
		}
	}
	if d.fifo {
		group := m.raw.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		if group == "" {
			group = m.Kind
		}
		if group == "" {
			group = "default"
		}
		e.MessageGroupId = aws.String(group)
		// A fresh id: the original's may still be in the job queue's deduplication window.
		e.MessageDeduplicationId = aws.String(jobs.NewID())
	}
	return e, size
}

// deleteSent deletes from fromURL the messages that were sent, and records which were deleted. It
// runs even when ctx is cancelled (within a bounded time): a sent message should leave the DLQ.
func (d *DLQ) deleteSent(ctx context.Context, fromURL string, msgs []dead, out *moveOutcome) error {
	var idx []int
	for i := range msgs {
		if out.sent[i] {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	for part := range chunks(idx, maxBatch) {
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(part))
		for j, i := range part {
			entries[j] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: msgs[i].raw.ReceiptHandle}
		}
		res, err := d.cfg.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(fromURL), Entries: entries})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range res.Successful {
			if j, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && j >= 0 && j < len(part) {
				out.deleted[part[j]] = true
			}
		}
		for _, f := range res.Failed {
			errs = append(errs, fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	if len(errs) > 0 {
		n := 0
		for _, i := range idx {
			if !out.deleted[i] {
				n++
			}
		}
		return fmt.Errorf("dlq: %d messages were sent to the job queue but not deleted from %s (a later redrive sends them again: duplicates their job keys absorb): %w",
			n, fromURL, errors.Join(errs...))
	}
	return nil
}
