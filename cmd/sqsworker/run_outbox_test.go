package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// `run --endpoint` on a stack that exists there gives its outbox relay the queue's ARN, so a job
// delayed beyond SQS's 15 minutes leaves the outbox as a one-time schedule in the stack's group,
// as on the embedded path, instead of waiting without a scheduler.
func TestRunEndpointOutboxRelaySchedulesLongDelays(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emu, err := awslocal.Start(ctx, awslocal.Options{Backend: awslocal.Embedded})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	stack := awslocal.UniqueName("cli-obdelay")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"up", "--stack", stack, "--endpoint", emu.URL}, &stdout, &stderr); code != exitOK {
		t.Fatalf("up: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	b, err := awslocal.Start(ctx, awslocal.Options{Endpoint: emu.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sqsClient := sqs.NewFromConfig(b.Config)
	c := &awsClients{where: b.URL, local: true, sqs: sqsClient, ddb: b.DynamoDB()}
	queueURL, _, _, queueARN, err := resolveRunStack(ctx, c, stack, false)
	if err != nil || queueARN == "" {
		t.Fatalf("resolveRunStack: ARN %q, %v", queueARN, err)
	}
	schedClient := scheduler.NewFromConfig(b.Config)
	relay, err := runOutboxRelay(ctx, b, stack, queueURL, queueARN, sqsClient, schedClient, io.Discard, io.Discard)
	if err != nil || relay == nil {
		t.Fatalf("runOutboxRelay: %v, %v", relay, err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: b.DynamoDB(), Table: awslocal.OutboxTableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: queueURL})
	if err != nil {
		t.Fatal(err)
	}
	j, err := ob.PrepareRaw(ctx, p, "email.send", json.RawMessage(`{"to":"later@example.com"}`), producer.WithDelay(20*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Transact(ctx, nil, j); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = relay.Run(rctx) }()
	waitFor(t, 60*time.Second, "the delayed job to leave the outbox", func() bool {
		_, err := ob.Get(ctx, j.ID())
		return errors.Is(err, outbox.ErrNotFound)
	})
	stop()
	<-done
	sc, err := schedClient.GetSchedule(ctx, &scheduler.GetScheduleInput{GroupName: aws.String(awslocal.ScheduleGroupName(stack)),
		Name: aws.String(schedule.JobSchedulePrefix + j.ID())})
	if err != nil || aws.ToString(sc.Target.Arn) != queueARN {
		t.Fatalf("the job's one-time schedule: %+v, %v; want one targeting %s", sc, err, queueARN)
	}
}
