package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// ErrGroupBlocked is the error of a message that [Producer.Send] did not send because an
// earlier message of its FIFO message group in the same call was not sent: sending it would
// break the group's order. Nothing was attempted for it; send it again after the earlier one.
var ErrGroupBlocked = errors.New("not sent: an earlier message of its FIFO message group was not sent")

// Message is a job that [Producer.Prepare] built and validated but did not send: the envelope
// and everything SQS needs to deliver it. A transactional outbox stores it beside a business
// write and hands it to [Producer.Send] later, possibly many times (a relay that crashed after
// the send): it stays the same job, with the same id, to the worker's idempotency.
//
// The fields are plain data so that a store can keep them; a Message read back from a store is
// validated again by Send.
type Message struct {
	// QueueURL is the queue of the producer that prepared it.
	QueueURL string `json:"queue_url"`
	// ID, Kind and Key are the job's id, kind and effective idempotency key (the id when the job
	// has no key of its own).
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Key  string `json:"key"`
	// Body is the envelope v1 JSON, always inline: with Config.Payload, Send writes a large one
	// to S3 and sends a pointer instead (Prepare calls no AWS service).
	Body string `json:"body"`
	// Attributes are the job's own SQS message attributes (WithAttributes), or nil.
	Attributes map[string]types.MessageAttributeValue `json:"attributes,omitempty"`
	// GroupID is the SQS message group id (WithGroupID): required on FIFO queues.
	GroupID string `json:"group_id,omitempty"`
	// DeduplicationID is the FIFO deduplication id: WithDeduplicationID's, or derived from the
	// kind and key. Empty on standard queues.
	DeduplicationID string `json:"dedup_id,omitempty"`
	// RunAt is when the job may first run (WithDelay, WithRunAt), or zero for at once. Send
	// turns what is left of it into DelaySeconds (up to 15 minutes on a standard queue) or a
	// one-time schedule (longer, or any delay on a FIFO queue: Config.Scheduler).
	RunAt time.Time `json:"run_at,omitzero"`
	// AWSTraceHeader is the X-Ray trace header sent as the AWSTraceHeader system attribute
	// (jobs.WithAWSTraceHeader in the context given to Prepare), or "".
	AWSTraceHeader string `json:"aws_trace_header,omitempty"`
}

// Size returns the message's size as SQS counts it: body plus attributes' names, types and
// values. A message larger than MaxMessageSize is sent through S3 by a producer with
// Config.Payload (as a pointer of about 150 bytes plus the size attribute, which is what Send
// counts against SQS's limits).
func (m *Message) Size() int {
	n := len(m.Body)
	for name, v := range m.Attributes {
		n += len(name)
		if v.DataType != nil {
			n += len(*v.DataType)
		}
		if v.StringValue != nil {
			n += len(*v.StringValue)
		}
		n += len(v.BinaryValue)
	}
	return n
}

// PayloadHash returns the hash of the job's kind and canonical args, as the worker's
// idempotency store keeps it (for a status record written beside the message).
func (m *Message) PayloadHash() (string, error) {
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		return "", fmt.Errorf("producer: message %s: %w", m.ID, err)
	}
	return jobs.PayloadHash(env.Kind, env.Args)
}

// Prepare validates a job as Enqueue does and returns its message without sending anything
// (no AWS call): the job id is decided now, and the caller's trace context is copied into the
// envelope. A delay is kept as Message.RunAt; unlike Enqueue, Prepare accepts delays that need
// the scheduler although Config.Scheduler is nil, because the producer that sends the message
// decides (it then needs a scheduler). Errors wrap ErrInvalid.
func (p *Producer) Prepare(ctx context.Context, args jobs.Args, opts ...Option) (Message, error) {
	if p.lanes != nil {
		return p.prepareRouted(ctx, args, opts)
	}
	if p.observer == nil {
		return p.prepareMessage(ctx, args, opts)
	}
	call := Call{Operation: OpPrepare, QueueURL: p.queueURL, Jobs: 1, Kind: kindOf(args)}
	ctx = p.observer.Start(ctx, call)
	m, err := p.prepareMessage(ctx, args, opts)
	p.observer.End(ctx, call, []Result{{ID: m.ID, Kind: m.Kind, Key: m.Key, Err: err}})
	return m, err
}

func (p *Producer) prepareMessage(ctx context.Context, args jobs.Args, opts []Option) (Message, error) {
	s := getScratch()
	defer putScratch(s)
	tc := traceOf(ctx)
	j, err := p.prepare(s, args, opts, &tc, true)
	if err != nil {
		return Message{}, fmt.Errorf("producer: prepare %s: %w", j.label(), err)
	}
	return Message{
		AWSTraceHeader:  j.awsTrace,
		QueueURL:        p.queueURL,
		ID:              j.id,
		Kind:            j.kind,
		Key:             j.key,
		Body:            j.body,
		Attributes:      j.attrs,
		GroupID:         j.group,
		DeduplicationID: j.dedup,
		RunAt:           j.runAt,
	}, nil
}

// PrepareRaw is Prepare for a job known only by its kind and its args as JSON (see EnqueueRaw).
func (p *Producer) PrepareRaw(ctx context.Context, kind string, args json.RawMessage, opts ...Option) (Message, error) {
	if err := checkRaw(kind, args); err != nil {
		label := "job"
		if jobs.ValidateKind(kind) == nil {
			label = kind
		}
		return Message{}, fmt.Errorf("producer: prepare %s: %w", label, err)
	}
	return p.Prepare(ctx, rawArgs{kind: kind, args: args}, opts...)
}

// Send sends prepared messages (from Prepare, or read back from an outbox) to the producer's
// queue and returns a Result per message, in order, each with its own Err, as EnqueueBatch does:
// SendMessageBatch requests of at most MaxBatchEntries entries and MaxBatchRequestSize bytes,
// retryable rejections retried (Config.MaxRetries), a Status record per job SQS accepted when
// Config.Status is set.
//
// Each message is validated again first, since it may come from a store other code can write:
// its body must be an envelope whose id and kind match the message's, its size and attributes
// within the limits, its queue this producer's (or empty; a producer of several queues sends each
// message to the queue it was prepared for, empty meaning the default), its group set on a FIFO
// queue. What is
// left of RunAt becomes DelaySeconds, or a one-time schedule when it exceeds 15 minutes or the
// queue is FIFO (Config.Scheduler; without one such a message fails with ErrNeedsScheduler); a
// RunAt in the past sends at once.
//
// On a FIFO queue the order of each message group is kept strictly: one request carries at most
// one message of a group, and once a message of a group fails, the later messages of that group
// in the call are not sent and fail with ErrGroupBlocked.
//
// The returned error is not nil only when requests were made and none succeeded (see
// EnqueueBatch).
func (p *Producer) Send(ctx context.Context, msgs []Message) ([]Result, error) {
	if p.lanes != nil {
		return p.sendRouted(ctx, msgs)
	}
	if p.observer == nil || len(msgs) == 0 {
		return p.send(ctx, msgs, nil)
	}
	call := Call{Operation: OpSend, QueueURL: p.queueURL, Jobs: len(msgs)}
	ctx = p.observer.Start(ctx, call)
	results, err := p.send(ctx, msgs, nil)
	p.observer.End(ctx, call, results)
	return results, err
}

// send is Send; at, when not nil, gives each message's position in the caller's slice, for
// errors (a producer of several queues sends each queue's share).
func (p *Producer) send(ctx context.Context, msgs []Message, at []int) ([]Result, error) {
	results := make([]Result, len(msgs))
	if len(msgs) == 0 {
		return results, nil
	}
	b := batcher{p: p, results: results, at: at}
	now := p.clock()
	var prepared []job
	if p.status != nil {
		prepared = make([]job, len(msgs))
	}
	// FIFO: the groups in the request being gathered, and the groups that failed in this call.
	var inRequest map[string]int
	var blocked map[string]bool
	if p.fifo {
		inRequest = make(map[string]int, MaxBatchEntries)
		blocked = map[string]bool{}
	}
	flush := func() {
		if b.n == 0 {
			return
		}
		idx := b.job // copy: flush resets the batcher
		n := b.n
		b.flush(ctx)
		for k := 0; k < n; k++ {
			if r := &results[idx[k]]; r.Err != nil && p.fifo {
				blocked[msgs[idx[k]].GroupID] = true
			}
		}
		clear(inRequest)
	}
	for i := range msgs {
		j, err := p.messageJob(&msgs[i], now)
		results[i] = Result{ID: j.id, Kind: j.kind, Key: j.key}
		if err != nil {
			results[i].Err = fmt.Errorf("producer: message %d (%s, id %s): %w", b.label(i), j.label(), j.id, err)
			if p.fifo {
				blocked[msgs[i].GroupID] = true
			}
			continue
		}
		if p.fifo && inRequest[j.group] > 0 {
			flush() // one message per group per request: its predecessor must succeed first
		}
		if p.fifo && blocked[j.group] {
			results[i].Err = fmt.Errorf("producer: message %d (%s, id %s): %w", b.label(i), j.label(), j.id, ErrGroupBlocked)
			continue
		}
		if j.scheduled {
			p.schedule(ctx, &j, &results[i])
			if results[i].Err != nil && p.fifo {
				blocked[j.group] = true
			}
			continue
		}
		if err := p.offload(ctx, &j); err != nil {
			results[i].Err = fmt.Errorf("producer: message %d (%s, id %s): %w", b.label(i), j.label(), j.id, err)
			if p.fifo {
				blocked[j.group] = true
			}
			continue
		}
		results[i].Payload = j.ptr
		if prepared != nil {
			prepared[i] = j
		}
		if b.n == MaxBatchEntries || b.size+j.size > MaxBatchRequestSize {
			flush()
		}
		b.add(i, &j)
		if p.fifo {
			inRequest[j.group]++
		}
	}
	flush()
	for i := range prepared {
		if results[i].Err == nil && results[i].MessageID != "" {
			results[i].StatusErr = p.recordQueued(ctx, &prepared[i])
		}
	}
	if b.okCalls == 0 && b.callErr != nil {
		return results, fmt.Errorf("producer: Send: no message sent: %w", b.callErr)
	}
	return results, nil
}

// messageJob validates a prepared message and turns it into a job ready to send at now.
func (p *Producer) messageJob(m *Message, now time.Time) (job, error) {
	j := job{id: m.ID, kind: m.Kind}
	if m.QueueURL != "" && m.QueueURL != p.queueURL {
		return j, invalid("the message is for queue %s, and this producer sends to %s", m.QueueURL, p.queueURL)
	}
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		return j, invalid("the body is not a job envelope: %v", err)
	}
	if m.ID != "" && env.ID != m.ID {
		return j, invalid("the envelope's id %q is not the message's id %q", env.ID, m.ID)
	}
	if m.Kind != "" && env.Kind != m.Kind {
		return j, invalid("the envelope's kind %q is not the message's kind %q", env.Kind, m.Kind)
	}
	j.id, j.kind, j.key = env.ID, env.Kind, env.EffectiveKey()
	attrSize, err := checkAttributes(m.Attributes)
	if err != nil {
		return j, err
	}
	j.size = len(m.Body) + attrSize
	if j.size > p.maxSize {
		return j, tooLarge("message is %d bytes (body %d + attributes %d), above the limit of %d bytes%s", j.size, len(m.Body), attrSize, p.maxSize, p.limitNote())
	}
	switch {
	case m.GroupID != "":
		if err := checkToken("message group id", m.GroupID); err != nil {
			return j, err
		}
	case p.fifo:
		return j, invalid("no message group id: FIFO queue %s needs one for every job", p.queueName())
	}
	if p.fifo {
		j.dedup = m.DeduplicationID
		if j.dedup == "" {
			j.dedup = deduplicationID(j.kind, j.key)
		} else if err := checkToken("deduplication id", j.dedup); err != nil {
			return j, err
		}
	} else if m.DeduplicationID != "" {
		return j, invalid("deduplication id %q on standard queue %s: deduplication ids apply only to FIFO queues", m.DeduplicationID, p.queueName())
	}
	if !m.RunAt.IsZero() {
		if d := m.RunAt.Sub(now); d > 0 {
			if j.delay, j.scheduled, err = delaySeconds(d, p.fifo, p.scheduler != nil); err != nil {
				return j, err
			}
			j.runAt = m.RunAt
		}
	}
	j.body, j.group, j.attrs, j.awsTrace = m.Body, m.GroupID, m.Attributes, m.AWSTraceHeader
	return j, nil
}
