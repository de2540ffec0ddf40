package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// TestRunRealWorkerEndToEnd runs the real worker function (functions/worker, built for the host)
// under the RIE through `sqsworker run` on the embedded emulator: a job that succeeds, one that
// fails twice and then succeeds after its backoffs, and a poison job that ends in the DLQ with its
// reason; the job table says how each ended.
func TestRunRealWorkerEndToEnd(t *testing.T) {
	stack := awslocal.UniqueName("cli-worker")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	running := startRun(t, ctx, 120*time.Second, "--stack", stack, "--function", "../../functions/worker", "--concurrency", "2", "--timeout", "20s")
	b, err := awslocal.Start(ctx, awslocal.Options{Endpoint: running.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	client := sqs.NewFromConfig(b.Config)
	q, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.DLQName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: aws.ToString(q.QueueUrl)})
	if err != nil {
		t.Fatal(err)
	}
	results, err := prod.EnqueueBatch(ctx, []producer.Request{
		{Args: examplejobs.EmailArgs{To: "ada@example.com"}},
		{Args: examplejobs.ReportArgs{Name: "monthly"}},
		{Args: examplejobs.ResizeArgs{URL: "s3://photos/broken.jpg"}},
	})
	if err != nil || producer.JoinErrors(results) != nil {
		t.Fatal(err, producer.JoinErrors(results))
	}
	st, err := status.New(status.Config{Client: b.DynamoDB(), Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	state := func(i int) (idempotency.State, int) {
		j, err := st.Get(ctx, results[i].Kind, results[i].Key)
		if err != nil {
			return "", 0
		}
		return j.State, j.Runs
	}
	waitFor(t, 150*time.Second, "every job settled in the table", func() bool {
		s0, _ := state(0)
		s1, _ := state(1)
		s2, _ := state(2)
		return s0 == idempotency.StateSucceeded && s1 == idempotency.StateSucceeded && s2 == idempotency.StateDead
	})
	if s, runs := state(1); s != idempotency.StateSucceeded || runs != 3 {
		t.Errorf("report.build: %s after %d runs, want succeeded after 3", s, runs)
	}
	if s, runs := state(2); s != idempotency.StateDead || runs != examplejobs.MaxAttempts {
		t.Errorf("image.resize: %s after %d runs, want dead after %d", s, runs, examplejobs.MaxAttempts)
	}
	dl, err := dlq.New(dlq.Config{SQS: client, DLQURL: aws.ToString(d.QueueUrl), SourceURL: aws.ToString(q.QueueUrl)})
	if err != nil {
		t.Fatal(err)
	}
	var found *dlq.Message
	waitFor(t, 30*time.Second, "the poison job in the DLQ", func() bool {
		msgs, err := dl.Peek(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for i := range msgs {
			if msgs[i].JobID == results[2].ID {
				found = &msgs[i]
				return true
			}
		}
		return false
	})
	if found.Reason != "exhausted" || found.Attempts != examplejobs.MaxAttempts || !strings.Contains(found.Failure.Error, "corrupt image") {
		t.Errorf("dead letter = %+v", found)
	}
	running.stopCleanly()
	logs := running.stderr.String()
	// Durations read as durations ("visibility":"2.3s"), not nanoseconds: the retries logged
	// the visibility their backoff set.
	if m := regexp.MustCompile(`"(visibility|duration|backoff|deadline_margin|waited)":-?[0-9]`).FindString(logs); m != "" {
		t.Errorf("a duration logged as a number: %s", m)
	}
	for _, want := range []string{`"deadline_margin":"2s"`, `"visibility":"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the function's logs lack %s:\n%s", want, logs)
		}
	}
	// The stop run caused is not reported as a warning.
	if strings.Contains(logs, "SandboxTerminated") {
		t.Errorf("the RIE's warning about the stop run caused is shown:\n%s", logs)
	}
	// The function talks to an emulator: the SDK has nothing to warn about (it warned twice per
	// job when the function's DynamoDB client checked the CRC32 header emulators do not send).
	for _, line := range strings.Split(running.stderr.String(), "\n") {
		if strings.HasPrefix(line, "SDK ") || strings.Contains(line, "response did not match expected checksum") {
			t.Errorf("the function's SDK logged: %s", line)
		}
	}
}
