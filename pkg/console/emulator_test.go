package console_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

// TestEmulatorQueueCountsLag measures when the embedded emulator (kumo v0.33.1) counts a message
// in ApproximateNumberOfMessagesNotVisible, the gap Config.Emulator labels (docs/ARCHITECTURE.md
// §6). Its rule, read in its SQS storage (internal/service/sqs/storage.go): a received message
// sits in the queue's in-flight set until it is deleted, or until a ReceiveMessage on that queue
// finds its visibility ended (requeueExpiredMessages, run by receives only) and moves it back.
// GetQueueAttributes counts that set as not visible and does not look at the visibility: a
// message whose visibility ended — its timeout ran out, or ChangeMessageVisibility set it to 0, as
// every peek of the DLQ does — stays counted in flight, and not visible, however long, until the
// next receive on its queue; SendMessage and time do not refresh it. Yet a receive gets it at
// once. On AWS it is visible again as soon as its visibility ends. The test fails when an upgrade
// changes the rule: then the label and the documentation go.
func TestEmulatorQueueCountsLag(t *testing.T) {
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("console-counts")})
	if err != nil {
		t.Fatal(err)
	}
	q := b.QueueURL(stack.DLQURL)
	counts := func(step string) (visible, notVisible int) {
		t.Helper()
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		notVisible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return visible, notVisible
	}
	expect := func(step string, visible, notVisible int) {
		t.Helper()
		if v, nv := counts(step); v != visible || nv != notVisible {
			t.Errorf("%s: visible %d, not visible %d; the emulator's rule says %d and %d", step, v, nv, visible, notVisible)
		}
	}
	send := func(body string) {
		t.Helper()
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(step string, want int, visibility int32) []sqstypes.Message {
		t.Helper()
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10,
			VisibilityTimeout: visibility, WaitTimeSeconds: 0})
		if err != nil || len(out.Messages) != want {
			t.Fatalf("%s: received %d messages (%v), want %d", step, len(out.Messages), err, want)
		}
		return out.Messages
	}
	release := func(step string, msgs []sqstypes.Message) {
		t.Helper()
		for _, m := range msgs {
			if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q),
				ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
		}
	}

	send("a")
	expect("sent", 1, 0)
	held := receive("received", 1, 600)
	expect("received (visibility 600 s)", 0, 1)
	// A peek's release: on AWS the message is visible again at once (1, 0).
	release("visibility set to 0", held)
	expect("visibility ended (set to 0)", 0, 1)
	send("b")
	expect("after a send", 1, 1)
	// A receive finds "a" receivable, though counted in flight: it is delivered with "b".
	receive("receive while counted in flight", 2, 1)
	expect("both received (visibility 1 s)", 0, 2)
	// The visibility timeout runs out: still counted in flight, whatever the time.
	ended := time.Now().Add(2 * time.Second)
	for time.Now().Before(ended) {
		time.Sleep(100 * time.Millisecond)
	}
	expect("visibility timed out a second ago", 0, 2)
	// Deleting is the other way out of the in-flight set, with a receive's handle.
	for _, m := range receive("the next receive gets both", 2, 600) {
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	expect("deleted", 0, 0)
}
