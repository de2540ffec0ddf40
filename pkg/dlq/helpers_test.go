package dlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// testKind is the kind of every test job.
const testKind = "test.redrive"

type testArgs struct {
	N int `json:"n"`
}

func (testArgs) Kind() string { return testKind }

// emu is a job queue, its DLQ and (optionally) a job table on the shared emulator.
type emu struct {
	t      *testing.T
	client *sqs.Client
	stack  *awslocal.Stack
	table  *status.Table // nil unless asked for
	store  *idempotency.DynamoDBStore
}

func newEmu(t *testing.T, fifo, withTable bool) *emu {
	t.Helper()
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	e := &emu{t: t, client: sqs.NewFromConfig(b.Config)}
	name := awslocal.UniqueName("dlq")
	var err error
	e.stack, err = awslocal.Provision(ctx, e.client, awslocal.StackOptions{Name: name, FIFO: fifo, MaxReceiveCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	if withTable {
		ddb := b.DynamoDB()
		tbl, err := awslocal.ProvisionTable(ctx, ddb, name)
		if err != nil {
			t.Fatal(err)
		}
		if e.table, err = status.New(status.Config{Client: ddb, Table: tbl}); err != nil {
			t.Fatal(err)
		}
		if e.store, err = idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: tbl}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// dlq returns a DLQ on the emulator's queues; mutate may change the config first.
func (e *emu) dlq(mutate func(*dlq.Config)) *dlq.DLQ {
	e.t.Helper()
	cfg := dlq.Config{SQS: e.client, DLQURL: e.stack.DLQURL, SourceURL: e.stack.QueueURL, RatePerSecond: 1000}
	if e.table != nil {
		cfg.Status = e.table
	}
	if mutate != nil {
		mutate(&cfg)
	}
	d, err := dlq.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// envelope returns job i's envelope: kind testKind, key "key-<i>", attempts_before 2.
func envelope(i int) jobs.Envelope {
	return jobs.Envelope{
		V: 1, ID: fmt.Sprintf("job-%03d", i), Kind: testKind, Key: fmt.Sprintf("key-%03d", i),
		Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), AttemptsBefore: 2,
	}
}

func body(env jobs.Envelope) string {
	b, err := env.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return string(b)
}

// send sends a message with a "tenant" attribute (and extra attributes) to a queue of the stack.
func (e *emu) send(queueURL, body string, extra map[string]sqstypes.MessageAttributeValue) {
	e.t.Helper()
	attrs := map[string]sqstypes.MessageAttributeValue{
		"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
	}
	for k, v := range extra {
		attrs[k] = v
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body), MessageAttributes: attrs}
	if e.stack.FIFO {
		in.MessageGroupId = aws.String("g")
		in.MessageDeduplicationId = aws.String(jobs.NewID())
	}
	if _, err := e.client.SendMessage(context.Background(), in); err != nil {
		e.t.Fatal(err)
	}
}

// failureAttr is a failure attribute as the worker writes it.
func failureAttr(env jobs.Envelope) map[string]sqstypes.MessageAttributeValue {
	f, _ := json.Marshal(worker.Failure{
		Reason: jobs.ReasonExhausted, Error: "boom", Attempts: 3, Kind: env.Kind, JobID: env.ID,
		FailedAt: "2026-11-29T10:00:00.000Z", SourceMessageID: "m-" + env.ID, SourceQueue: "arn:aws:sqs:us-east-1:000000000000:src",
	})
	return map[string]sqstypes.MessageAttributeValue{
		worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
	}
}

// seedDead puts jobs from..to-1 in the DLQ as the worker dead-letters them.
func (e *emu) seedDead(from, to int) {
	e.t.Helper()
	for i := from; i < to; i++ {
		env := envelope(i)
		e.send(e.stack.DLQURL, body(env), failureAttr(env))
	}
}

// drain receives and deletes every message of a queue until two receives in a row bring nothing,
// or the deadline, and returns them.
func (e *emu) drain(queueURL string, within time.Duration) []sqstypes.Message {
	e.t.Helper()
	var got []sqstypes.Message
	deadline := time.Now().Add(within)
	empty := 0
	for empty < 2 && time.Now().Before(deadline) {
		msgs := e.receiveOnce(queueURL, 60)
		if len(msgs) == 0 {
			empty++
			continue
		}
		empty = 0
		got = append(got, msgs...)
		for _, m := range msgs {
			if _, err := e.client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return got
}

func (e *emu) receiveOnce(queueURL string, visibility int32) []sqstypes.Message {
	e.t.Helper()
	out, err := e.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: visibility,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Messages
}

// receive polls a queue (hiding what it gets for 60 s) until it has n distinct messages or the
// deadline passed.
func (e *emu) receive(queueURL string, n int, within time.Duration) []sqstypes.Message {
	e.t.Helper()
	var got []sqstypes.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(within)
	for len(got) < n && time.Now().Before(deadline) {
		for _, m := range e.receiveOnce(queueURL, 60) {
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				got = append(got, m)
			}
		}
	}
	return got
}

// jobIDs returns the job id of each message's envelope ("<not an envelope>" otherwise).
func jobIDs(msgs []sqstypes.Message) []string {
	var out []string
	for _, m := range msgs {
		env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
		if err != nil {
			out = append(out, "<not an envelope>")
			continue
		}
		out = append(out, env.ID)
	}
	return out
}

// handler returns a worker for the test kind whose jobs run work, with the idempotency middleware
// when the emulator has a table.
func (e *emu) handler(work func(ctx context.Context, job *jobs.Job[testArgs]) error) *worker.Handler {
	e.t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](work), jobs.WithMaxAttempts(5))
	cfg := worker.Config{Registry: reg, SQS: e.client, QueueURL: e.stack.QueueURL, DLQURL: e.stack.DLQURL,
		Logger: slog.New(slog.DiscardHandler)}
	if e.store != nil {
		mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: e.store, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			e.t.Fatal(err)
		}
		cfg.Middleware = []worker.Middleware{mw}
	}
	h, err := worker.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// deliver runs the handler on messages received from the job queue, as Lambda's event source
// mapping does, deletes the ones not reported failed, and returns the failed message ids.
func (e *emu) deliver(h *worker.Handler, msgs []sqstypes.Message) []string {
	e.t.Helper()
	var ev events.SQSEvent
	for _, m := range msgs {
		mattrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			mattrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		if e.stack.FIFO {
			attrs["MessageGroupId"] = "g"
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: attrs, MessageAttributes: mattrs, EventSource: "aws:sqs", EventSourceARN: e.stack.QueueARN, AWSRegion: "us-east-1",
		})
	}
	resp, err := h.HandleSQS(context.Background(), ev)
	if err != nil {
		e.t.Fatal(err)
	}
	failed := map[string]bool{}
	var out []string
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
		out = append(out, f.ItemIdentifier)
	}
	for _, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			if _, err := e.client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(e.stack.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return out
}

// attempts records the attempt number each job ran with.
type attempts struct {
	mu sync.Mutex
	m  map[string]int
}

func (a *attempts) record(jobID string, attempt int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]int{}
	}
	a.m[jobID] = attempt
}

func (a *attempts) get() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.m))
	for k, v := range a.m {
		out[k] = v
	}
	return out
}
