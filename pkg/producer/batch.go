package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// EnqueueBatch validates the jobs and sends the valid ones with SendMessageBatch, in order, in
// requests of at most MaxBatchEntries entries and MaxBatchRequestSize bytes. It returns a Result
// per request, in order, each with its own Err: an invalid job is not sent; a job SQS rejects is
// reported with an *EntryError, after up to Config.MaxRetries retries (with exponential backoff
// and jitter) when its code is retryable; a failed SendMessageBatch call (after the SDK's own
// retries) fails every job of that request.
//
// The returned error is not nil only when requests were made and none succeeded (the queue does
// not exist, credentials are missing, ctx is done, …); it is then also in the Results of the
// jobs that were to be sent. Use JoinErrors for an error covering every failed job.
//
// On a FIFO queue, jobs of one group are sent in the order given, so they are delivered in that
// order, except that a job retried after a retryable rejection lands after the jobs of its group
// that SQS accepted in the same request.
func (p *Producer) EnqueueBatch(ctx context.Context, reqs []Request) ([]Result, error) {
	if p.lanes != nil {
		return p.enqueueBatchRouted(ctx, reqs)
	}
	if p.observer == nil || len(reqs) == 0 {
		return p.enqueueBatch(ctx, reqs, nil)
	}
	call := Call{Operation: OpEnqueueBatch, QueueURL: p.queueURL, Jobs: len(reqs)}
	ctx = p.observer.Start(ctx, call)
	results, err := p.enqueueBatch(ctx, reqs, nil)
	p.observer.End(ctx, call, results)
	return results, err
}

// enqueueBatch is EnqueueBatch; at, when not nil, gives each request's position in the caller's
// slice, for errors (a producer of several queues sends each queue's share).
func (p *Producer) enqueueBatch(ctx context.Context, reqs []Request, at []int) ([]Result, error) {
	results := make([]Result, len(reqs))
	if len(reqs) == 0 {
		return results, nil
	}
	b := batcher{p: p, results: results, at: at}
	tc := traceOf(ctx)
	if tc.tp != "" {
		tc.tpMeta = map[string]string{jobs.MetaTraceParent: tc.tp}
	}
	s := getScratch()
	defer putScratch(s)
	var prepared []job // kept only to record queued jobs (Config.Status)
	if p.status != nil {
		prepared = make([]job, len(reqs))
	}
	for i := range reqs {
		j, err := p.prepare(s, reqs[i].Args, reqs[i].Options, &tc, false)
		results[i] = Result{ID: j.id, Kind: j.kind, Key: j.key}
		if err != nil {
			results[i].Err = fmt.Errorf("producer: job %d (%s): %w", b.label(i), j.label(), err)
			continue
		}
		if j.scheduled {
			p.schedule(ctx, &j, &results[i])
			continue
		}
		if err := p.offload(ctx, &j); err != nil {
			results[i].Err = fmt.Errorf("producer: job %d (%s, id %s): %w", b.label(i), j.label(), j.id, err)
			continue
		}
		results[i].Payload = j.ptr
		if prepared != nil {
			prepared[i] = j
		}
		if b.n == MaxBatchEntries || b.size+j.size > MaxBatchRequestSize {
			b.flush(ctx)
		}
		b.add(i, &j)
	}
	b.flush(ctx)
	for i := range prepared {
		if results[i].Err == nil && results[i].MessageID != "" {
			results[i].StatusErr = p.recordQueued(ctx, &prepared[i])
		}
	}
	if b.okCalls == 0 && b.callErr != nil {
		return results, fmt.Errorf("producer: EnqueueBatch: no job sent: %w", b.callErr)
	}
	return results, nil
}

// entryIDs are the batch entry ids: an entry's position in its request.
var entryIDs = [MaxBatchEntries]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// batcher gathers jobs into one SendMessageBatch request and sends it. Its arrays are reused
// from one request to the next.
type batcher struct {
	p       *Producer
	results []Result

	n, size int
	entries [MaxBatchEntries]types.SendMessageBatchRequestEntry
	job     [MaxBatchEntries]int // index in results of each entry
	bodies  [MaxBatchEntries]string
	groups  [MaxBatchEntries]string
	dedups  [MaxBatchEntries]string
	lastErr [MaxBatchEntries]*EntryError
	jobs    [MaxBatchEntries]*job // the entries' jobs, for dropRejected
	retry   [MaxBatchEntries]types.SendMessageBatchRequestEntry
	input   sqs.SendMessageBatchInput

	at      []int           // each result's position in the caller's slice (nil: its index)
	okCalls int             // SendMessageBatch calls that succeeded
	callErr error           // the first failed call's error
	ctx     context.Context // the flush's context (for dropRejected)
}

func (b *batcher) add(i int, j *job) {
	k := b.n
	b.job[k] = i
	b.jobs[k] = j
	b.bodies[k] = j.body
	e := types.SendMessageBatchRequestEntry{
		Id:                &entryIDs[k],
		MessageBody:       &b.bodies[k],
		DelaySeconds:      j.delay,
		MessageAttributes: j.attrs,
	}
	if j.awsTrace != "" {
		e.MessageSystemAttributes = awsTraceAttribute(j.awsTrace)
	}
	if j.group != "" {
		b.groups[k] = j.group
		e.MessageGroupId = &b.groups[k]
	}
	if j.dedup != "" {
		b.dedups[k] = j.dedup
		e.MessageDeduplicationId = &b.dedups[k]
	}
	b.entries[k] = e
	b.lastErr[k] = nil
	b.n++
	b.size += j.size
}

// flush sends the gathered entries, retrying the ones SQS failed with a retryable code, and
// records every entry's outcome.
func (b *batcher) flush(ctx context.Context) {
	if b.n == 0 {
		return
	}
	defer b.reset()
	b.ctx = ctx
	p := b.p
	b.input.QueueUrl = &p.queueURL
	var pending uint16 = 1<<b.n - 1 // entries not yet settled, by position
	send := b.entries[:b.n]
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			b.failCall(pending, err)
			return
		}
		b.input.Entries = send
		out, err := p.sqs.SendMessageBatch(ctx, &b.input, keepConnection)
		b.input.Entries = nil
		if err != nil {
			b.failCall(pending, err)
			return
		}
		b.okCalls++
		sent := pending
		for _, ok := range out.Successful {
			k, found := entryIndex(ok.Id, sent)
			if !found {
				continue
			}
			r := &b.results[b.job[k]]
			r.MessageID = aws.ToString(ok.MessageId)
			r.SequenceNumber = aws.ToString(ok.SequenceNumber)
			pending &^= 1 << k
			sent &^= 1 << k
		}
		var retry uint16
		for _, f := range out.Failed {
			k, found := entryIndex(f.Id, sent)
			if !found {
				continue
			}
			sent &^= 1 << k
			e := &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault, Attempts: attempt}
			if attempt <= p.maxRetries && e.Retryable() {
				b.lastErr[k] = e
				retry |= 1 << k
				continue
			}
			b.fail(k, e, true)
			pending &^= 1 << k
		}
		// Entries the response did not mention: not known to be sent, and not safe to resend.
		for k := 0; k < b.n; k++ {
			if sent&(1<<k) != 0 {
				b.fail(k, fmt.Errorf("SQS's SendMessageBatch response did not report this message; it may or may not have been enqueued"), false)
				pending &^= 1 << k
			}
		}
		if retry == 0 {
			return
		}
		if err := p.sleep(ctx, p.backoff(attempt)); err != nil {
			for k := 0; k < b.n; k++ {
				if retry&(1<<k) != 0 {
					b.fail(k, fmt.Errorf("%w; retry abandoned: %w", b.lastErr[k], err), true)
				}
			}
			return
		}
		send = b.retry[:0]
		for k := 0; k < b.n; k++ {
			if retry&(1<<k) != 0 {
				send = append(send, b.entries[k])
			}
		}
	}
}

// failCall records a failed SendMessageBatch call on the pending entries.
func (b *batcher) failCall(pending uint16, err error) {
	if b.callErr == nil {
		b.callErr = err
	}
	definite := rejected(err)
	for k := 0; k < b.n; k++ {
		if pending&(1<<k) == 0 {
			continue
		}
		if last := b.lastErr[k]; last != nil {
			b.fail(k, fmt.Errorf("%w; retry failed: SQS SendMessageBatch: %w", last, err), definite)
		} else {
			b.fail(k, fmt.Errorf("not sent: SQS SendMessageBatch: %w", err), definite)
		}
	}
}

// fail records an entry's error. definite says that SQS certainly did not take the message (an
// entry it reported failed, a refused request): the job's S3 object is then dropped when no
// other message can point to it.
func (b *batcher) fail(k int, err error, definite bool) {
	i := b.job[k]
	r := &b.results[i]
	r.Err = fmt.Errorf("producer: job %d (%s, id %s): %w%s", b.label(i), r.Kind, r.ID, err, b.p.dropRejected(b.ctx, b.jobs[k], definite))
}

// label returns the position of result i in the caller's slice, for errors.
func (b *batcher) label(i int) int {
	if b.at != nil {
		return b.at[i]
	}
	return i
}

func (b *batcher) reset() {
	for k := 0; k < b.n; k++ {
		b.entries[k] = types.SendMessageBatchRequestEntry{}
		b.retry[k] = types.SendMessageBatchRequestEntry{}
		b.bodies[k], b.groups[k], b.dedups[k] = "", "", ""
		b.lastErr[k], b.jobs[k] = nil, nil
	}
	b.n, b.size = 0, 0
}

// entryIndex parses a batch entry id and reports whether it names an entry in set.
func entryIndex(id *string, set uint16) (int, bool) {
	if id == nil || len(*id) != 1 || (*id)[0] < '0' || (*id)[0] > '9' {
		return 0, false
	}
	k := int((*id)[0] - '0')
	return k, set&(1<<k) != 0
}

// backoff returns the wait before retry number attempt (1 for the first): base doubled per
// retry, capped, with "equal jitter" (a random point in its upper half) so that retries spread
// out without collapsing to zero.
func (p *Producer) backoff(attempt int) time.Duration {
	d := p.retryBase
	for i := 1; i < attempt && d < p.retryMax; i++ {
		d *= 2
	}
	d = min(d, p.retryMax)
	return d/2 + time.Duration(p.rand()*float64(d/2))
}
