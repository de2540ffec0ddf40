package poller

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
)

// answerGrace bounds how long a receive whose response has started is still read after Run's
// context is cancelled.
const answerGrace = 5 * time.Second

// keepConnection is passed with every SQS call the poller makes (see internal/sdkhttp).
func keepConnection(o *sqs.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}

// ownChecksum is passed with ReceiveMessage: the SDK's check of each message body against its MD5
// fails the whole call when one body does not match, and drops the answer, so that every message
// in it stays invisible until its visibility timeout. The poller checks the bodies itself
// (checkBodies): the messages that match are handed over, the others are made visible again.
func ownChecksum(o *sqs.Options) { o.DisableMessageChecksumValidation = true }

// noRetry is passed with ReceiveMessage: the SDK must not retry a receive on its own. A receive
// that failed after SQS had taken messages off the queue (a response cut off while it was read)
// cannot be repeated without losing them from view: a silent retry returns other messages, or
// none, and nothing says that some are now invisible until their visibility timeout. The poller
// retries instead, after logging the failure and what it means.
func noRetry(o *sqs.Options) { o.RetryMaxAttempts = 1 }

// answeredButUnread reports whether err is a response SQS sent (status 200) that could not be
// read: the messages in it, if any, were taken off the queue and return after their visibility
// timeout.
func answeredButUnread(err error) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusOK
}

// receive calls ReceiveMessage. Cancelling ctx abandons the call while SQS has not started to
// answer (a long poll waiting on an empty queue, which holds no message). Once the first byte of
// the answer has arrived, SQS has taken the messages in it off the queue, so the answer is read to
// its end (for at most answerGrace after ctx is cancelled) and its messages are handed over,
// instead of being dropped where they would stay invisible for a whole visibility timeout.
func (p *Poller) receive(ctx context.Context, in *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var (
		mu        sync.Mutex
		answering bool        // the first byte of the response has arrived
		abandoned bool        // ctx was cancelled before it did: the call is cancelled
		grace     *time.Timer // ctx was cancelled after it did: cancels the call after answerGrace
		returned  bool        // the call has returned: nothing more to cancel
	)
	callCtx = httptrace.WithClientTrace(callCtx, &httptrace.ClientTrace{
		GotFirstResponseByte: func() {
			mu.Lock()
			defer mu.Unlock()
			if !abandoned {
				answering = true
			}
		},
	})
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return
		}
		if answering {
			grace = time.AfterFunc(answerGrace, func() {
				p.log.Warn("shutting down: an answer to a receive did not complete in time and is abandoned: its messages, if any, return after their visibility timeout",
					slog.Duration("waited", answerGrace))
				cancel()
			})
			return
		}
		abandoned = true
		cancel()
	})
	defer func() {
		stop()
		mu.Lock()
		returned = true
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
	}()
	return p.cfg.SQS.ReceiveMessage(callCtx, in, keepConnection, noRetry, ownChecksum)
}

// checkBodies returns the messages whose body matches its MD5OfBody (or that have none to check),
// and makes the others visible again at once: their body was damaged on the way, and another
// receive may bring it whole (after maxReceiveCount receives, the queue's redrive policy moves
// such a message to the DLQ).
func (p *Poller) checkBodies(msgs []sqstypes.Message) []sqstypes.Message {
	var bad []sqstypes.Message
	var good []sqstypes.Message // nil while every message so far is good
	for i, m := range msgs {
		if m.Body != nil && m.MD5OfBody != nil && !bodyMatches(*m.Body, *m.MD5OfBody) {
			if good == nil {
				good = append(make([]sqstypes.Message, 0, len(msgs)), msgs[:i]...)
			}
			bad = append(bad, m)
			continue
		}
		if good != nil {
			good = append(good, m)
		}
	}
	if len(bad) == 0 {
		return msgs
	}
	for _, m := range bad {
		p.log.Error("a received message's body does not match its MD5: making it visible again",
			slog.String("message_id", aws.ToString(m.MessageId)), slog.String("md5_of_body", aws.ToString(m.MD5OfBody)))
	}
	p.release(bad)
	return good
}

// bodyMatches reports whether body's MD5 is the hex digest want (in either case), without
// allocating.
func bodyMatches(body, want string) bool {
	sum := md5.Sum(unsafe.Slice(unsafe.StringData(body), len(body))) //nolint:gosec // SQS defines the body digest as MD5.
	var got [2 * md5.Size]byte
	hex.Encode(got[:], sum[:])
	return strings.EqualFold(string(got[:]), want)
}

// release makes msgs visible again at once (visibility timeout 0), in batches of 10, and logs
// those it cannot release: they return after their visibility timeout.
func (p *Poller) release(msgs []sqstypes.Message) {
	for start := 0; start < len(msgs); start += maxReceive {
		chunk := msgs[start:min(start+maxReceive, len(msgs))]
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id: entryID(i), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		out, err := p.cfg.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: p.queueURL, Entries: entries,
		}, keepConnection)
		cancel()
		if err != nil {
			p.log.Error("cannot make messages visible again: they return after their visibility timeout",
				slog.Int("messages", len(chunk)), slog.Any("error", err))
			continue
		}
		for _, f := range out.Failed {
			p.log.Error("cannot make a message visible again: it returns after its visibility timeout",
				slog.String("id", aws.ToString(f.Id)), slog.String("code", aws.ToString(f.Code)), slog.String("error", aws.ToString(f.Message)))
		}
	}
}
