package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// TestRunOneJobThenStop runs the container against the embedded emulator: it handles one job
// (recorded as succeeded in the job table), then stops cleanly when its context is cancelled,
// as on SIGTERM.
func TestRunOneJobThenStop(t *testing.T) {
	// The SDK reads its credentials from the process environment: give it test ones, and no
	// instance-metadata probe.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	name := awslocal.UniqueName("container")
	client := sqs.NewFromConfig(b.Config)
	st, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, b.DynamoDB(), name)
	if err != nil {
		t.Fatal(err)
	}
	group, err := awslocal.ProvisionScheduleGroup(ctx, scheduler.NewFromConfig(b.Config), name)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: st.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Enqueue(ctx, examplejobs.EmailArgs{To: "ada@example.com", Subject: "Welcome"}, producer.WithKey("welcome-ada")); err != nil {
		t.Fatal(err)
	}

	env := map[string]string{
		"SQSWORKER_QUEUE_URL": st.QueueURL, "SQSWORKER_TABLE": table, "SQSWORKER_SCHEDULE_GROUP": group,
		"SQSWORKER_WAIT_TIME": "1s", "AWS_ENDPOINT_URL": b.URL, "AWS_REGION": awslocal.DefaultRegion,
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	}()

	records, err := status.New(status.Config{Client: b.DynamoDB(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, err := records.Get(ctx, "email.send", "welcome-ada")
		if err == nil && j.State == idempotency.StateSucceeded {
			break
		}
		if err != nil && !errors.Is(err, status.ErrNotFound) {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before the job ran: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not succeed within 30s (last: %+v, %v)", j, err)
		}
		<-time.After(50 * time.Millisecond) // poll interval, not a timing assumption
	}

	stop() // what SIGTERM does through signal.NotifyContext
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10s of the cancel")
	}
}

func TestRunRejectsBadSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SQSWORKER_BATCH_SIZE": "11", "SQSWORKER_JOB_TIMEOUT": "soon", "AWS_ENDPOINT_URL": "localhost"}
	err := run(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("run accepted a bad configuration")
	}
	for _, want := range []string{"SQSWORKER_QUEUE_URL is required", `SQSWORKER_BATCH_SIZE="11"`, `SQSWORKER_JOB_TIMEOUT="soon"`, `AWS_ENDPOINT_URL "localhost"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
