package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

type outboxEmail struct {
	To string `json:"to"`
}

func (outboxEmail) Kind() string { return "email.send" }

// TestOutboxGolden: list, show and retry on a stack's outbox, and a queued job's status showing
// that it is still in the outbox.
func TestOutboxGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := newStack(t, "outbox", false)
	b := backend(t)
	table := awslocal.OutboxTableName(stack)
	if _, err := dynamooutbox.CreateTable(ctx, b.DynamoDB(), table); err != nil {
		t.Fatal(err)
	}
	st, err := status.New(status.Config{Client: b.DynamoDB(), Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: b.DynamoDB(), Table: table, Status: st})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqs.NewFromConfig(b.Config).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: strPtr(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(b.Config), QueueURL: *q.QueueUrl})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, to := range []string{"ada@example.com", "lin@example.com"} {
		j, err := ob.Prepare(ctx, p, outboxEmail{To: to}, producer.WithKey("welcome-"+strings.Split(to, "@")[0]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ob.Transact(ctx, nil, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID())
	}
	// The second job dies: a relay claimed it and gave up.
	now := time.Now()
	claimed, err := ob.Claim(ctx, outbox.Claim{Owner: "relay-1", Max: 10, Now: now, Until: now.Add(time.Minute)})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	if err := ob.Complete(ctx, "relay-1", []outbox.Outcome{
		{ID: ids[0], Attempts: 1, Error: "SQS throttled", AvailableAt: now.Add(-time.Second)},
		{ID: ids[1], Attempts: 1, Dead: true, Error: "InvalidMessageContents: the body has a character SQS rejects"},
	}); err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(t, stack)
	tr.must("outbox", "list")
	tr.must("outbox", "list", "--state", "dead")
	tr.must("outbox", "show", ids[1])
	tr.must("status", ids[0])
	tr.must("outbox", "retry", ids[1])
	tr.must("outbox", "list", "-o", "json")
	tr.run("", "outbox", "show", "01JD5Q2Y7V3M8K4N6P0R2T4W6X")
	tr.run("", "outbox", "list", "--state", "sent")
	e, err := ob.Get(ctx, ids[1])
	if err != nil || e.State != outbox.StatePending || e.Attempts != 0 {
		t.Errorf("after retry: %+v, %v", e, err)
	}
	// A relay claims the retried job: retry refuses it while the claim is live (clearing the
	// claim would make that relay's write-back fail, and the job be sent twice).
	later := time.Now()
	if claimed, err = ob.Claim(ctx, outbox.Claim{Owner: "relay-2", Max: 10, Now: later, Until: later.Add(time.Hour)}); err != nil || len(claimed) != 2 {
		t.Fatalf("second claim: %v, %v", claimed, err)
	}
	tr.run("", "outbox", "retry", ids[1])
	tr.check("outbox")
	if e, err := ob.Get(ctx, ids[1]); err != nil || e.LockedBy != "relay-2" || e.Attempts != 1 {
		t.Errorf("after a refused retry: %+v, %v; want relay-2's claim untouched", e, err)
	}
	// A stack without an outbox table.
	tr2 := newTranscript(t, newStack(t, "nobox", false))
	if _, code := tr2.run("", "outbox", "list"); code != exitError || !strings.Contains(tr2.norm.apply(tr2.buf.String()), "outbox table STACK-outbox not found") {
		t.Errorf("no outbox table: exit %d\n%s", code, tr2.buf.String())
	}
}

func strPtr(s string) *string { return &s }
