package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// queueCount returns the messages of a queue of the emulator, visible or in flight.
func queueCount(t *testing.T, client *sqs.Client, queueURL string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

// drainJobIDs receives and deletes every message of a queue and returns how often each job id
// was there.
func drainJobIDs(t *testing.T, client *sqs.Client, queueURL string) map[string]int {
	t.Helper()
	ctx := context.Background()
	ids := map[string]int{}
	for empty := 0; empty < 2; {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("message %q: %v", aws.ToString(m.Body), err)
			}
			ids[env.ID]++
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids
}

// TestDLQRedriveInterrupted interrupts a slow redrive (--rate 2) as Ctrl-C does, by cancelling
// the command's context: it says how many messages it moved and that running it again is safe;
// the rerun moves the rest, and every job is then in the job queue exactly once.
func TestDLQRedriveInterrupted(t *testing.T) {
	t.Parallel()
	const n = 10
	stack := newStack(t, "redrive", false)
	b := backend(t)
	client := sqs.NewFromConfig(b.Config)
	ctx := context.Background()
	urlOf := func(name string) string {
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	queueURL, dlqURL := urlOf(awslocal.QueueName(stack, false)), urlOf(awslocal.DLQName(stack, false))
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range n {
		entries = append(entries, deadLetter("email.send", fmt.Sprintf("job-%02d", i), nil))
	}
	if out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(dlqURL), Entries: entries}); err != nil || len(out.Failed) > 0 {
		t.Fatalf("seed the DLQ: %v %+v", err, out)
	}

	runCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(runCtx, []string{"dlq", "redrive", "--rate", "2", "--stack", stack, "--endpoint", b.URL}, &stdout, &stderr)
	}()
	waitFor(t, 30*time.Second, "the redrive moved its first messages", func() bool { return queueCount(t, client, queueURL) > 0 })
	interrupt()
	var got int
	select {
	case got = <-code:
	case <-time.After(60 * time.Second):
		t.Fatal("the interrupted redrive did not return")
	}
	m := regexp.MustCompile(`^sqsworker: redrive interrupted: moved (\d+) of 10 messages from ` + regexp.QuoteMeta(awslocal.DLQName(stack, false)) +
		` to ` + regexp.QuoteMeta(awslocal.QueueName(stack, false)) + `; the rest are still in ` + regexp.QuoteMeta(awslocal.DLQName(stack, false)) +
		`, none lost\n  running the same command again is safe: it moves what is left\n$`).FindStringSubmatch(stderr.String())
	if got != exitError || m == nil || stdout.Len() != 0 {
		t.Fatalf("interrupted redrive: exit %d, stdout %q, stderr %q; want exit 1 and the interrupted message", got, stdout.String(), stderr.String())
	}
	moved, _ := strconv.Atoi(m[1])
	if moved < 1 || moved >= n {
		t.Fatalf("interrupted after %d moved, want 1-%d", moved, n-1)
	}
	// The message tells the truth: moved messages are in the job queue, the rest in the DLQ.
	if inQueue, inDLQ := queueCount(t, client, queueURL), queueCount(t, client, dlqURL); inQueue != moved || inDLQ != n-moved {
		t.Fatalf("after the interrupt: %d in the job queue and %d in the DLQ, want %d and %d", inQueue, inDLQ, moved, n-moved)
	}

	// Running it again moves the rest.
	stdout.Reset()
	stderr.Reset()
	if got := run(ctx, []string{"dlq", "redrive", "--stack", stack, "--endpoint", b.URL, "-o", "json"}, &stdout, &stderr); got != exitOK {
		t.Fatalf("second redrive: exit %d: %s", got, stderr.String())
	}
	var doc redriveJSON
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || doc.Moved != n-moved || doc.Total != n-moved || doc.LeftBehind != 0 {
		t.Fatalf("second redrive = %s (%v); want %d moved of %d, none left behind", stdout.String(), err, n-moved, n-moved)
	}
	ids := drainJobIDs(t, client, queueURL)
	for i := range n {
		if id := fmt.Sprintf("job-%02d", i); ids[id] != 1 {
			t.Errorf("job %s is %d times in the job queue, want once (all: %v)", id, ids[id], ids)
		}
	}
	if left := queueCount(t, client, dlqURL); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}

// TestDLQRedriveRateFlag: --rate takes 1-500.
func TestDLQRedriveRateFlag(t *testing.T) {
	t.Parallel()
	for _, rate := range []string{"0", "-1", "501"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"dlq", "redrive", "--rate", rate, "--stack", "s", "--endpoint", "http://127.0.0.1:1"}, &stdout, &stderr); code != exitUsage ||
			!bytes.Contains(stderr.Bytes(), []byte("--rate "+rate+": want 1-500 messages per second")) {
			t.Errorf("--rate %s: exit %d, stderr %q; want exit 2 naming the range", rate, code, stderr.String())
		}
	}
}
