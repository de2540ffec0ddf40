package dlq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
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
	// Progress, when set, is called when the fallback mover starts (with 0 moved) and after each
	// batch it moved, with the count moved so far and the DLQ's approximate message count when
	// the redrive began (at least the count moved). Cancelling the redrive's context from it
	// stops the mover before its next batch, with nothing left in flight. A move task is not
	// reported here: WaitMoveTask's Progress follows it.
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
	// task, which goes on in SQS after RedriveAll returns: WaitMoveTask follows it.
	Moved int
	// Total is the DLQ's approximate message count when the redrive started (SQS's
	// ApproximateNumberOfMessages plus ApproximateNumberOfMessagesNotVisible): the messages it
	// set out to move. 0 when the count could not be read.
	Total int
	// LeftBehind counts the dead letters the fallback mover received but left in the DLQ, visible
	// again, for the next redrive: those that arrived after the redrive started (among them the
	// copies a running worker dead-lettered again after this redrive moved them) and further
	// copies of a job this redrive had already moved. Dead letters the job queue refused are not
	// counted here: RedriveAll's error reports them.
	LeftBehind int
	// Method is MethodMoveTask or MethodFallback.
	Method string
	// TaskHandle is the move task's handle (MethodMoveTask), for WaitMoveTask and
	// CancelMessageMoveTask.
	TaskHandle string
	// Attached reports that a move task was already running on the DLQ (an earlier redrive's:
	// SQS runs one per queue at a time, and refuses a second StartMessageMoveTask with
	// InvalidParameterValue), so RedriveAll started none and reset no status record: TaskHandle is
	// the running task's, and Total its count to move.
	Attached bool
}

// RedriveAll moves every dead letter back to the job queue, with a fresh attempt budget unless
// opts.KeepAttempts, by a move task or by the fallback mover (see the package documentation).
//
// With a move task, when Config.Status is set, RedriveAll first scans the DLQ (as Peek does) and
// resets the status record of each job found, then starts the task at Config.RatePerSecond
// (at most 500) and returns its handle, without waiting for it: [DLQ.WaitMoveTask] follows it
// with its progress. Dead letters that arrive after the scan keep their run counts. When a move
// task is already running on the DLQ (only one may), RedriveAll starts none and returns that
// one's handle with Attached set, so running a redrive again is safe.
//
// Either way a redrive moves the dead letters that were in the DLQ when it started, as SQS's
// move task does: the fallback mover leaves in the DLQ the messages sent to it after the start
// and every message that repeats a job it already moved (see the package documentation), so it
// ends even while a worker dead-letters the moved jobs again, and runs each job once more.
//
// The fallback mover moves batches of up to 10 messages at Config.RatePerSecond until a receive
// brings nothing, or several receives in a row bring only messages it leaves behind; those are
// made visible again when it returns. It stops between steps when ctx is cancelled (returning
// ctx's error and what it moved) and is resumed by calling RedriveAll again: every message is in
// exactly one of the two queues. A stop between a batch's status resets and its send leaves
// those jobs listed as retrying while their messages are still in the DLQ, until the next
// redrive. Messages the job queue refused stay in the DLQ; RedriveAll then moves the others and
// returns an error that counts them.
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
	// Probe first: a backend without move tasks then costs no status scan before the fallback
	// (unless the task is required: then StartMessageMoveTask answers), and a task already
	// running on the DLQ is followed rather than refused.
	running, ok, err := d.runningTask(ctx, dlqARN)
	switch {
	case err != nil && unsupported(err) && !opts.UseMoveTask:
		return res, err
	case ok:
		return attach(res, running), nil
	}
	srcARN, err := d.queueARN(ctx, d.cfg.SourceARN, d.cfg.SourceURL)
	if err != nil {
		return res, err
	}
	var start time.Time
	res.Total, start = d.begin(ctx)
	if d.cfg.Status != nil {
		if err := d.resetAll(ctx, start, opts.KeepAttempts); err != nil {
			return res, err
		}
	}
	out, err := d.cfg.SQS.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{
		SourceArn:                    aws.String(dlqARN),
		DestinationArn:               aws.String(srcARN),
		MaxNumberOfMessagesPerSecond: aws.Int32(int32(min(d.cfg.RatePerSecond, maxMoveTaskRate))),
	})
	if err != nil {
		if alreadyRunning(err) {
			// Another redrive started one since the probe: only one may run per queue.
			if running, ok, lerr := d.runningTask(ctx, dlqARN); lerr == nil && ok {
				return attach(res, running), nil
			}
		}
		return res, fmt.Errorf("dlq: start message move task: %w", err)
	}
	res.TaskHandle = aws.ToString(out.TaskHandle)
	return res, nil
}

// attach is the result of a redrive that found a move task running on the DLQ.
func attach(res RedriveResult, t MoveTask) RedriveResult {
	res.Attached, res.TaskHandle = true, t.Handle
	if t.ToMove > 0 {
		res.Total = t.ToMove
	}
	return res
}

// resetAll resets the status record of every job in the DLQ, scanning it. It skips the dead
// letters sent after start, and stops once the scan brings only those for a few receives.
func (d *DLQ) resetAll(ctx context.Context, start time.Time, keepRuns bool) error {
	done := map[string]bool{}
	late := 0 // dead letters in a row that arrived after the start
	return d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		if sentAfter(m, start) {
			late++
			return false, late >= idleReceives*maxBatch, nil
		}
		late = 0
		d.resolve(ctx, &m) // a job kept in S3: its key is in the object
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

// begin reads the DLQ's approximate message count at the start of a redrive, visible or in
// flight (a peek or a scan may hold some; 0 when unknown), and returns it with the start in SQS's
// clock, which stamps the dead letters' SentTimestamp: the Date of the response, which has whole
// seconds, rounded up to the next second (so the cutoff errs toward moving a dead letter that
// arrived just after the start, which the other rules of redriveScope keep from moving twice).
// Without a Date (some emulators, fakes), this host's clock (Config.Now) is the start.
func (d *DLQ) begin(ctx context.Context) (total int, start time.Time) {
	start = d.cfg.Now()
	out, err := d.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(d.cfg.DLQURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		return 0, start
	}
	if server, ok := awsmiddleware.GetServerTime(out.ResultMetadata); ok && !server.IsZero() {
		start = server.Truncate(time.Second).Add(time.Second)
	}
	visible, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return max(visible, 0) + max(hidden, 0), start
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

// idleReceives is how many receives in a row may bring only dead letters the fallback mover
// leaves behind before it ends, once it has dealt with the DLQ's count at the start; while it
// has not, it tries up to idleReceivesShort times as many (SQS's receives sample the queue).
const (
	idleReceives      = 3
	idleReceivesShort = 10
)

// sentAfter reports whether the dead letter was sent to the DLQ after t (SQS's SentTimestamp,
// in milliseconds). A message without the timestamp counts as sent before.
func sentAfter(m dead, t time.Time) bool {
	return !m.SentAt.IsZero() && m.SentAt.After(t.Truncate(time.Millisecond))
}

// redriveScope decides which dead letters a redrive of the whole queue moves: those that were in
// the DLQ when it started, each job once.
type redriveScope struct {
	start time.Time
	// sent holds the message ids of the copies this redrive sent to the job queue. A worker that
	// dead-letters such a copy again names it as the failure's source_message_id; SQS's own
	// redrive policy moves it to the DLQ under the same id.
	sent map[string]bool
	// jobs holds kind + "#" + job id of every job this redrive moved.
	jobs map[string]bool
}

// admits reports whether the redrive moves m: it was sent to the DLQ no later than the start, is
// not a copy of a message this redrive sent, and repeats no job this redrive moved. Each rule
// alone would stop the endless loop of a redrive racing a worker that dead-letters the moved
// jobs again; together they hold when the clocks of this host and SQS differ (SentTimestamp is
// SQS's time) and when a job is re-sent under a new message id.
func (s *redriveScope) admits(m dead) bool {
	if sentAfter(m, s.start) || s.sent[m.MessageID] {
		return false
	}
	if m.Failure != nil && s.sent[m.Failure.SourceMessageID] {
		return false
	}
	return m.JobID == "" || !s.jobs[m.Kind+"#"+m.JobID]
}

// moved records a dead letter moved as the message newID.
func (s *redriveScope) moved(m dead, newID string) {
	if newID != "" {
		s.sent[newID] = true
	}
	if m.JobID != "" {
		s.jobs[m.Kind+"#"+m.JobID] = true
	}
}

// fallback redrives with receive, send, delete.
func (d *DLQ) fallback(ctx context.Context, opts RedriveOptions) (res RedriveResult, err error) {
	res.Method = MethodFallback
	scope := &redriveScope{sent: map[string]bool{}, jobs: map[string]bool{}}
	res.Total, scope.start = d.begin(ctx)
	if opts.Progress != nil {
		opts.Progress(0, res.Total)
	}
	// back holds the messages that stay in the DLQ (left behind, refused by the job queue, or not
	// sent when the run stops), to make them visible again when RedriveAll returns.
	back := &held{d: d, queueURL: d.cfg.DLQURL}
	defer func() {
		if rerr := back.release(ctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	judged := map[string]bool{} // message ids received and decided on
	refused := 0
	var refusals []error
	rate := d.cfg.RatePerSecond
	paced := d.cfg.Now()
	idle := 0
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		msgs, err := d.receive(ctx, d.cfg.DLQURL, min(maxBatch, rate), holdVisibility)
		if err != nil {
			return res, err
		}
		if len(msgs) == 0 {
			break
		}
		var todo []dead
		for _, m := range msgs {
			id := aws.ToString(m.MessageId)
			if judged[id] { // held, and back after its visibility ran out: hold it again
				back.add(m)
				continue
			}
			judged[id] = true
			dm := decode(m)
			if !scope.admits(dm) {
				back.add(m)
				res.LeftBehind++
				continue
			}
			todo = append(todo, dm)
		}
		if len(todo) == 0 {
			limit := idleReceives
			if res.Moved+refused < res.Total {
				limit = idleReceivesShort
			}
			if idle++; idle >= limit {
				break
			}
			continue
		}
		idle = 0
		// Pace: the messages moved so far took at least moved/rate. A batch holds at most
		// rate messages, so the wait (≤ 1 s) fits well within the messages' visibility.
		if res.Moved > 0 {
			due := paced.Add(time.Duration(res.Moved) * time.Second / time.Duration(rate))
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
			if out.sent[i] {
				scope.moved(m, out.newIDs[i])
				continue
			}
			back.add(m.raw)
			if err == nil {
				refused++
			}
		}
		refusals = append(refusals, out.refusals()...)
		if err != nil {
			return res, err
		}
		if opts.Progress != nil {
			opts.Progress(res.Moved, max(res.Total, res.Moved))
		}
	}
	if refused > 0 {
		return res, fmt.Errorf("dlq: %d dead letters could not be sent to the job queue and stay in the DLQ: %w",
			refused, errors.Join(firstN(refusals, 5)...))
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
// again at once. A job kept in S3 is found by the id in its object (Config.Payload) when the
// failure attribute does not name it. It returns a *NotFoundError (wrapping ErrNotFound) when no
// dead letter carries that job id. When several copies of the job are dead-lettered, it moves the
// first one found.
func (d *DLQ) RedriveJob(ctx context.Context, jobID string, keepAttempts bool) error {
	if jobID == "" {
		return fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	found := false
	var un unresolved
	err := d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		d.identify(ctx, &m)
		if m.JobID != jobID {
			un.add(m)
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
		return &NotFoundError{JobID: jobID, Unresolved: un.n, Cause: un.cause}
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
	// newIDs holds the job queue's message id of each sent entry ("" for the others).
	newIDs []string
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
	out := moveOutcome{sent: make([]bool, len(msgs)), deleted: make([]bool, len(msgs)), refused: make([]error, len(msgs)),
		newIDs: make([]string, len(msgs))}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if opt.resetStatus && d.cfg.Status != nil {
		done := map[string]bool{}
		for i := range msgs {
			d.resolve(ctx, &msgs[i]) // a job kept in S3: its key is in the object
		}
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
	d.rewritePayloads(ctx, msgs, opt, &out)
	type request struct {
		idx     []int
		entries []sqstypes.SendMessageBatchRequestEntry
		size    int
	}
	var reqs []request
	var cur request
	for i, m := range msgs {
		if out.refused[i] != nil {
			continue // its envelope could not be rewritten to S3: it stays in the DLQ
		}
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
				out.newIDs[r.idx[j]] = aws.ToString(s.MessageId)
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

// rewritePayloads writes the envelope of each pointer dead letter (a job kept in S3) anew for the
// redrive: attempts_before reset unless opt.keepAttempts, as an inline job's, under the key
// <job key>.redrive-<hash of the envelope>, so that a retried redrive rewrites the same object
// and the bucket's lifecycle rule counts from the redrive. The dead letter's own object is left
// as it is (another copy of the job may point to it); the lifecycle rule expires it. A dead
// letter whose object cannot be read, or is not an envelope, or without Config.Payload, goes
// back as its pointer. A failed write leaves the dead letter in the DLQ (its refusal).
func (d *DLQ) rewritePayloads(ctx context.Context, msgs []dead, opt moveOptions, out *moveOutcome) {
	if d.cfg.Payload == nil {
		return
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Payload == nil {
			continue
		}
		d.resolve(ctx, m)
		if m.env == nil {
			continue
		}
		env := *m.env
		if !opt.keepAttempts {
			env.AttemptsBefore = 0
		}
		body := env.AppendJSON(nil)
		sum := sha256.Sum256(body)
		key := d.cfg.Payload.Key(env.ID) + ".redrive-" + hex.EncodeToString(sum[:8])
		p, err := d.cfg.Payload.Put(ctx, key, body)
		if err != nil {
			out.refused[i] = fmt.Errorf("message %s: write the redriven envelope of job %s to S3: %w", m.MessageID, env.ID, err)
			continue
		}
		m.redrive, m.redriveSize = &p, len(body)
	}
}

// entry builds the job queue's copy of a dead letter and its size in SQS's accounting.
func (d *DLQ) entry(m dead, opt moveOptions) (sqstypes.SendMessageBatchRequestEntry, int) {
	body := m.Body
	switch {
	case m.redrive != nil:
		body = m.redrive.Body() // the envelope rewritten to S3 (rewritePayloads)
	case m.env != nil && m.Payload == nil && !opt.keepAttempts && m.env.AttemptsBefore != 0:
		env := *m.env
		env.AttemptsBefore = 0
		body = string(env.AppendJSON(make([]byte, 0, len(body))))
	}
	e := sqstypes.SendMessageBatchRequestEntry{MessageBody: aws.String(body)}
	size := len(body)
	if m.redrive != nil {
		name, v := d.cfg.Payload.SizeAttribute(), payload.SizeValue(m.redriveSize)
		e.MessageAttributes = map[string]sqstypes.MessageAttributeValue{name: {DataType: aws.String("Number"), StringValue: aws.String(v)}}
		size += len(name) + len("Number") + len(v)
	}
	if !opt.bodyOnly {
		for name, v := range m.raw.MessageAttributes {
			if name == worker.FailureAttribute || m.redrive != nil && payload.IsSizeAttribute(name) {
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
