package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// TestQueuesGolden provisions a stack of three queues with up --queue, enqueues on two of them
// with --queue, reads the overview (table and JSON), and works on one queue's DLQ: list, redrive.
func TestQueuesGolden(t *testing.T) {
	t.Parallel()
	stack := fmt.Sprintf("cli-queues-%03d", stackSeq.Add(1))
	tr := newTranscript(t, stack)
	tr.must("up", "--queue", "critical:weight=6", "--queue", "bulk:visibility=5m,max-receive=30")
	tr.must("enqueue", "email.send", `{"to":"a@b.c"}`, "--queue", "critical")
	tr.must("enqueue", "import.run", `{"file":"a.csv"}`, "--queue", "bulk")
	tr.must("enqueue", "report.build", `{}`)
	// A dead letter in bulk's DLQ, as the worker would have sent it.
	client := sqs.NewFromConfig(backend(t).Config)
	dlqURL, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(queues.DLQSQSName(stack, "bulk", false))})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"v":1,"id":"01JD5Q2Y7V3M8K4N6P0R2T4W6X","kind":"import.run","args":{"file":"b.csv"}}`
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: dlqURL.QueueUrl, MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	tr.must("queues")
	out := tr.must("queues", "--output", "json")
	var doc struct {
		Queues []queueRowJSON `json:"queues"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Queues) != 3 || doc.Queues[0].Name != "default" || !doc.Queues[0].Default || doc.Queues[1].Name != "bulk" ||
		*doc.Queues[1].DLQVisible != 1 || *doc.Queues[1].MaxReceiveCount != 30 || *doc.Queues[1].VisibilityTimeout != 300 {
		t.Errorf("queues JSON = %+v", doc.Queues)
	}
	tr.must("dlq", "list", "--queue", "bulk")
	tr.must("dlq", "list")
	tr.must("dlq", "redrive", "--queue", "bulk")
	if err := json.Unmarshal([]byte(tr.must("queues", "--output", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if b := doc.Queues[1]; *b.Visible != 2 || *b.DLQVisible != 0 {
		t.Errorf("after the redrive bulk holds %d and its DLQ %d, want 2 and 0 (the dead letter came back to its own queue)", *b.Visible, *b.DLQVisible)
	}
	tr.check("queues")
	// Each job is on the queue --queue named.
	for q, kinds := range map[string]string{"-critical": "email.send", "-bulk": "import.run,import.run", "": "report.build"} {
		var got []string
		for _, m := range receiveAll(t, stack+"-jobs"+q) {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, env.Kind)
		}
		if strings.Join(got, ",") != kinds {
			t.Errorf("queue %s-jobs%s holds %v, want %s", stack, q, got, kinds)
		}
	}
}

// TestQueuesErrors: a queue the stack does not have, a bad queue name, a queue given twice.
func TestQueuesErrors(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "qerrs", false)
	tr := newTranscript(t, stack)
	for _, args := range [][]string{
		{"enqueue", "email.send", `{}`, "--queue", "urgent"},
		{"dlq", "list", "--queue", "urgent"},
		{"enqueue", "email.send", `{}`, "--queue", "Urgent"},
		{"up", "--queue", "bulk", "--queue", "bulk:weight=2"},
		{"up", "--queue", "bulk:weight=0"},
		{"up", "--queue", "bulk:speed=fast"},
	} {
		if _, code := tr.run("", args...); code == 0 {
			t.Errorf("sqsworker %s succeeded, want an error", strings.Join(args, " "))
		}
	}
	tr.check("queues_errors")
}
