package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// payloadState is what the batch knows of a message whose body points to an S3 object.
type payloadState struct {
	ptr   payload.Pointer
	body  string        // the object's content, once fetched
	bytes int           // its size
	fetch time.Duration // how long GetObject took
	err   error         // why it could not be read
	// done: the object carries the done mark: a duplicate of a delivery already settled.
	done bool
	// resent is the object of the re-sent copy (actResend), set while building its entry.
	resent *payload.Pointer
	// cleanErr is why deleting or marking the object after the job was settled failed.
	cleanErr error
	deleted  bool
	marked   bool
}

// errPayloadDone is the "error" of a message acknowledged because its object is marked done.
var errPayloadDone = errors.New("duplicate delivery: the job's S3 object is marked done (" +
	payload.DoneTagKey + "=" + payload.DoneTagValue + "): a delivery of this message was already settled")

// body returns the text the envelope is decoded from: the payload from S3 for a pointer, else
// the message's body.
func (it *item) body() string {
	if it.pl != nil {
		return it.pl.body
	}
	return it.rec.Body
}

// pointer reports whether the message's body is an S3 pointer the worker can resolve
// (Config.Payload set), and if so marks the item for fetchPayloads.
func (b *batch) pointer(it *item) bool {
	if b.h.cfg.Payload == nil {
		return false
	}
	p, err := payload.ParsePointer(it.rec.Body)
	if err != nil {
		return false
	}
	it.pl = &payloadState{ptr: p}
	return true
}

// explainPointer adds to a malformed body's error that it is an S3 pointer the worker was not
// configured to read.
func (b *batch) explainPointer(body string, err error) error {
	if b.h.cfg.Payload != nil || !payload.MaybePointer(body) {
		return err
	}
	if p, perr := payload.ParsePointer(body); perr == nil {
		return fmt.Errorf("%w (the body is a pointer to %s in the Amazon SQS Extended Client's format, and the worker has no Config.Payload to read it)", err, p)
	}
	return err
}

// resolve fetches the payload of a pointer message (in the pool, with the job's context, which
// ends at the work deadline) while the item is still pending, then — unless the deadline took the
// item meanwhile — fills in the job from it (preparing) and moves the item to running. An object
// that cannot be read gives the item its result. It reports whether the item is running.
func (b *batch) resolve(ctx context.Context, it *item) bool {
	start := b.h.cfg.Now()
	obj, err := b.h.cfg.Payload.Read(ctx, it.pl.ptr)
	took := b.h.cfg.Now().Sub(start)
	if !it.state.CompareAndSwap(statePending, statePreparing) {
		return false // skipped at the deadline: the batch owns the item now
	}
	pl := it.pl
	pl.fetch, pl.bytes, pl.err = took, len(obj.Body), err
	switch {
	case err == nil:
		pl.body = string(obj.Body)
		b.prepareEnvelope(ctx, it, pl.body)
		if obj.Done {
			// Already settled for good (the job succeeded, or a re-sent copy carries it on): a
			// duplicate delivery, acknowledged without running, as the idempotency store would.
			pl.done = true
			it.setPrepared(result{outcome: OutcomeSkipped, act: actAck, err: errPayloadDone})
		}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		// The work deadline came first: no fault of the object; it comes back at once.
		it.setPrepared(result{outcome: OutcomeNotRun, act: actRetry, err: err})
	case errors.Is(err, payload.ErrBucketNotAllowed):
		it.setPrepared(deadLetter(jobs.ReasonPayloadRefused, err))
	case payload.IsPermanent(err):
		if errors.Is(err, payload.ErrNotFound) && b.h.cfg.PayloadCleanup == PayloadDelete {
			err = fmt.Errorf("%w (the worker deletes objects after success, worker.Config.PayloadCleanup: a duplicate delivery of a job that already succeeded "+
				"finds its object gone; PayloadMarkDone with a lifecycle rule on the done tag avoids that)", err)
			pl.err = err
		}
		it.setPrepared(deadLetter(jobs.ReasonPayloadMissing, err))
	case it.info.ReceiveCount >= jobs.DefaultMaxAttempts:
		it.setPrepared(deadLetter(jobs.ReasonPayloadMissing,
			fmt.Errorf("%w (still unreadable after %d receives)", err, it.info.ReceiveCount)))
	default:
		now := b.h.cfg.Now()
		vis := min(jobs.Exponential{}.Backoff(it.info.ReceiveCount), b.capFor(it.rec, now))
		it.setPrepared(result{outcome: OutcomeRetry, act: actRetry, err: err, visibility: vis})
	}
	it.attempt0 = it.info.Attempt
	it.state.Store(stateRunning)
	return true
}

// cleanupPayloads deletes or marks done (Config.PayloadCleanup) the objects of the pointer
// messages that are settled for good: the jobs acknowledged (succeeded, skipped as duplicates,
// handled by the malformed hook) and the originals of copies re-sent with an object of their own.
// Dead letters and retries keep theirs, and an object already marked done is left as it is. A
// failed cleanup is logged; the object stays until the bucket's lifecycle rule expires it.
func (b *batch) cleanupPayloads(ctx context.Context) {
	mode := b.h.cfg.PayloadCleanup
	if mode == PayloadKeep {
		return
	}
	var todo []*item
	for i := range b.items {
		it := &b.items[i]
		if it.pl == nil || it.pl.err != nil || it.pl.done {
			continue
		}
		r := it.final()
		switch {
		case r.sendErr != nil:
		case r.act == actAck:
			todo = append(todo, it)
		case r.act == actResend && it.pl.resent != nil && *it.pl.resent != it.pl.ptr:
			todo = append(todo, it)
		}
	}
	parallel(len(todo), func(j int) {
		pl := todo[j].pl
		var err error
		if mode == PayloadMarkDone {
			err = b.h.cfg.Payload.MarkDone(ctx, pl.ptr)
		} else {
			err = b.h.cfg.Payload.Delete(ctx, pl.ptr)
		}
		if err != nil {
			pl.cleanErr = err
			b.h.cfg.Logger.WarnContext(ctx, "sqsworker: could not clean up a settled job's payload in S3 (the bucket's lifecycle rule expires it)",
				"message_id", todo[j].rec.MessageID, "job_id", todo[j].info.ID, "object", pl.ptr.String(), "cleanup", mode.String(), "error", err)
			return
		}
		pl.deleted, pl.marked = mode == PayloadDelete, mode == PayloadMarkDone
	})
}

// offloadResend keeps a re-sent copy of a job that came through S3 in S3 as well: it writes the
// copy's envelope under a key of its own (derived from the job id and the copy's content, so
// that a retried send rewrites the same object) and returns the pointer body, with the size
// attribute set in attrs.
func (b *batch) offloadResend(ctx context.Context, it *item, env []byte, attrs map[string]sqstypes.MessageAttributeValue) (string, error) {
	sum := sha256.Sum256(env)
	key := b.h.cfg.Payload.Key(it.info.ID) + ".resend-" + hex.EncodeToString(sum[:8])
	p, err := b.h.cfg.Payload.Put(ctx, key, env)
	if err != nil {
		return "", fmt.Errorf("keep the re-sent copy in S3: %w", err)
	}
	it.pl.resent = &p
	delete(attrs, payload.SizeAttribute)
	delete(attrs, payload.LegacySizeAttribute)
	attrs[b.h.cfg.Payload.SizeAttribute()] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(payload.SizeValue(len(env)))}
	return p.Body(), nil
}
