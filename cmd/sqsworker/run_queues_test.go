package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// TestRunServesEveryQueueOfTheStack runs the real worker function through `sqsworker run --queue
// critical:weight=3 --queue bulk`: one producer routes jobs to the three queues, the one poller
// serves them all, the function (given SQSWORKER_QUEUES) settles each job, the poison job ends
// in the DLQ of the queue it came from, and the jobs of kinds the function does not route there
// are counted as misrouted (the example worker registers its kinds without a queue).
func TestRunServesEveryQueueOfTheStack(t *testing.T) {
	stack := awslocal.UniqueName("cli-queues")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	running := startRun(t, ctx, 120*time.Second, "--stack", stack, "--function", "../../functions/worker", "--concurrency", "2",
		"--timeout", "20s", "--queue", "critical:weight=3", "--queue", "bulk", "--priority", "weighted")
	for _, want := range []string{"queue     critical: ", "(weight 3)", "queue     bulk: "} {
		if !strings.Contains(running.stdout.String(), want) {
			t.Errorf("run's output lacks %q:\n%s", want, running.stdout.String())
		}
	}
	b, err := awslocal.Start(ctx, awslocal.Options{Endpoint: running.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	client := sqs.NewFromConfig(b.Config)
	c := &awsClients{where: b.URL, local: true, sqs: client, ddb: b.DynamoDB()}
	set, err := stackQueueSet(ctx, c, stack)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), ","); got != "default,bulk,critical" {
		t.Fatalf("the stack's queues are %s, want default, bulk and critical", got)
	}
	prod, err := producer.New(producer.Config{SQS: client, Queues: set, Routes: queues.Routes{
		examplejobs.EmailArgs{}.Kind(): "critical", examplejobs.ResizeArgs{}.Kind(): "bulk",
	}})
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
	state := func(i int) idempotency.State {
		j, err := st.Get(ctx, results[i].Kind, results[i].Key)
		if err != nil {
			return ""
		}
		return j.State
	}
	waitFor(t, 150*time.Second, "every job settled in the table", func() bool {
		return state(0) == idempotency.StateSucceeded && state(1) == idempotency.StateSucceeded && state(2) == idempotency.StateDead
	})
	bulk, _ := set.Get("bulk")
	dl, err := dlq.New(dlq.Config{SQS: client, DLQURL: bulk.DLQURL, SourceURL: bulk.URL})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the poison job in bulk's DLQ", func() bool {
		msgs, err := dl.Peek(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs) == 1 && msgs[0].JobID == results[2].ID && msgs[0].Reason == "exhausted"
	})
	running.stopCleanly()
	out := running.stderr.String()
	for _, want := range []string{`"JobsMisrouted":1`, `"Queue":"` + stack + `-jobs-critical"`, "a job arrived on a queue its kind is not routed to"} {
		if !strings.Contains(out, want) {
			t.Errorf("the function's output lacks %s", want)
		}
	}
}
