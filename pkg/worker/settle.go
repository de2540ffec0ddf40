package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/heartbeat"
	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// SQS limits the worker respects.
const (
	maxBatchEntries  = 10
	maxMessageBytes  = 1 << 20 // one message: body + attributes
	maxRequestBytes  = 1 << 20 // one SendMessageBatch request: all entries
	maxAttributes    = 10
	maxFailureError  = 4 << 10 // the error text kept in the failure attribute
	settleCallsInFly = 8       // concurrent SQS calls while settling
)

// FailureAttribute is the message attribute the worker adds to a dead-lettered copy: a JSON
// object with the reason and its context (see [Failure]).
const FailureAttribute = "sqsworker.failure"

// Failure is the content of the [FailureAttribute] of a dead-lettered message.
type Failure struct {
	Reason          string `json:"reason"`
	Error           string `json:"error,omitempty"`
	Attempts        int    `json:"attempts"`
	Kind            string `json:"kind,omitempty"`
	JobID           string `json:"job_id,omitempty"`
	FailedAt        string `json:"failed_at"`
	SourceMessageID string `json:"source_message_id"`
	SourceQueue     string `json:"source_queue"`
}

// settle performs the SQS calls the results need and returns the ids of the failed items.
func (b *batch) settle(ctx context.Context) []string {
	sctx := b.sendCtx
	var dead, resend, visible []*item
	for i := range b.items {
		it := &b.items[i]
		r := it.final()
		switch {
		case r.settled:
		case r.act == actDeadLetter:
			dead = append(dead, it)
		case r.act == actResend:
			resend = append(resend, it)
		case r.act == actRetry:
			visible = append(visible, it)
		}
	}
	var wg sync.WaitGroup
	if len(dead) > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); b.sendAll(sctx, dead, true, (*item).final) }()
	}
	if len(resend) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rest := b.scheduleAll(sctx, resend); len(rest) > 0 {
				b.sendAll(sctx, rest, false, (*item).final)
			}
		}()
	}
	if len(visible) > 0 {
		b.changeVisibility(sctx, visible)
	}
	wg.Wait()
	if b.h.cfg.Payload != nil {
		b.cleanupPayloads(sctx)
	}
	b.recordDeadLetters(sctx)

	var failed []string
	var outcomes []Outcome
	if b.h.cfg.OnBatch != nil {
		outcomes = make([]Outcome, 0, len(b.items))
	}
	obs := b.h.cfg.Observer
	for i := range b.items {
		it := &b.items[i]
		r := it.final()
		isFailed := r.act == actRetry || r.sendErr != nil
		if isFailed {
			failed = append(failed, it.rec.MessageID)
		}
		b.log(ctx, it, r)
		if b.h.cfg.Routing != nil && b.misrouted(it) {
			b.h.logMisrouted(ctx, it.info.Kind, b.sourceARN)
		}
		if outcomes != nil {
			outcomes = append(outcomes, b.outcome(it, r, isFailed))
		}
		if obs != nil {
			b.observe(ctx, obs, it, r, isFailed)
		}
	}
	if outcomes != nil {
		b.h.cfg.OnBatch(ctx, outcomes)
	}
	return failed
}

// observe reports a settled message to the Observer, starting it first if it never ran.
func (b *batch) observe(ctx context.Context, obs Observer, it *item, r *result, failed bool) {
	// A message that ran (or is still running, abandoned) was started by its goroutine; one that
	// never got that far is started now. The Once orders the two: whoever comes second sees the
	// first's context, or (the job's goroutine) runs without a span.
	it.obsOnce.Do(func() { it.octx.Store(obs.Start(ctx, &it.info)) })
	octx, _ := it.octx.Load().(context.Context)
	obs.Settled(octx, b.outcome(it, r, failed))
}

// recordDeadLetters hands the jobs sent to the DLQ to every middleware that records them (see
// DeadLetterRecorder), settleCallsInFly jobs at a time.
func (b *batch) recordDeadLetters(ctx context.Context) {
	if len(b.h.recorders) == 0 {
		return
	}
	var dead []*item
	for i := range b.items {
		it := &b.items[i]
		// A result in state done was published by its goroutine (final returns only those, or
		// the batch's own late results, which are never dead letters).
		if r := it.final(); r.act == actDeadLetter && r.sendErr == nil && it.info.ID != "" {
			dead = append(dead, it)
		}
	}
	parallel(len(dead), func(j int) {
		it := dead[j]
		r := it.final()
		for _, rec := range b.h.recorders {
			rec.r.RecordDeadLetter(ctx, &it.info, r.reason, r.err, int(it.depth.Load()) > rec.index)
		}
	})
}

func (b *batch) outcome(it *item, r *result, failed bool) Outcome {
	o := Outcome{
		MessageID: it.rec.MessageID, QueueARN: b.sourceARN, JobID: it.info.ID, Kind: it.info.Kind, Key: it.info.Key, Attempt: it.attemptOf(r),
		Outcome: r.outcome, Reason: r.reason, Err: r.err, SendErr: r.sendErr, Ran: r.ran, Duration: r.duration,
		Failed: failed,
	}
	if r.act == actRetry {
		o.Visibility = r.visibility
	}
	if !it.info.SentAt.IsZero() {
		o.QueueLatency = b.invoked.Sub(it.info.SentAt)
	}
	o.Misrouted = b.misrouted(it)
	if pl := it.pl; pl != nil {
		o.Payload = &PayloadOutcome{Pointer: pl.ptr, Bytes: pl.bytes, Fetch: pl.fetch, Err: pl.err, Done: pl.done, Deleted: pl.deleted, Marked: pl.marked, CleanupErr: pl.cleanErr}
	}
	return o
}

// settleInline sends a FIFO group's dead letter or re-send at once, in order, and reports
// whether the item is acknowledged (so the group may go on).
func (b *batch) settleInline(ctx context.Context, it *item) bool {
	switch it.res.act {
	case actAck:
		return true
	case actDeadLetter, actResend:
		b.sendAll(ctx, []*item{it}, it.res.act == actDeadLetter, (*item).owned)
		it.res.settled = true
		return it.res.sendErr == nil
	default:
		return false
	}
}

// sendAll sends the items' dead letters (toDLQ) or re-sends, in requests of at most 10 entries
// and 1 MiB, and records each failure in the item's result (given by res).
func (b *batch) sendAll(ctx context.Context, items []*item, toDLQ bool, res func(*item) *result) {
	var url string
	var err error
	if toDLQ {
		url, err = b.h.dlqURLFor(ctx, b.sourceARN)
	} else {
		url, err = b.h.queueURLFor(ctx, b.sourceARN)
	}
	if err != nil {
		for _, it := range items {
			res(it).sendErr = err
		}
		return
	}
	type chunk struct {
		items   []*item
		entries []sqstypes.SendMessageBatchRequestEntry
	}
	var chunks []chunk
	var cur chunk
	size := 0
	for _, it := range items {
		entry, n, err := b.entry(it, res(it), toDLQ)
		if err != nil {
			res(it).sendErr = err
			continue
		}
		if len(cur.entries) == maxBatchEntries || (len(cur.entries) > 0 && size+n > maxRequestBytes) {
			chunks = append(chunks, cur)
			cur, size = chunk{}, 0
		}
		entry.Id = aws.String(strconv.Itoa(len(cur.entries)))
		cur.items = append(cur.items, it)
		cur.entries = append(cur.entries, entry)
		size += n
	}
	if len(cur.entries) > 0 {
		chunks = append(chunks, cur)
	}
	parallel(len(chunks), func(c int) {
		ch := chunks[c]
		out, err := b.h.cfg.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: ch.entries}, keepConnection)
		if err != nil {
			for _, it := range ch.items {
				res(it).sendErr = err
			}
			return
		}
		for _, f := range out.Failed {
			i, convErr := strconv.Atoi(aws.ToString(f.Id))
			if convErr != nil || i < 0 || i >= len(ch.items) {
				continue
			}
			res(ch.items[i]).sendErr = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
		// An entry in neither list is treated as failed: nothing is acknowledged unconfirmed.
		ok := make([]bool, len(ch.items))
		for _, s := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(ok) {
				ok[i] = true
			}
		}
		for i, it := range ch.items {
			if !ok[i] && res(it).sendErr == nil {
				res(it).sendErr = errors.New("SendMessageBatch reported no result for the entry")
			}
		}
	})
}

// entry builds the SendMessageBatch entry of a dead letter or a re-send, and its size in SQS's
// accounting (body + attribute names, types and values).
func (b *batch) entry(it *item, r *result, toDLQ bool) (sqstypes.SendMessageBatchRequestEntry, int, error) {
	rec := it.rec
	attrs, err := b.originalAttributes(it)
	if err != nil {
		return sqstypes.SendMessageBatchRequestEntry{}, 0, fmt.Errorf("decode message attributes: %w", err)
	}
	body := rec.Body // a dead letter keeps the original body: an S3 pointer stays a pointer
	if !toDLQ {
		env, err := b.copyEnvelope(it, r)
		if err != nil {
			return sqstypes.SendMessageBatchRequestEntry{}, 0, err
		}
		copyBody := env.AppendJSON(make([]byte, 0, len(it.body())+64))
		body = string(copyBody)
		if it.pl != nil {
			if body, err = b.offloadResend(b.sendCtx, it, copyBody, attrs); err != nil {
				return sqstypes.SendMessageBatchRequestEntry{}, 0, err
			}
		}
	}
	size := len(body) + attributesSize(attrs)
	if toDLQ {
		if fa, n, ok := b.failureAttribute(it, r, size, len(attrs)); ok {
			attrs[FailureAttribute] = fa
			size += n
		} else {
			b.h.cfg.Logger.WarnContext(context.Background(), "sqsworker: dead letter sent without its failure attribute (no room left in the message)",
				"message_id", rec.MessageID, "reason", r.reason)
		}
	}
	e := sqstypes.SendMessageBatchRequestEntry{MessageBody: aws.String(body)}
	if len(attrs) > 0 {
		e.MessageAttributes = attrs
	}
	if rec.AWSTraceHeader != "" {
		e.MessageSystemAttributes = map[string]sqstypes.MessageSystemAttributeValue{
			string(sqstypes.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(rec.AWSTraceHeader)},
		}
	}
	if !b.fifo && rec.MessageGroupID != "" {
		e.MessageGroupId = aws.String(rec.MessageGroupID) // a fair queue's tenant
	}
	if b.fifo {
		e.MessageGroupId = aws.String(groupOrDefault(rec.MessageGroupID))
		if toDLQ {
			e.MessageDeduplicationId = aws.String(rec.MessageID)
		} else {
			e.MessageDeduplicationId = aws.String(b.h.cfg.NewID())
		}
	} else if !toDLQ && r.delay > 0 {
		e.DelaySeconds = int32(ceilSeconds(r.delay))
	}
	return e, size, nil
}

// groupOrDefault keeps a FIFO message's group; a backend that does not report the group (the
// embedded emulator) gets one fixed group so that the send is still valid.
func groupOrDefault(g string) string {
	if g == "" {
		return "default"
	}
	return g
}

// originalAttributes returns a copy of the message's attributes without a previous failure
// attribute.
func (b *batch) originalAttributes(it *item) (map[string]sqstypes.MessageAttributeValue, error) {
	src, err := it.rec.MessageAttributes()
	if err != nil {
		return nil, err
	}
	out := make(map[string]sqstypes.MessageAttributeValue, len(src)+1)
	for name, a := range src {
		if name == FailureAttribute {
			continue
		}
		v := sqstypes.MessageAttributeValue{DataType: aws.String(a.DataType)}
		if a.StringValue != nil {
			v.StringValue = aws.String(*a.StringValue)
		}
		if a.BinaryValue != nil {
			v.BinaryValue = a.BinaryValue
		}
		out[name] = v
	}
	return out, nil
}

func attributesSize(attrs map[string]sqstypes.MessageAttributeValue) int {
	n := 0
	for name, v := range attrs {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// failureAttribute builds the failure attribute if the message has room for it: at most 10
// attributes and 1 MiB in all. The error text is cut to fit.
func (b *batch) failureAttribute(it *item, r *result, size, nattrs int) (sqstypes.MessageAttributeValue, int, bool) {
	if nattrs >= maxAttributes {
		return sqstypes.MessageAttributeValue{}, 0, false
	}
	f := Failure{
		Reason:          r.reason,
		Attempts:        it.attemptOf(r),
		Kind:            it.info.Kind,
		JobID:           it.info.ID,
		FailedAt:        b.h.cfg.Now().UTC().Format(jobs.TimeLayout),
		SourceMessageID: it.rec.MessageID,
		SourceQueue:     b.sourceARN,
	}
	if r.err != nil {
		f.Error = truncate(r.err.Error(), maxFailureError)
	}
	overhead := len(FailureAttribute) + len("String")
	for {
		v, _ := json.Marshal(f)
		if size+overhead+len(v) <= maxMessageBytes {
			return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(v))},
				overhead + len(v), true
		}
		if f.Error == "" {
			return sqstypes.MessageAttributeValue{}, 0, false
		}
		f.Error = ""
	}
}

// truncate cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…(truncated)"
	cut := n - len(mark)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + mark
}

// changeVisibility sets the visibility of the items to retry, in batches of 10. A failed change
// is logged; the item is reported failed all the same.
func (b *batch) changeVisibility(ctx context.Context, items []*item) {
	url, err := b.h.queueURLFor(ctx, b.sourceARN)
	if err != nil {
		b.h.cfg.Logger.ErrorContext(ctx, "sqsworker: cannot change visibility: queue URL unknown", "error", err)
		return
	}
	// A long-running consumer (pkg/poller) extends these messages' visibility while the batch
	// runs: stop it first, so that none of its extensions lands after the retry delay set here.
	// Copies: a decoded record's receipt handle points into the invoke payload, which the Lambda
	// runtime reuses (see sqsevent.Decode), and an SQS client may keep what it is given.
	handles := make([]string, len(items))
	for i, it := range items {
		handles[i] = strings.Clone(it.rec.ReceiptHandle)
	}
	heartbeat.Stop(ctx, handles)
	nchunks := (len(items) + maxBatchEntries - 1) / maxBatchEntries
	parallel(nchunks, func(c int) {
		part := items[c*maxBatchEntries : min((c+1)*maxBatchEntries, len(items))]
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(part))
		for i, it := range part {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				ReceiptHandle:     aws.String(handles[c*maxBatchEntries+i]),
				VisibilityTimeout: int32(visibilitySeconds(it.final().visibility, b.capFor(it.rec, b.h.cfg.Now()))),
			}
		}
		out, err := b.h.cfg.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: aws.String(url), Entries: entries,
		}, keepConnection)
		if err != nil {
			b.h.cfg.Logger.ErrorContext(ctx, "sqsworker: ChangeMessageVisibilityBatch failed", "error", err, "messages", len(part))
			return
		}
		for _, f := range out.Failed {
			b.h.cfg.Logger.ErrorContext(ctx, "sqsworker: visibility change failed", "entry", aws.ToString(f.Id),
				"code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
		}
	})
}

// ceilSeconds rounds d up to whole seconds, within SQS's visibility range.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(math.Ceil(d.Seconds()))
	return min(s, int64(jobs.MaxVisibility/time.Second))
}

// visibilitySeconds rounds d up to whole seconds, but never above the cap (rounded down).
func visibilitySeconds(d, capVis time.Duration) int64 {
	return min(ceilSeconds(d), int64(capVis/time.Second))
}

// parallel calls fn(0..n-1) with at most settleCallsInFly at once.
func parallel(n int, fn func(int)) {
	if n == 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, settleCallsInFly)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// keepConnection is passed with every SQS call: without it the SDK may lose a response under a
// race in its HTTP layer and repeat the call (see internal/sdkhttp).
func keepConnection(o *sqs.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}

// misrouted reports whether the item's job is of a registered kind routed to another queue than
// the batch's (Config.Routing).
func (b *batch) misrouted(it *item) bool {
	r := b.h.cfg.Routing
	if r == nil || it.info.Kind == "" {
		return false
	}
	if _, ok := b.h.cfg.Registry.Lookup(it.info.Kind); !ok {
		return false
	}
	return r.Misrouted(it.info.Kind, b.sourceARN)
}

// logMisrouted logs the first misrouted job of each kind and queue.
func (h *Handler) logMisrouted(ctx context.Context, kind, queueARN string) {
	if _, seen := h.misrouted.LoadOrStore(kind+" "+queueARN, true); seen {
		return
	}
	h.cfg.Logger.InfoContext(ctx, "sqsworker: a job arrived on a queue its kind is not routed to; it runs all the same (counted as JobsMisrouted; logged once per kind and queue)",
		"kind", kind, "queue_arn", queueARN)
}
