package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

type mailArgs struct {
	To string `json:"to"`
}

func (mailArgs) Kind() string { return "email.send" }

// The function on the emulator: a stream batch sends its jobs, a sweep sends what the stream
// missed, and both write their counts as EMF.
func TestRelayFunctionStreamAndSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	name := awslocal.UniqueName("relayfn")
	client := sqs.NewFromConfig(b.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	table := awslocal.OutboxTableName(name)
	if _, err := dynamooutbox.CreateTable(ctx, b.DynamoDB(), table); err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	h, err := newHandler(b.DynamoDB(), config.Relay{OutboxTable: table, QueueURL: stack.QueueURL, SweepAfter: 0, MaxAttempts: 3, Lease: time.Minute},
		[]*producer.Producer{p}, slog.New(slog.NewTextHandler(io.Discard, nil)), &metrics)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: b.DynamoDB(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := ob.Prepare(ctx, p, mailArgs{To: "stream@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	swept, err := ob.Prepare(ctx, p, mailArgs{To: "sweep@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Transact(ctx, nil, streamed, swept); err != nil {
		t.Fatal(err)
	}
	// The stream record of the first job's insert, as the event source mapping delivers it.
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
		EventName: "INSERT", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "100", NewImage: dynamooutbox.ToStreamImage(streamed.Items[0].Put.Item)},
	}}}
	payload, _ := json.Marshal(ev)
	out, err := h.Invoke(ctx, payload)
	if err != nil || string(out) != `{"batchItemFailures":null}` {
		t.Fatalf("stream invoke: %s, %v", out, err)
	}
	out, err = h.Invoke(ctx, []byte(`{"mode":"sweep"}`))
	if err != nil {
		t.Fatal(err)
	}
	var res SweepResult
	if err := json.Unmarshal(out, &res); err != nil || res.Sent != 1 || res.Claimed != 1 || res.DeadJobs != 0 {
		t.Fatalf("sweep: %s, %v; want the second job sent, no dead job", out, err)
	}
	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		r, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(stack.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 300})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			got[env.ID] = true
		}
	}
	if !got[streamed.ID()] || !got[swept.ID()] || len(got) != 2 {
		t.Errorf("queue holds %v, want %s and %s", got, streamed.ID(), swept.ID())
	}
	lines := strings.Split(strings.TrimSpace(metrics.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("EMF lines: %q, want one per invocation", lines)
	}
	for i, l := range lines {
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil || doc["OutboxSent"] != 1.0 || doc["Table"] != table || doc["Service"] != "relay" || doc["_aws"] == nil {
			t.Errorf("EMF document %s (%v)", l, err)
		}
		// The sweep's document carries the dead-job gauge; a stream batch's does not.
		if _, gauge := doc["OutboxDeadJobs"]; gauge != (i == 1) || i == 1 && doc["OutboxDeadJobs"] != 0.0 {
			t.Errorf("EMF document %d: OutboxDeadJobs %v (present %v)", i, doc["OutboxDeadJobs"], gauge)
		}
	}
	// A job that dies (here: a job for a queue no producer of the relay serves, with
	// MaxAttempts 1) is counted by every later sweep, which claims nothing: the gauge stands.
	other, err := producer.New(producer.Config{SQS: client, QueueURL: stack.DLQURL})
	if err != nil {
		t.Fatal(err)
	}
	doomed, err := ob.Prepare(ctx, other, mailArgs{To: "nowhere@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Transact(ctx, nil, doomed); err != nil {
		t.Fatal(err)
	}
	h1, err := newHandler(b.DynamoDB(), config.Relay{OutboxTable: table, QueueURL: stack.QueueURL, MaxAttempts: 1, Lease: time.Minute},
		[]*producer.Producer{p}, slog.New(slog.NewTextHandler(io.Discard, nil)), &metrics)
	if err != nil {
		t.Fatal(err)
	}
	for sweep := range 3 {
		metrics.Reset()
		out, err := h1.Invoke(ctx, []byte(`{"mode":"sweep"}`))
		if err != nil {
			t.Fatal(err)
		}
		var res SweepResult
		if err := json.Unmarshal(out, &res); err != nil || res.DeadJobs != 1 || (sweep == 0) != (res.Dead == 1) {
			t.Errorf("sweep %d: %s, %v; want 1 dead job, dying in the first sweep", sweep, out, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(metrics.Bytes(), &doc); err != nil || doc["OutboxDeadJobs"] != 1.0 {
			t.Errorf("sweep %d: EMF %s (%v); want OutboxDeadJobs 1", sweep, metrics.String(), err)
		}
	}
	if _, err := h.Invoke(ctx, []byte(`{"hello":1}`)); err == nil || !strings.Contains(err.Error(), "unknown invocation") {
		t.Errorf("unknown payload: %v", err)
	}
}

func TestLoadRelay(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := config.LoadRelay(env(config.EnvOutboxTable, "app-outbox", config.EnvQueueURL, "https://sqs.eu-west-1.amazonaws.com/1/app-jobs"))
	if err != nil || c.SweepAfter != time.Minute || c.MaxAttempts != 10 || c.Lease != 30*time.Second || c.Scheduling() {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	_, err = config.LoadRelay(env(config.EnvOutboxTable, "x", config.EnvSweepAfter, "soon", config.EnvMaxAttempts, "0", config.EnvLease, "0s"))
	for _, want := range []string{"SQSWORKER_OUTBOX_TABLE=\"x\"", "SQSWORKER_QUEUE_URL is required", "SQSWORKER_OUTBOX_SWEEP_AFTER=\"soon\"", "SQSWORKER_OUTBOX_MAX_ATTEMPTS=\"0\"", "SQSWORKER_OUTBOX_LEASE=0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadRelay error %v lacks %q", err, want)
		}
	}
}
