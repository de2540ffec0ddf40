package worker

// Tests against the embedded SQS emulator (real queue semantics: visibility, receive counts,
// FIFO group locking, redrive). The test drives the handler the way Lambda's event source
// mapping does: receive, invoke, delete what was not reported failed.

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

type emu struct {
	t      *testing.T
	client *sqs.Client
	stack  *awslocal.Stack
	mu     sync.Mutex
	groups map[string]string // message id → group (the emulator does not return MessageGroupId)
}

func newEmu(t *testing.T, opts awslocal.StackOptions) *emu {
	t.Helper()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	opts.Name = awslocal.UniqueName(t.Name())
	st, err := awslocal.Provision(context.Background(), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &emu{t: t, client: client, stack: st, groups: map[string]string{}}
}

func (e *emu) send(body string, attrs map[string]sqstypes.MessageAttributeValue, group string) string {
	e.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(e.stack.QueueURL), MessageBody: aws.String(body), MessageAttributes: attrs}
	if group != "" {
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(jobs.NewID())
	}
	out, err := e.client.SendMessage(context.Background(), in)
	if err != nil {
		e.t.Fatal(err)
	}
	id := aws.ToString(out.MessageId)
	e.mu.Lock()
	e.groups[id] = group
	e.mu.Unlock()
	return id
}

func (e *emu) sendJob(args testArgs, attrs map[string]sqstypes.MessageAttributeValue, group string) (msgID, jobID string) {
	a, _ := json.Marshal(args)
	env := jobs.Envelope{V: 1, ID: jobs.NewID(), Kind: "test.job", Args: a}
	b, err := env.MarshalJSON()
	if err != nil {
		e.t.Fatal(err)
	}
	return e.send(string(b), attrs, group), env.ID
}

// receive polls the queue until at least min messages arrived or the deadline passed.
func (e *emu) receive(url string, min int, within time.Duration) []sqstypes.Message {
	e.t.Helper()
	var got []sqstypes.Message
	deadline := time.Now().Add(within)
	for {
		out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"},
		})
		if err != nil {
			e.t.Fatal(err)
		}
		got = append(got, out.Messages...)
		if len(got) >= min || time.Now().After(deadline) {
			return got
		}
		<-time.After(25 * time.Millisecond)
	}
}

// event builds the Lambda event for received messages.
func (e *emu) event(msgs []sqstypes.Message) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		e.mu.Lock()
		if g := e.groups[aws.ToString(m.MessageId)]; g != "" {
			attrs["MessageGroupId"] = g
		}
		e.mu.Unlock()
		mattrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			mattrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: attrs, MessageAttributes: mattrs,
			EventSource: "aws:sqs", EventSourceARN: e.stack.QueueARN, AWSRegion: "us-east-1",
		})
	}
	return ev
}

// deliver invokes the handler with msgs and deletes the ones not reported failed, as Lambda does.
func (e *emu) deliver(ctx context.Context, h *Handler, msgs []sqstypes.Message) []string {
	e.t.Helper()
	resp, err := h.HandleSQS(ctx, e.event(msgs))
	if err != nil {
		e.t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			if _, err := e.client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.stack.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return failedIDs(resp)
}

func (e *emu) counts(url string) (visible, inFlight int) {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"All"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	v, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	f, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return v, f
}

func (e *emu) handler(t *testing.T, rec *recorder, backoff time.Duration, mutate func(*Config)) *Handler {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](rec.work), jobs.WithMaxAttempts(3),
		jobs.WithPolicy(jobs.PolicyFunc(func(int) time.Duration { return backoff })))
	cfg := Config{Registry: reg, SQS: e.client, Logger: slog.New(slog.DiscardHandler)}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func ids(msgs []sqstypes.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, aws.ToString(m.MessageId))
	}
	return out
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{release: make(chan struct{})}
	t.Cleanup(func() { close(r.release) })
	return r
}

func TestEmulatorPartialFailureDeletesOnlySuccesses(t *testing.T) {
	t.Parallel()
	e := newEmu(t, awslocal.StackOptions{})
	h := e.handler(t, newRecorder(t), time.Second, nil)
	ok1, _ := e.sendJob(testArgs{Do: "ok"}, nil, "")
	fail, _ := e.sendJob(testArgs{Do: "fail"}, nil, "")
	pan, _ := e.sendJob(testArgs{Do: "panic"}, nil, "")
	ok2, _ := e.sendJob(testArgs{Do: "ok"}, nil, "")
	msgs := e.receive(e.stack.QueueURL, 4, 10*time.Second)
	if len(msgs) != 4 {
		t.Fatalf("received %d, want 4", len(msgs))
	}
	failed := e.deliver(context.Background(), h, msgs)
	want := map[string]bool{fail: true, pan: true}
	if len(failed) != 2 || !want[failed[0]] || !want[failed[1]] {
		t.Fatalf("failed = %v, want %s and %s", failed, fail, pan)
	}
	// After the 1 s backoff only the two failures come back; the successes are gone.
	back := e.receive(e.stack.QueueURL, 2, 20*time.Second)
	for _, id := range ids(back) {
		if id == ok1 || id == ok2 {
			t.Errorf("a succeeded message came back: %s", id)
		}
	}
	if len(back) != 2 {
		t.Errorf("came back: %v, want the 2 failures", ids(back))
	}
}

func TestEmulatorRetryTimingThenDLQWithReason(t *testing.T) {
	t.Parallel()
	e := newEmu(t, awslocal.StackOptions{VisibilityTimeout: 60})
	rec := newRecorder(t)
	const backoff = 2 * time.Second
	h := e.handler(t, rec, backoff, nil)
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for i := range 8 {
		attrs["attr"+strconv.Itoa(i)] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("value-" + strconv.Itoa(i))}
	}
	msgID, jobID := e.sendJob(testArgs{Do: "fail"}, attrs, "")
	var original string
	var last time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		msgs := e.receive(e.stack.QueueURL, 1, 30*time.Second)
		if len(msgs) != 1 {
			t.Fatalf("attempt %d: received %d messages", attempt, len(msgs))
		}
		if attempt > 1 {
			if waited := time.Since(last); waited < backoff-100*time.Millisecond {
				t.Errorf("attempt %d came back after %s, before its %s backoff", attempt, waited, backoff)
			}
		}
		original = aws.ToString(msgs[0].Body)
		failed := e.deliver(context.Background(), h, msgs)
		last = time.Now()
		if attempt < 3 && len(failed) != 1 {
			t.Fatalf("attempt %d: failed = %v, want the message", attempt, failed)
		}
		if attempt == 3 && len(failed) != 0 {
			t.Fatalf("attempt 3: failed = %v, want none (dead-lettered)", failed)
		}
		if attempt < 3 {
			// Not before its backoff: an immediate receive finds nothing.
			if early := e.receive(e.stack.QueueURL, 1, 0); len(early) != 0 {
				t.Fatalf("attempt %d: the message is visible again at once", attempt)
			}
		}
	}
	rec.mu.Lock()
	var attempts []int
	for _, in := range rec.infos {
		attempts = append(attempts, in.Attempt)
	}
	rec.mu.Unlock()
	if len(attempts) != 3 || attempts[0] != 1 || attempts[1] != 2 || attempts[2] != 3 {
		t.Errorf("attempts seen by the job = %v, want [1 2 3]", attempts)
	}
	dlq := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	if len(dlq) != 1 {
		t.Fatalf("DLQ has %d messages, want 1", len(dlq))
	}
	d := dlq[0]
	if aws.ToString(d.Body) != original {
		t.Errorf("DLQ body = %s, want the original %s", aws.ToString(d.Body), original)
	}
	if len(d.MessageAttributes) != 9 {
		t.Errorf("DLQ attributes = %d, want the 8 originals + %s", len(d.MessageAttributes), FailureAttribute)
	}
	for i := range 8 {
		name := "attr" + strconv.Itoa(i)
		if got := aws.ToString(d.MessageAttributes[name].StringValue); got != "value-"+strconv.Itoa(i) {
			t.Errorf("attribute %s = %q", name, got)
		}
	}
	var f Failure
	if err := json.Unmarshal([]byte(aws.ToString(d.MessageAttributes[FailureAttribute].StringValue)), &f); err != nil {
		t.Fatal(err)
	}
	if f.Reason != jobs.ReasonExhausted || f.Attempts != 3 || f.Kind != "test.job" || f.JobID != jobID ||
		f.SourceMessageID != msgID || f.SourceQueue != e.stack.QueueARN || f.Error != "failed on purpose" {
		t.Errorf("failure = %+v", f)
	}
	if _, err := time.Parse(time.RFC3339, f.FailedAt); err != nil {
		t.Errorf("failed_at %q: %v", f.FailedAt, err)
	}
	if v, inFlight := e.counts(e.stack.QueueURL); v != 0 || inFlight != 0 {
		t.Errorf("source queue still has %d visible, %d in flight", v, inFlight)
	}
}

func TestEmulatorMalformedAndUnknownKindDeadLetterOnFirstReceive(t *testing.T) {
	t.Parallel()
	e := newEmu(t, awslocal.StackOptions{})
	rec := newRecorder(t)
	h := e.handler(t, rec, time.Second, nil)
	e.send("plain text from a non-Go producer", nil, "")
	e.send(`{"v":1,"id":"x1","kind":"not.registered","args":{}}`, nil, "")
	msgs := e.receive(e.stack.QueueURL, 2, 10*time.Second)
	if failed := e.deliver(context.Background(), h, msgs); len(failed) != 0 {
		t.Fatalf("failed = %v, want none", failed)
	}
	dlq := e.receive(e.stack.DLQURL, 2, 10*time.Second)
	reasons := map[string]string{}
	for _, d := range dlq {
		var f Failure
		_ = json.Unmarshal([]byte(aws.ToString(d.MessageAttributes[FailureAttribute].StringValue)), &f)
		reasons[aws.ToString(d.Body)] = f.Reason
	}
	if reasons["plain text from a non-Go producer"] != jobs.ReasonMalformed || reasons[`{"v":1,"id":"x1","kind":"not.registered","args":{}}`] != jobs.ReasonUnknownKind {
		t.Errorf("DLQ reasons = %v", reasons)
	}
	if v, inFlight := e.counts(e.stack.QueueURL); v != 0 || inFlight != 0 {
		t.Errorf("source queue still has %d visible, %d in flight: they must not be retried", v, inFlight)
	}
	if len(rec.ranIDs()) != 0 {
		t.Errorf("jobs ran: %v", rec.ranIDs())
	}
}

func TestEmulatorFailedDLQSendLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEmu(t, awslocal.StackOptions{VisibilityTimeout: 1})
	h := e.handler(t, newRecorder(t), time.Second, func(c *Config) {
		c.DLQURL = e.stack.QueueURL[:len(e.stack.QueueURL)-len("-jobs")] + "-does-not-exist"
	})
	id, _ := e.sendJob(testArgs{Do: "cancel"}, nil, "")
	msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
	if failed := e.deliver(context.Background(), h, msgs); len(failed) != 1 || failed[0] != id {
		t.Fatalf("failed = %v, want [%s]", failed, id)
	}
	back := e.receive(e.stack.QueueURL, 1, 20*time.Second)
	if len(back) != 1 || aws.ToString(back[0].MessageId) != id {
		t.Fatalf("the message did not come back: %v", ids(back))
	}
}

func TestEmulatorFIFOGroupSkipComesBackPromptly(t *testing.T) {
	t.Parallel()
	e := newEmu(t, awslocal.StackOptions{FIFO: true, VisibilityTimeout: 120})
	rec := newRecorder(t)
	h := e.handler(t, rec, time.Second, nil)
	a1, _ := e.sendJob(testArgs{Do: "ok"}, nil, "A")
	b1, _ := e.sendJob(testArgs{Do: "ok"}, nil, "B")
	a2, a2job := e.sendJob(testArgs{Do: "fail"}, nil, "A")
	b2, _ := e.sendJob(testArgs{Do: "ok"}, nil, "B")
	a3, a3job := e.sendJob(testArgs{Do: "ok"}, nil, "A")
	msgs := e.receive(e.stack.QueueURL, 5, 10*time.Second)
	if len(msgs) != 5 {
		t.Fatalf("received %d, want 5", len(msgs))
	}
	failed := e.deliver(context.Background(), h, msgs)
	if !equal(failed, []string{a2, a3}) {
		t.Fatalf("failed = %v, want [a2 a3] = [%s %s]", failed, a2, a3)
	}
	_, _, _ = a1, b1, b2
	// a2 is back after its 1 s backoff and a3 after it, in order — far sooner than the queue's
	// 120 s visibility timeout.
	back := e.receive(e.stack.QueueURL, 2, 60*time.Second)
	if !equal(ids(back), []string{a2, a3}) {
		t.Fatalf("came back %v, want [%s %s] in order", ids(back), a2, a3)
	}
	rec.mu.Lock()
	ran := append([]string(nil), rec.ran...)
	rec.mu.Unlock()
	for _, id := range ran {
		if id == a3job {
			t.Errorf("a3 ran although a2 before it in its group failed")
		}
	}
	_ = a2job
}

func TestEmulatorDeadline(t *testing.T) {
	t.Parallel()
	e := newEmu(t, awslocal.StackOptions{VisibilityTimeout: 120})
	rec := newRecorder(t)
	h := e.handler(t, rec, time.Second, func(c *Config) { c.DeadlineMargin = time.Second; c.AbandonGrace = 2 * time.Second })
	fast, _ := e.sendJob(testArgs{Do: "ok"}, nil, "")
	slow, _ := e.sendJob(testArgs{Do: "slow"}, nil, "")
	block, _ := e.sendJob(testArgs{Do: "block"}, nil, "")
	msgs := e.receive(e.stack.QueueURL, 3, 10*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	failed := e.deliver(ctx, h, msgs)
	if time.Now().After(deadline) {
		t.Errorf("HandleSQS returned after the deadline")
	}
	want := map[string]bool{slow: true, block: true}
	if len(failed) != 2 || !want[failed[0]] || !want[failed[1]] {
		t.Fatalf("failed = %v, want slow and block", failed)
	}
	// Both come back well before the queue's 120 s visibility: slow after its backoff, block after
	// the abandon grace; the fast one is gone.
	back := e.receive(e.stack.QueueURL, 2, 60*time.Second)
	for _, id := range ids(back) {
		if id == fast {
			t.Errorf("the fast job came back")
		}
	}
	if len(back) != 2 {
		t.Errorf("came back %v, want slow and block", ids(back))
	}
}
