package jobstest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Clock is a settable clock for the whole environment: the queue's visibility and delays, the
// worker, the idempotency store and the producer all read it, so that a test steps through
// backoffs and delays without waiting. It starts at the real time when made (the worker's own
// timers count real time until the invocation's deadline, which must not lie behind it) and only
// moves forward. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at start, or at the current time when start is zero or in the past.
func NewClock(start time.Time) *Clock {
	if now := time.Now(); start.IsZero() || start.Before(now) {
		start = now
	}
	return &Clock{now: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward (a negative d is ignored).
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// advanceTo moves the clock to t when t is ahead.
func (c *Clock) advanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

// Queue is an in-memory SQS queue with SQS's semantics where jobs depend on them: delays
// (DelaySeconds, 0–900 s), visibility timeouts on receive, ChangeMessageVisibility, receive
// counts, FIFO message groups (one message of a group in flight at a time, in order) and a
// redrive policy to a dead-letter queue after MaxReceiveCount receives. Its time is the
// environment's Clock. It implements producer.SQSAPI and worker.SQSAPI, and records every
// message sent to it (Sent), consumed or not.
type Queue struct {
	name, url, arn string
	fifo           bool
	clock          *Clock
	visibility     time.Duration
	maxReceives    int
	dlq            *Queue

	mu        sync.Mutex
	seq       int
	msgs      []*message // live messages, in send order
	sent      []Message  // every message ever sent
	schedules []Schedule // one-time schedules not fired yet
	scheduled []Schedule // every one-time schedule ever created
}

var (
	_ producer.SQSAPI       = (*Queue)(nil)
	_ producer.JobScheduler = (*Queue)(nil)
	_ worker.SQSAPI         = (*Queue)(nil)
)

// Schedule is a one-time schedule of a delayed job (a delay beyond SQS's 15 minutes, or any delay
// on a FIFO queue), as the producer asks EventBridge Scheduler for one: when the Clock reaches
// RunAt, Env sends Envelope to the queue.
type Schedule struct {
	// Envelope is the job the schedule sends.
	Envelope jobs.Envelope
	// RunAt is when it sends it.
	RunAt time.Time
	// GroupID is the FIFO message group ("" on a standard queue).
	GroupID string
	// ScheduledAt is when the producer made the schedule (the Clock's time).
	ScheduledAt time.Time
}

// Message is a message sent to a Queue, as SQS keeps it.
type Message struct {
	// ID is the message id SQS would have given it.
	ID string
	// Body is the message body (a job's envelope).
	Body string
	// Attributes are the message attributes (string values).
	Attributes map[string]string
	// Delay is the message's DelaySeconds.
	Delay time.Duration
	// GroupID and DedupID are the FIFO message group and deduplication ids ("" on a standard
	// queue without a group).
	GroupID, DedupID string
	// SentAt is when it was sent (by the Clock).
	SentAt time.Time
	// FromSchedule reports that a one-time schedule sent it (Schedule), not a producer.
	FromSchedule bool
}

type message struct {
	Message
	attrs        map[string]sqstypes.MessageAttributeValue
	visibleAt    time.Time
	receives     int
	firstReceive time.Time
	receipt      string
	seq          int
}

func newQueue(name string, fifo bool, clock *Clock, visibility time.Duration, maxReceives int) *Queue {
	if fifo {
		name += ".fifo"
	}
	return &Queue{
		name: name, fifo: fifo, clock: clock, visibility: visibility, maxReceives: maxReceives,
		url: "https://sqs.us-east-1.amazonaws.com/123456789012/" + name,
		arn: "arn:aws:sqs:us-east-1:123456789012:" + name,
	}
}

// URL returns the queue's URL.
func (q *Queue) URL() string { return q.url }

// ARN returns the queue's ARN.
func (q *Queue) ARN() string { return q.arn }

// Sent returns every message sent to the queue so far, in order, consumed or not.
func (q *Queue) Sent() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Message(nil), q.sent...)
}

// Len returns the number of messages in the queue: visible, delayed or in flight.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// Messages returns the messages in the queue now, in send order.
func (q *Queue) Messages() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Message, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = m.Message
	}
	return out
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// send adds one message; it returns its id or an error naming what SQS would refuse.
func (q *Queue) send(body string, delay int32, attrs map[string]sqstypes.MessageAttributeValue, group, dedup *string) (string, error) {
	switch {
	case delay < 0 || delay > 900:
		return "", fmt.Errorf("jobstest: DelaySeconds %d: SQS takes 0–900", delay)
	case q.fifo && delay != 0:
		return "", fmt.Errorf("jobstest: FIFO queue %s takes no per-message DelaySeconds", q.name)
	case q.fifo && aws.ToString(group) == "":
		return "", fmt.Errorf("jobstest: FIFO queue %s needs a MessageGroupId", q.name)
	case len(attrs) > 10:
		return "", fmt.Errorf("jobstest: %d message attributes: SQS takes at most 10", len(attrs))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	now := q.clock.Now()
	m := &message{attrs: attrs, seq: q.seq, visibleAt: now.Add(time.Duration(delay) * time.Second)}
	m.ID = fmt.Sprintf("jobstest-%s-%06d", strings.TrimSuffix(q.name, ".fifo"), q.seq)
	m.Body, m.Delay, m.GroupID, m.DedupID, m.SentAt = body, time.Duration(delay)*time.Second, aws.ToString(group), aws.ToString(dedup), now
	m.Attributes = map[string]string{}
	for k, v := range attrs {
		m.Attributes[k] = aws.ToString(v.StringValue)
	}
	q.msgs = append(q.msgs, m)
	q.sent = append(q.sent, m.Message)
	return m.ID, nil
}

// SendMessage implements producer.SQSAPI.
func (q *Queue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := q.checkURL(in.QueueUrl); err != nil {
		return nil, err
	}
	id, err := q.send(aws.ToString(in.MessageBody), in.DelaySeconds, in.MessageAttributes, in.MessageGroupId, in.MessageDeduplicationId)
	if err != nil {
		return nil, err
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(id), MD5OfMessageBody: aws.String(md5Hex(aws.ToString(in.MessageBody)))}, nil
}

// SendMessageBatch implements producer.SQSAPI and worker.SQSAPI (dead letters, re-sends).
func (q *Queue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	target, err := q.route(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		return nil, fmt.Errorf("jobstest: SendMessageBatch with %d entries: SQS takes 1–10", len(in.Entries))
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		id, err := target.send(aws.ToString(e.MessageBody), e.DelaySeconds, e.MessageAttributes, e.MessageGroupId, e.MessageDeduplicationId)
		if err != nil {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"),
				Message: aws.String(err.Error()), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id),
			MD5OfMessageBody: aws.String(md5Hex(aws.ToString(e.MessageBody)))})
	}
	return out, nil
}

// ChangeMessageVisibilityBatch implements worker.SQSAPI: each message becomes visible again
// VisibilityTimeout seconds from now.
func (q *Queue) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if err := q.checkURL(in.QueueUrl); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	now := q.clock.Now()
	for _, e := range in.Entries {
		m := q.byReceipt(aws.ToString(e.ReceiptHandle))
		if m == nil || e.VisibilityTimeout < 0 || e.VisibilityTimeout > 43200 {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		m.visibleAt = now.Add(time.Duration(e.VisibilityTimeout) * time.Second)
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// GetQueueUrl implements worker.SQSAPI.
func (q *Queue) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	for _, c := range []*Queue{q, q.dlq} {
		if c != nil && aws.ToString(in.QueueName) == c.name {
			return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(c.url)}, nil
		}
	}
	return nil, fmt.Errorf("jobstest: no queue named %q", aws.ToString(in.QueueName))
}

// GetQueueAttributes implements worker.SQSAPI: the ARN, the visibility timeout and the redrive
// policy.
func (q *Queue) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	target, err := q.route(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{
		"QueueArn": target.arn, "VisibilityTimeout": strconv.Itoa(int(target.visibility / time.Second)),
		"ApproximateNumberOfMessages": strconv.Itoa(target.Len()),
	}
	if target.dlq != nil {
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, target.dlq.arn, target.maxReceives)
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

func (q *Queue) checkURL(u *string) error {
	if aws.ToString(u) != q.url {
		return fmt.Errorf("jobstest: queue URL %q is not %s", aws.ToString(u), q.url)
	}
	return nil
}

// route returns the queue a URL names: this one or its DLQ.
func (q *Queue) route(u *string) (*Queue, error) {
	if q.dlq != nil && aws.ToString(u) == q.dlq.url {
		return q.dlq, nil
	}
	if err := q.checkURL(u); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *Queue) byReceipt(receipt string) *message {
	for _, m := range q.msgs {
		if m.receipt != "" && m.receipt == receipt {
			return m
		}
	}
	return nil
}

// receive takes up to n visible messages as Lambda's event source would: each one's receive
// count grows and it is hidden for the visibility timeout; one whose receive count would pass the
// redrive policy's maxReceiveCount moves to the DLQ instead. On a FIFO queue a group with a
// message in flight gives nothing, and each group gives its messages in order.
func (q *Queue) receive(n int) []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	busy := map[string]bool{}
	if q.fifo {
		for _, m := range q.msgs {
			if m.visibleAt.After(now) && m.receives > 0 {
				busy[m.GroupID] = true
			}
		}
	}
	var out []events.SQSMessage
	var keep []*message
	for _, m := range q.msgs {
		if len(out) >= n || m.visibleAt.After(now) || q.fifo && busy[m.GroupID] {
			keep = append(keep, m)
			if q.fifo && m.GroupID != "" {
				busy[m.GroupID] = true // later messages of the group wait for this one
			}
			continue
		}
		if q.dlq != nil && q.maxReceives > 0 && m.receives >= q.maxReceives {
			q.dlq.mu.Lock()
			q.dlq.msgs = append(q.dlq.msgs, m)
			q.dlq.sent = append(q.dlq.sent, m.Message)
			m.visibleAt, m.receipt = now, ""
			q.dlq.mu.Unlock()
			continue
		}
		m.receives++
		if m.receives == 1 {
			m.firstReceive = now
		}
		m.receipt = fmt.Sprintf("rh-%s-%d", m.ID, m.receives)
		m.visibleAt = now.Add(q.visibility)
		keep = append(keep, m)
		out = append(out, q.event(m))
	}
	q.msgs = keep
	return out
}

// event is message m as Lambda hands it to the worker.
func (q *Queue) event(m *message) events.SQSMessage {
	ev := events.SQSMessage{
		MessageId: m.ID, ReceiptHandle: m.receipt, Body: m.Body, Md5OfBody: md5Hex(m.Body),
		EventSource: "aws:sqs", EventSourceARN: q.arn, AWSRegion: "us-east-1",
		Attributes: map[string]string{
			"ApproximateReceiveCount":          strconv.Itoa(m.receives),
			"SentTimestamp":                    strconv.FormatInt(m.SentAt.UnixMilli(), 10),
			"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
			"SenderId":                         "AIDAJOBSTEST",
		},
	}
	if m.GroupID != "" {
		ev.Attributes["MessageGroupId"] = m.GroupID
	}
	if m.DedupID != "" {
		ev.Attributes["MessageDeduplicationId"] = m.DedupID
	}
	if q.fifo {
		ev.Attributes["SequenceNumber"] = strconv.Itoa(m.seq)
	}
	if len(m.attrs) > 0 {
		ev.MessageAttributes = map[string]events.SQSMessageAttribute{}
		for k, v := range m.attrs {
			ev.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: aws.ToString(v.DataType)}
		}
	}
	return ev
}

// delete removes the messages with these receipt handles (what Lambda does with the messages a
// batch did not report failed).
func (q *Queue) delete(receipts map[string]bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	keep := q.msgs[:0]
	for _, m := range q.msgs {
		if !receipts[m.receipt] {
			keep = append(keep, m)
		}
	}
	q.msgs = keep
}

// nextEvent returns when the next message becomes visible or the next schedule fires (false when
// the queue is empty and nothing is scheduled).
func (q *Queue) nextEvent() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ts []time.Time
	for _, m := range q.msgs {
		ts = append(ts, m.visibleAt)
	}
	for _, s := range q.schedules {
		ts = append(ts, s.RunAt)
	}
	if len(ts) == 0 {
		return time.Time{}, false
	}
	sort.Slice(ts, func(a, b int) bool { return ts[a].Before(ts[b]) })
	return ts[0], true
}

// ScheduleJob implements producer.JobScheduler: it keeps a one-time schedule (scheduling a job id
// again is not an error).
func (q *Queue) ScheduleJob(_ context.Context, env jobs.Envelope, runAt time.Time, groupID string) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.scheduled {
		if s.Envelope.ID == env.ID {
			return "jobstest-" + env.ID, nil
		}
	}
	s := Schedule{Envelope: env, RunAt: runAt, GroupID: groupID, ScheduledAt: q.clock.Now()}
	q.schedules = append(q.schedules, s)
	q.scheduled = append(q.scheduled, s)
	return "jobstest-" + env.ID, nil
}

// CancelJob implements producer.JobScheduler: it deletes the job's schedule, if any.
func (q *Queue) CancelJob(_ context.Context, jobID string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, s := range q.schedules {
		if s.Envelope.ID == jobID {
			q.schedules = append(q.schedules[:i], q.schedules[i+1:]...)
			return nil
		}
	}
	return nil
}

// Schedules returns the one-time schedules not fired yet.
func (q *Queue) Schedules() []Schedule {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Schedule(nil), q.schedules...)
}

// fire sends the envelopes of the schedules that are due to the queue.
func (q *Queue) fire() error {
	now := q.clock.Now()
	q.mu.Lock()
	var due []Schedule
	keep := q.schedules[:0]
	for _, s := range q.schedules {
		if !s.RunAt.After(now) {
			due = append(due, s)
		} else {
			keep = append(keep, s)
		}
	}
	q.schedules = keep
	q.mu.Unlock()
	for _, s := range due {
		body, err := s.Envelope.MarshalJSON()
		if err != nil {
			return fmt.Errorf("jobstest: the schedule of job %s: %w", s.Envelope.ID, err)
		}
		var group, dedup *string
		if s.GroupID != "" {
			id := s.Envelope.ID // content-based deduplication on AWS; the job id here
			group, dedup = &s.GroupID, &id
		}
		id, err := q.send(string(body), 0, nil, group, dedup)
		if err != nil {
			return fmt.Errorf("jobstest: the schedule of job %s could not send it: %w", s.Envelope.ID, err)
		}
		q.markScheduled(id)
	}
	return nil
}

// markScheduled marks message id as sent by a schedule.
func (q *Queue) markScheduled(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.msgs {
		if m.ID == id {
			m.FromSchedule = true
		}
	}
	for i := range q.sent {
		if q.sent[i].ID == id {
			q.sent[i].FromSchedule = true
		}
	}
}
