package main

import (
	"context"
	"errors"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// TestCancelScheduledBatchChild: `sqsworker cancel` of a batch's child that waits in a one-time
// schedule (a delay beyond SQS's 15 minutes) deletes the schedule, so no delivery will come to
// count the cancellation: the command counts it in the batch itself (batch.Client.RepairJob).
// It is counted once (a second cancel is refused and counts nothing), and the batch waits for its
// other child, then fires its callback once.
func TestCancelScheduledBatchChild(t *testing.T) {
	t.Parallel()
	stack := newUpStack(t, "bcancel", false)
	ctx := context.Background()
	s := newScheduledBatchStack(t, stack, false)
	client, tbl, prod := s.batches, s.table, s.producer
	cb, err := prod.PrepareRaw(ctx, "album.ready", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	soon, err := prod.PrepareRaw(ctx, "image.resize", []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	later, err := prod.PrepareRaw(ctx, "image.resize", []byte(`{"n":2}`), producer.WithDelay(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	bt, err := client.Start(ctx, batch.Spec{ID: "album-9", Callback: &cb})
	if err != nil {
		t.Fatal(err)
	}
	if err := bt.Add(ctx, prod, soon, later); err != nil {
		t.Fatal(err)
	}
	if err := bt.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if j, err := tbl.GetByID(ctx, later.ID); err != nil || j.State != "scheduled" {
		t.Fatalf("the delayed child: %+v, %v; want scheduled", j, err)
	}
	if info, err := client.Get(ctx, "album-9", 0); err != nil || info.Remaining != 2 || info.State != batch.StateSealed {
		t.Fatalf("batch before the cancel: %+v, %v; want 2 remaining, sealed", info, err)
	}

	tr := newTranscript(t, stack)
	out := tr.must("cancel", later.ID)
	for _, want := range []string{"cancelled job " + later.ID, "deleted its schedule " + schedule.ScheduleName(later.ID), "counted it cancelled in its batch album-9"} {
		if !strings.Contains(out, want) {
			t.Errorf("cancel: no %q in\n%s", want, out)
		}
	}
	info, err := client.Get(ctx, "album-9", 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != batch.StateSealed || info.Cancelled != 1 || info.Remaining != 1 || len(info.NotSucceeded) != 1 || info.NotSucceeded[0] != later.ID {
		t.Errorf("batch after the CLI's cancel: %+v; want sealed, the scheduled child counted cancelled, the queued one remaining", info)
	}
	if n := outboxJobs(t, stack, cb.ID); n != 0 {
		t.Errorf("the callback is %d times in the outbox before the queued child finished, want 0", n)
	}
	// Counted once: the job has finished, so a second cancel is refused and counts nothing.
	tr.run("", "cancel", later.ID)
	if info2, err := client.Get(ctx, "album-9", 0); err != nil || info2.Cancelled != 1 || info2.Remaining != 1 || info2.Total != 2 {
		t.Errorf("batch after a second cancel: %+v, %v; want it counted once", info2, err)
	}
	// The last child, cancelled with the batch's own Cancel, completes the batch: the callback
	// is in the outbox once.
	if _, err := client.Cancel(ctx, "album-9", "done with it"); err != nil {
		t.Fatal(err)
	}
	if info3, err := client.Get(ctx, "album-9", 0); err != nil || info3.State != batch.StateDone || info3.Cancelled != 2 {
		t.Errorf("batch after cancelling its last child: %+v, %v; want done, 2 cancelled", info3, err)
	}
	if n := outboxJobs(t, stack, cb.ID); n != 1 {
		t.Errorf("the callback is %d times in the outbox, want once", n)
	}
}

// scheduledBatchStack is the library side of a stack of `up` for batches with delayed children:
// its batch client, schedule client, job table, and a producer that delays through the
// scheduler and records each job.
type scheduledBatchStack struct {
	batches   *batch.Client
	schedules *schedule.Client
	table     *status.Table
	producer  *producer.Producer
}

// newScheduledBatchStack opens stack's batch, schedule and status clients, and a producer on
// its queue; with groups, the producer counts a cancelled delayed child in its batch
// (producer.Config.Groups).
func newScheduledBatchStack(t *testing.T, stack string, groups bool) scheduledBatchStack {
	t.Helper()
	b := backend(t)
	ddb := b.DynamoDB()
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	var s scheduledBatchStack
	if s.batches, err = batch.New(batch.Config{Client: ddb, Table: awslocal.TableName(stack), Outbox: ob}); err != nil {
		t.Fatal(err)
	}
	url, arn := queueARN(t, awslocal.QueueName(stack, false))
	if s.schedules, err = schedule.NewClient(schedule.Config{Scheduler: scheduler.NewFromConfig(b.Config), Group: awslocal.ScheduleGroupName(stack),
		QueueARN: arn, RoleARN: awslocal.SchedulerRoleARN(stack)}); err != nil {
		t.Fatal(err)
	}
	if s.table, err = status.New(status.Config{Client: ddb, Table: awslocal.TableName(stack)}); err != nil {
		t.Fatal(err)
	}
	cfg := producer.Config{SQS: sqs.NewFromConfig(b.Config), QueueURL: url, Scheduler: s.schedules, Status: s.table}
	if groups {
		cfg.Groups = s.batches
	}
	if s.producer, err = producer.New(cfg); err != nil {
		t.Fatal(err)
	}
	return s
}

// outboxJobs counts the items of the stack's DynamoDB outbox table that carry job id.
func outboxJobs(t *testing.T, stack, id string) int {
	t.Helper()
	out, err := backend(t).DynamoDB().Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(awslocal.OutboxTableName(stack)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, item := range out.Items {
		for _, v := range item {
			if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, id) {
				n++
				break
			}
		}
	}
	return n
}

// TestProducerAndConsoleCountACancelledScheduledChild: producer.Cancel with Config.Groups, and the
// console's Cancel button (whose producer `sqsworker ui` gives the stack's batch client), count a
// batch's delayed child in its batch, as `sqsworker cancel` does; before, both deleted its
// schedule and left the batch waiting for a delivery that would never come.
func TestProducerAndConsoleCountACancelledScheduledChild(t *testing.T) {
	t.Parallel()
	stack := newUpStack(t, "bcancel2", false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := backend(t)
	s := newScheduledBatchStack(t, stack, true)
	client, sc, prod := s.batches, s.schedules, s.producer
	cb, err := prod.PrepareRaw(ctx, "album.ready", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var children []producer.Message
	for n := range 3 {
		m, err := prod.PrepareRaw(ctx, "image.resize", []byte(`{"n":`+strconv.Itoa(n)+`}`), producer.WithDelay(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, m)
	}
	bt, err := client.Start(ctx, batch.Spec{ID: "album-10", Callback: &cb})
	if err != nil {
		t.Fatal(err)
	}
	if err := bt.Add(ctx, prod, children...); err != nil {
		t.Fatal(err)
	}
	if err := bt.Seal(ctx); err != nil {
		t.Fatal(err)
	}

	if err := prod.Cancel(ctx, "image.resize", "", children[0].ID); err != nil {
		t.Fatal(err)
	}
	if info, err := client.Get(ctx, "album-10", 0); err != nil || info.Cancelled != 1 || info.Remaining != 2 {
		t.Fatalf("batch after producer.Cancel: %+v, %v; want 1 cancelled, 2 remaining", info, err)
	}
	if _, err := sc.GetJob(ctx, children[0].ID); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("the cancelled child's schedule: %v, want deleted", err)
	}

	var stdout, stderr syncBuffer
	const tok = "cli-test-token-0123456789"
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--stack", stack, "--endpoint", b.URL, "--addr", "127.0.0.1:0", "--token", tok}, &stdout, &stderr)
	}()
	var base string
	waitFor(t, time.Minute, "the console's address", func() bool {
		select {
		case code := <-done:
			t.Fatalf("ui exited %d\n%s\n%s", code, stdout.String(), stderr.String())
		default:
		}
		if m := consoleLine.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
		}
		return base != ""
	})
	form := neturl.Values{"kind": {"image.resize"}, "key": {children[1].ID}, "id": {children[1].ID}}
	if code := uiPost(t, base+"job/cancel", tok, form); code != http.StatusSeeOther {
		t.Fatalf("the console's cancel: %d\n%s", code, stderr.String())
	}
	if info, err := client.Get(ctx, "album-10", 0); err != nil || info.Cancelled != 2 || info.Remaining != 1 || info.State != batch.StateSealed {
		t.Errorf("batch after the console's cancel: %+v, %v; want 2 cancelled, 1 remaining, sealed", info, err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ui did not stop")
	}
}
