package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/heartbeat"
)

// deleteAttempts is how many times a message's delete is tried when SQS fails it on its side.
const deleteAttempts = 3

// visibilityMargin is kept below SQS's 12-hour limit when extending visibility: the limit counts
// from SQS's receive, which this process only knows to within a request's duration.
const visibilityMargin = 5 * time.Second

// inflight is one received message of a batch.
type inflight struct {
	msg        sqstypes.Message
	receivedAt time.Time // when the ReceiveMessage call that returned it started
	settled    bool      // no more heartbeat extensions: at the 12-hour limit, or rejected
}

// batch is the set of messages handed to one handler invocation, and its heartbeat.
type batch struct {
	p *Poller

	mu       sync.Mutex
	msgs     []inflight
	bytes    int
	deadline time.Time // the handler's deadline, after which the heartbeat stops; zero: none

	// The heartbeat: a timer that extends the messages' visibility every visibility/3 (started
	// with the first messages), whether stopHeartbeat was called, and the cancel of the context
	// of an extension in flight (all under mu).
	hbTimer  *time.Timer
	hbOff    bool
	hbCancel context.CancelFunc
	// extending is held by extend for the whole of one heartbeat, AWS calls included, so that
	// Stop and stopHeartbeat can wait for an extension in flight.
	extending sync.Mutex
}

var _ heartbeat.Stopper = (*batch)(nil)

// Stop implements heartbeat.Stopper: the handler is about to set these messages' visibility
// itself (a retry delay), so the heartbeat leaves them alone from now on. It returns once an
// extension that may include them has finished, so that the handler's change comes last.
func (b *batch) Stop(receiptHandles []string) {
	b.mu.Lock()
	for i := range b.msgs {
		if m := &b.msgs[i]; !m.settled && slices.Contains(receiptHandles, aws.ToString(m.msg.ReceiptHandle)) {
			m.settled = true
		}
	}
	b.mu.Unlock()
	// Waiting for an extension in flight is the point of this empty critical section.
	b.extending.Lock()
	b.extending.Unlock()

}

func (p *Poller) newBatch() *batch {
	return &batch{p: p, msgs: make([]inflight, 0, min(p.cfg.BatchSize, maxReceive))}
}

// add appends received messages and starts the heartbeat with the first ones.
func (b *batch) add(msgs []sqstypes.Message, receivedAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		b.msgs = append(b.msgs, inflight{msg: m, receivedAt: receivedAt})
		b.bytes += len(aws.ToString(m.Body))
	}
	if b.hbTimer == nil && !b.p.cfg.DisableHeartbeat {
		b.hbTimer = time.AfterFunc(b.p.visibility/3, b.beat)
	}
}

// beat is one tick of the heartbeat (on the timer's goroutine): an extension, then the next tick,
// visibility/3 after this one started (at once when the extension took longer), as a ticker
// would.
func (b *batch) beat() {
	start := time.Now()
	b.mu.Lock()
	if b.hbOff {
		b.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.hbCancel = cancel
	b.mu.Unlock()
	more := b.extend(ctx)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hbCancel = nil
	if more && !b.hbOff {
		b.hbTimer.Reset(max(0, b.p.visibility/3-time.Since(start)))
	}
}

// stopHeartbeat stops the heartbeat and waits until no extension is in progress (one in flight
// is cancelled).
func (b *batch) stopHeartbeat() {
	b.mu.Lock()
	b.hbOff = true
	if b.hbTimer != nil {
		b.hbTimer.Stop()
	}
	if b.hbCancel != nil {
		b.hbCancel()
	}
	b.mu.Unlock()
	b.extending.Lock()
	b.extending.Unlock()
}

// extension returns the visibility timeout a heartbeat sets on a message received elapsed ago: the
// visibility timeout, capped so that the message stays within SQS's 12 hours from its receive. It
// reports false when no extension is possible any more.
func extension(visibility, elapsed time.Duration) (time.Duration, bool) {
	limit := (MaxVisibilityTimeout - elapsed - visibilityMargin).Truncate(time.Second)
	if limit < time.Second {
		return 0, false
	}
	return min(visibility, limit), true
}

// extend makes one heartbeat; it reports false when the heartbeat should stop.
func (b *batch) extend(ctx context.Context) bool {
	b.extending.Lock()
	defer b.extending.Unlock()
	now := b.p.now()
	b.mu.Lock()
	if b.hbOff {
		b.mu.Unlock()
		return false // stopped while this tick waited for the previous extension
	}
	if !b.deadline.IsZero() && !now.Before(b.deadline) {
		b.mu.Unlock()
		b.p.log.Warn("handler still running at its deadline: heartbeat stopped, its messages will be redelivered after their visibility timeout",
			slog.Int("messages", len(b.msgs)))
		return false
	}
	var entries []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	var targets []*inflight
	for i := range b.msgs {
		m := &b.msgs[i]
		if m.settled {
			continue
		}
		vis, ok := extension(b.p.visibility, now.Sub(m.receivedAt))
		if !ok {
			m.settled = true
			b.p.log.Warn("message reached SQS's 12-hour visibility limit: it will be redelivered",
				slog.String("message_id", aws.ToString(m.msg.MessageId)))
			continue
		}
		entries = append(entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{
			ReceiptHandle:     m.msg.ReceiptHandle,
			VisibilityTimeout: int32(vis / time.Second),
		})
		targets = append(targets, m)
	}
	b.mu.Unlock()
	if len(entries) == 0 {
		return true
	}

	for start := 0; start < len(entries); start += maxReceive {
		chunk := entries[start:min(start+maxReceive, len(entries))]
		for i := range chunk {
			chunk[i].Id = entryID(start + i)
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := b.p.cfg.SQS.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: b.p.queueURL,
			Entries:  chunk,
		}, keepConnection)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				b.p.log.Warn("heartbeat: extending visibility failed", slog.Any("error", err), slog.Int("messages", len(chunk)))
			}
			continue
		}
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < 0 || i >= len(targets) {
				continue
			}
			m := targets[i]
			b.p.log.Warn("heartbeat: extending a message's visibility failed",
				slog.String("message_id", aws.ToString(m.msg.MessageId)),
				slog.String("code", aws.ToString(f.Code)), slog.String("error", aws.ToString(f.Message)))
			if f.SenderFault {
				// The receipt handle is no longer valid (the message was received again, or
				// deleted): further extensions would fail the same way.
				b.mu.Lock()
				m.settled = true
				b.mu.Unlock()
			}
		}
	}
	return true
}

// process invokes the handler with the batch, then deletes the messages it did not report failed.
func (p *Poller) process(runCtx context.Context, b *batch) {
	base := context.WithoutCancel(runCtx)
	hctx, cancel := base, context.CancelFunc(func() {})
	if p.cfg.InvocationTimeout > 0 {
		hctx, cancel = context.WithTimeout(base, p.cfg.InvocationTimeout)
	}
	defer cancel()

	b.mu.Lock()
	if d, ok := hctx.Deadline(); ok {
		b.deadline = d
	}
	msgs := make([]sqstypes.Message, len(b.msgs))
	for i := range b.msgs {
		msgs[i] = b.msgs[i].msg
	}
	b.mu.Unlock()

	start := p.now()
	failed, err := p.invoke(heartbeat.NewContext(hctx, b), msgs)
	b.stopHeartbeat()
	if err != nil {
		what := "handler failed: the whole batch will be retried after its visibility timeout"
		var invalid *invalidFailuresError
		if errors.As(err, &invalid) {
			what = "invalid batch item failures: the whole batch will be retried after its visibility timeout"
		}
		p.log.Error(what, slog.Any("error", err), slog.Int("messages", len(msgs)), slog.Duration("duration", p.now().Sub(start)))
		return
	}
	done := make([]*inflight, 0, len(b.msgs))
	for i := range b.msgs {
		if m := &b.msgs[i]; !failed.has(aws.ToString(m.msg.MessageId)) {
			done = append(done, m)
		}
	}
	deleted := p.deleteMessages(base, done)
	if p.log.Enabled(base, slog.LevelDebug) {
		p.log.Debug("batch handled", slog.Int("messages", len(msgs)), slog.Duration("duration", p.now().Sub(start)),
			slog.Int("failed", len(b.msgs)-len(done)), slog.Int("deleted", deleted))
	}
}

// failedSet is the message ids a handler reported failed (usually none).
type failedSet map[string]struct{}

func (f failedSet) has(id string) bool {
	if len(f) == 0 {
		return false
	}
	_, ok := f[id]
	return ok
}

// invoke calls the handler, turning a panic into an error (with the stack logged), and returns
// the messages it reported failed. A MessageHandler gets the messages as they are; any other
// Handler the Lambda event built from them, and what it reports is checked as Lambda checks it.
func (p *Poller) invoke(ctx context.Context, msgs []sqstypes.Message) (failed failedSet, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("handler panicked", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("poller: handler panicked: %v", r)
		}
	}()
	if mh, ok := p.cfg.Handler.(MessageHandler); ok {
		ids, err := mh.HandleMessages(ctx, p.queueARN, p.region, msgs)
		if err != nil || len(ids) == 0 {
			return nil, err
		}
		return checkFailures(msgs, ids)
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i := range msgs {
		ev.Records[i] = toRecord(msgs[i], p.queueARN, p.region)
	}
	resp, err := p.cfg.Handler.HandleSQS(ctx, ev)
	if err != nil {
		return nil, err
	}
	if len(resp.BatchItemFailures) == 0 {
		return nil, nil
	}
	ids := make([]string, len(resp.BatchItemFailures))
	for i, f := range resp.BatchItemFailures {
		ids[i] = f.ItemIdentifier
	}
	return checkFailures(msgs, ids)
}

// checkFailures returns the message ids reported failed, or an *invalidFailuresError when one is
// empty or names no message of the batch (which, as in Lambda, fails the whole batch).
func checkFailures(msgs []sqstypes.Message, ids []string) (failedSet, error) {
	batch := make(map[string]struct{}, len(msgs))
	for _, m := range msgs {
		batch[aws.ToString(m.MessageId)] = struct{}{}
	}
	failed := make(failedSet, len(ids))
	for _, id := range ids {
		if id == "" {
			return nil, &invalidFailuresError{"poller: a batch item failure has an empty itemIdentifier"}
		}
		if _, ok := batch[id]; !ok {
			return nil, &invalidFailuresError{fmt.Sprintf("poller: batch item failure %q is not a message of the batch", id)}
		}
		failed[id] = struct{}{}
	}
	return failed, nil
}

// invalidFailuresError is a handler's answer that names a failure the batch does not have.
type invalidFailuresError struct{ msg string }

func (e *invalidFailuresError) Error() string { return e.msg }

// entryIDs are the Ids of the entries of a batch request (at most 10), shared by every request.
var entryIDs = func() (ids [maxReceive]*string) {
	for i := range ids {
		ids[i] = aws.String(strconv.Itoa(i))
	}
	return ids
}()

// entryID returns the Id of entry i of a batch request.
func entryID(i int) *string {
	if i < len(entryIDs) {
		return entryIDs[i]
	}
	return aws.String(strconv.Itoa(i))
}

// deleteMessages deletes msgs in batches of 10, retrying the entries SQS failed on its side, and
// logs those that cannot be deleted. It returns how many were deleted.
func (p *Poller) deleteMessages(ctx context.Context, msgs []*inflight) int {
	deleted := 0
	for attempt := 1; len(msgs) > 0; attempt++ {
		final := attempt == deleteAttempts
		var retry []*inflight
		for start := 0; start < len(msgs); start += maxReceive {
			chunk := msgs[start:min(start+maxReceive, len(msgs))]
			entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(chunk))
			for i, m := range chunk {
				entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: entryID(i), ReceiptHandle: m.msg.ReceiptHandle}
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			out, err := p.cfg.SQS.DeleteMessageBatch(cctx, &sqs.DeleteMessageBatchInput{
				QueueUrl: p.queueURL,
				Entries:  entries,
			}, keepConnection)
			cancel()
			if err != nil {
				if final {
					for _, m := range chunk {
						p.log.Error("cannot delete a handled message: it may be delivered again",
							slog.String("message_id", aws.ToString(m.msg.MessageId)), slog.Any("error", err))
					}
				} else {
					retry = append(retry, chunk...)
				}
				continue
			}
			deleted += len(out.Successful)
			for _, f := range out.Failed {
				i, err := strconv.Atoi(aws.ToString(f.Id))
				if err != nil || i < 0 || i >= len(chunk) {
					continue
				}
				if f.SenderFault || final {
					p.log.Error("cannot delete a handled message: it may be delivered again",
						slog.String("message_id", aws.ToString(chunk[i].msg.MessageId)),
						slog.String("code", aws.ToString(f.Code)), slog.String("error", aws.ToString(f.Message)))
					continue
				}
				retry = append(retry, chunk[i])
			}
		}
		if len(retry) > 0 && !sleep(ctx, p.cfg.Backoff(attempt)) {
			return deleted
		}
		msgs = retry
	}
	return deleted
}
