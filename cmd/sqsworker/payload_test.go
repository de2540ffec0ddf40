package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// TestPayloadGolden: a job larger than SQS allows, enqueued from a file, goes through the stack's
// payload bucket; status shows its object; a dead letter kept in S3 shows it too; purge
// --delete-payloads deletes it.
func TestPayloadGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "payload", false)
	b := backend(t)
	ctx := context.Background()
	bucket, err := awslocal.ProvisionBucket(ctx, b.S3(), stack)
	if err != nil {
		t.Fatal(err)
	}
	st, err := payload.New(payload.Config{S3: b.S3(), Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "args.json")
	if err := os.WriteFile(file, []byte(`{"data":"`+strings.Repeat("x", 2<<20)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(t, stack)
	out := tr.must("enqueue", "blob.store", "--args", "@"+file)
	id := strings.Fields(strings.Split(out, "\n")[1])[2]
	got, err := st.Get(ctx, payload.Pointer{Bucket: bucket, Key: st.Key(id)})
	if err != nil {
		t.Fatalf("the job's object: %v", err)
	}
	env, err := jobs.DecodeEnvelope(got)
	if err != nil || env.ID != id || len(env.Args) != 2<<20+11 {
		t.Fatalf("object: %v (id %s, %d bytes of args)", err, env.ID, len(env.Args))
	}
	msgs := receiveAll(t, awslocal.QueueName(stack, false))
	if len(msgs) != 1 || !strings.HasPrefix(aws.ToString(msgs[0].Body), `["software.amazon.payloadoffloading.PayloadS3Pointer"`) {
		t.Fatalf("queue holds %d messages, want the pointer", len(msgs))
	}
	tr.must("status", "blob.store/"+id)
	tr.run("", "enqueue", "blob.store", "--args", "@"+filepath.Join(dir, "missing.json"))

	// A dead letter whose job is in S3 (the worker keeps the pointer).
	client := sqs.NewFromConfig(b.Config)
	dlqURL, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.DLQName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := json.Marshal(worker.Failure{Reason: jobs.ReasonExhausted, Error: "boom", Attempts: 5, Kind: "blob.store", JobID: id,
		FailedAt: "2025-03-14T09:30:00.000Z", SourceMessageID: "src-1", SourceQueue: "arn:aws:sqs:us-east-1:000000000000:" + awslocal.QueueName(stack, false)})
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: dlqURL.QueueUrl, MessageBody: msgs[0].Body,
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			payload.SizeAttribute:   msgs[0].MessageAttributes[payload.SizeAttribute],
			worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
		}}); err != nil {
		t.Fatal(err)
	}
	tr.must("dlq", "show", id)
	tr.must("dlq", "purge", "--confirm", awslocal.DLQName(stack, false), "--delete-payloads")
	if _, err := st.Get(ctx, payload.Pointer{Bucket: bucket, Key: st.Key(id)}); !errors.Is(err, payload.ErrNotFound) {
		t.Fatalf("after purge --delete-payloads the object: %v, want it deleted", err)
	}
	s := strings.ReplaceAll(tr.buf.String(), dir, "TMP")
	s = strings.ReplaceAll(s, strings.ToLower(stack), "STACK") // the bucket name is lower case
	tr.buf.Reset()
	tr.buf.WriteString(s)
	tr.check("payload")
}

// TestEnqueueLargeWithoutBucket: a job too large for SQS on a stack without a payload bucket is a
// usage error that says how to get one.
func TestEnqueueLargeWithoutBucket(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "nobucket", false)
	file := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(file, []byte(`{"data":"`+strings.Repeat("x", 2<<20)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(t, stack)
	_, code := tr.run("", "enqueue", "blob.store", "@"+file)
	if code != exitUsage || !strings.Contains(tr.buf.String(), "up --payloads") || !strings.Contains(tr.buf.String(), stack+"-payloads") {
		t.Fatalf("exit %d:\n%s", code, tr.buf.String())
	}
	if n := len(receiveAll(t, awslocal.QueueName(stack, false))); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
}

// TestDLQRedrivePayloadNoMoveTask: `dlq redrive --no-move-task` sends a dead letter kept in S3
// back with its envelope rewritten (attempts_before reset, a fresh object under .redrive-<hash>).
func TestDLQRedrivePayloadNoMoveTask(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "redrivepl", false)
	b := backend(t)
	ctx := context.Background()
	bucket, err := awslocal.ProvisionBucket(ctx, b.S3(), stack)
	if err != nil {
		t.Fatal(err)
	}
	st, err := payload.New(payload.Config{S3: b.S3(), Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	env := jobs.Envelope{V: 1, ID: "big-1", Kind: "blob.store", Args: []byte(`{"data":"x"}`), AttemptsBefore: 3}
	raw, _ := env.MarshalJSON()
	old, err := st.Put(ctx, st.Key(env.ID)+".resend-00", raw)
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(b.Config)
	dlqURL, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.DLQName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: dlqURL.QueueUrl, MessageBody: aws.String(old.Body()),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			payload.SizeAttribute: {DataType: aws.String("Number"), StringValue: aws.String(payload.SizeValue(len(raw)))},
		}}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := run(ctx, []string{"dlq", "redrive", "--no-move-task", "--stack", stack, "--endpoint", b.URL, "-o", "json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var doc redriveJSON
	if err := json.Unmarshal([]byte(stdout.String()), &doc); err != nil || doc.Moved != 1 || doc.Method != "receive-send-delete" {
		t.Fatalf("output %s (%v)", stdout.String(), err)
	}
	msgs := receiveAll(t, awslocal.QueueName(stack, false))
	if len(msgs) != 1 {
		t.Fatalf("the job queue has %d messages", len(msgs))
	}
	p, err := payload.ParsePointer(aws.ToString(msgs[0].Body))
	if err != nil || !strings.HasPrefix(p.Key, st.Key(env.ID)+".redrive-") {
		t.Fatalf("redriven body %s (%v)", aws.ToString(msgs[0].Body), err)
	}
	data, err := st.Get(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := jobs.DecodeEnvelope(data); err != nil || got.AttemptsBefore != 0 || got.ID != env.ID {
		t.Fatalf("redriven envelope %+v, %v; want attempts_before 0", got, err)
	}
}

// TestDLQLargeJobByID: a job too large for SQS, dead-lettered by a worker that cannot read S3
// (reason malformed, a failure attribute without its id or kind), is listed with its id and kind,
// shown and redriven by its id, like any other job; without the bucket, list and redrive say why
// they cannot tell which job it is.
func TestDLQLargeJobByID(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "bigdead", false)
	b := backend(t)
	ctx := context.Background()
	// A bucket under another name than <stack>-payloads: the commands find it only when told.
	bucket, err := awslocal.ProvisionBucket(ctx, b.S3(), stack+"-alt")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(file, []byte(`{"data":"`+strings.Repeat("x", 1100<<10)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(t, stack)
	out := tr.must("enqueue", "blob.store", "--args", "@"+file, "--payload-bucket", bucket)
	id := strings.Fields(strings.Split(out, "\n")[1])[2]

	// The worker without the bucket dead-letters it as malformed.
	client := sqs.NewFromConfig(b.Config)
	queueURL, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	dlqURL, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.DLQName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[blobArgs](func(context.Context, *jobs.Job[blobArgs]) error { return nil }))
	h, err := worker.New(worker.Config{Registry: reg, SQS: client, QueueURL: aws.ToString(queueURL.QueueUrl), DLQURL: aws.ToString(dlqURL.QueueUrl),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := receiveAll(t, awslocal.QueueName(stack, false))
	if len(msgs) != 1 {
		t.Fatalf("the queue holds %d messages", len(msgs))
	}
	m := msgs[0]
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range m.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
	}
	resp, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId),
		ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body), MessageAttributes: attrs,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs", AWSRegion: "us-east-1"}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the worker: %+v, %v", resp, err)
	}
	if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: queueURL.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}

	// Without the bucket: listed without an id, and redrive --job says why.
	tr.must("dlq", "list")
	if _, code := tr.run("", "dlq", "redrive", "--job", id); code != exitError {
		t.Fatalf("redrive --job without the bucket: exit %d, want 1", code)
	}
	// With it: listed, shown and redriven by id.
	listed := tr.must("dlq", "list", "--payload-bucket", bucket)
	if !strings.Contains(listed, id) || !strings.Contains(listed, "blob.store") {
		t.Fatalf("dlq list does not name the job %s:\n%s", id, listed)
	}
	tr.must("dlq", "show", id, "--payload-bucket", bucket)
	tr.must("dlq", "redrive", "--job", id, "--payload-bucket", bucket)
	tr.must("dlq", "list", "--payload-bucket", bucket)
	tr.buf = *bytes.NewBufferString(strings.ReplaceAll(strings.ReplaceAll(tr.buf.String(), filepath.Dir(file), "TMP"), strings.ToLower(stack), "STACK"))
	tr.check("payload_dlq")

	msgs = receiveAll(t, awslocal.QueueName(stack, false))
	if len(msgs) != 1 {
		t.Fatalf("after the redrive the job queue holds %d messages", len(msgs))
	}
	p, err := payload.ParsePointer(aws.ToString(msgs[0].Body))
	if err != nil || p.Bucket != bucket {
		t.Fatalf("the redriven message %.200s: %v; want a pointer into %s", aws.ToString(msgs[0].Body), err, bucket)
	}
}

type blobArgs struct {
	Data string `json:"data"`
}

func (blobArgs) Kind() string { return "blob.store" }
