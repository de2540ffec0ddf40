package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// TestFlowCommandsGolden pauses and resumes a kind and the stack's queue, and lists the pauses and
// the limits with their holders, on the emulator; a hostile note and key are shown escaped.
func TestFlowCommandsGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "flow", false)
	b := backend(t)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	// Limit items as workers leave them: two holders of a tenant's webhooks (one whose lease
	// ended: a holder that died), a key with a terminal escape and a bidi override in it, and a
	// rate limit's bucket.
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []flow.SlotRequest{
		{Name: "webhook.deliver", Key: "tenant-a", Limit: 3, JobID: "01JDQ3ZV5XG8K2M4N6P8R0T2V6", LeaseUntil: time.Now().Add(-time.Hour), Now: time.Now().Add(-2 * time.Hour)},
		{Name: "webhook.deliver", Key: "tenant-a", Limit: 3, JobID: "01JDQ3ZV5XG8K2M4N6P8R0T2V5", LeaseUntil: at.Add(time.Minute), Now: at},
		{Name: "webhook.deliver", Key: "evil\x1b[31m\u202e", Limit: 3, JobID: "01JDQ3ZV5XG8K2M4N6P8R0T2V7", LeaseUntil: at.Add(time.Minute), Now: at},
	} {
		if res, err := tbl.AcquireSlot(ctx, r); err != nil || !res.Acquired {
			t.Fatalf("acquire: %+v, %v", res, err)
		}
	}
	if _, err := tbl.TakeToken(ctx, flow.TokenRequest{Name: "email.send", Limit: 10, Period: time.Second, Burst: 5, Now: at}); err != nil {
		t.Fatal(err)
	}
	tr := newTranscript(t, stack)
	tr.must("limits")
	tr.must("pause", "email.send", "--note", "provider outage \u202etxt.exe", "--by", "ops")
	tr.must("pause", "--queue", awslocal.QueueName(stack, false), "--by", "ops")
	out := tr.must("limits", "--output", "json")
	tr.must("limits", "--type", "concurrency", "--name", "webhook.deliver")
	tr.must("resume", "email.send")
	tr.must("resume", "email.send")
	tr.must("resume", "--queue", awslocal.QueueName(stack, false))
	tr.run("", "pause", "Bad Kind")
	tr.run("", "pause")
	tr.run("", "pause", "a.b", "--queue", "q")
	tr.run("", "limits", "--type", "bogus")
	tr.check("flow")

	var doc struct {
		PausedKinds []struct{ Kind, Note string } `json:"paused_kinds"`
		Limits      []struct {
			Type, Key string
			Holders   []struct{ Expired bool } `json:"holders"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.PausedKinds) != 1 || doc.PausedKinds[0].Note != "provider outage \u202etxt.exe" {
		t.Errorf("JSON keeps the note as given: %+v", doc.PausedKinds)
	}
	if len(doc.Limits) != 3 {
		t.Errorf("JSON lists %d limit items, want 3", len(doc.Limits))
	}
	if p, _ := tbl.Pauses(ctx); len(p.Kinds)+len(p.Queues) != 0 {
		t.Errorf("after resume: %+v", p)
	}
}

func TestFlowHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"pause", "--help"}, {"resume", "--help"}, {"limits", "--help"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		if _, ex, ok := strings.Cut(out.String(), "Examples:\n"); !ok || !strings.Contains(ex, "sqsworker "+args[0]) {
			t.Errorf("%v: no examples:\n%s", args, out.String())
		}
	}
}

// TestPauseQueueOfSeveral: on a stack of several queues, pause --queue and resume --queue take a
// queue's name in the stack (as enqueue, dlq and queues take it) or its SQS name, and record the
// pause under the SQS name, which is what the poller gate of that queue (sqsworker run's, one per
// queue) reads: the paused queue stops, the stack's other queues go on. A queue the stack does not
// have is an error that lists the stack's queues.
func TestPauseQueueOfSeveral(t *testing.T) {
	t.Parallel()
	stack := fmt.Sprintf("cli-pauseq-%03d", stackSeq.Add(1))
	tr := newTranscript(t, stack)
	tr.must("up", "--queue", "critical", "--queue", "bulk")
	b := backend(t)
	ctx := context.Background()
	client := sqs.NewFromConfig(b.Config)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	// paused answers as the poller of sqsworker run does for the queue named name (a fresh gate
	// reads the table).
	paused := func(name string) bool {
		t.Helper()
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queues.SQSName(stack, name, false))})
		if err != nil {
			t.Fatal(err)
		}
		return queueGate(ddb, awslocal.TableName(stack), aws.ToString(out.QueueUrl))(ctx)
	}
	for _, step := range []struct {
		args []string
		want map[string]bool // queue → paused
	}{
		{[]string{"pause", "--queue", "bulk", "--note", "import stuck"}, map[string]bool{"bulk": true}},
		{[]string{"resume", "--queue", "bulk"}, map[string]bool{}},
		{[]string{"pause", "--queue", "default"}, map[string]bool{"default": true}},
		{[]string{"resume", "--queue", stack + "-jobs"}, map[string]bool{}}, // by its SQS name
		{[]string{"pause", "--queue", stack + "-jobs-critical"}, map[string]bool{"critical": true}},
		{[]string{"resume", "--queue", "critical"}, map[string]bool{}},
	} {
		out := tr.must(step.args...)
		if !strings.Contains(out, stack+"-jobs") {
			t.Errorf("%v: the output does not name the queue's SQS name:\n%s", step.args, out)
		}
		for _, q := range []string{"default", "critical", "bulk"} {
			if got := paused(q); got != step.want[q] {
				t.Errorf("after %v: queue %s paused = %v, want %v", step.args, q, got, step.want[q])
			}
		}
	}
	if _, code := tr.run("", "pause", "--queue", "urgent"); code != exitError {
		t.Errorf("pause --queue urgent: exit %d, want %d", code, exitError)
	}
	if !strings.Contains(tr.buf.String(), `has no queue "urgent"`) || !strings.Contains(tr.buf.String(), "its queues: default, bulk, critical") {
		t.Errorf("the error does not name the stack's queues:\n%s", tr.buf.String())
	}
	// A name no queue can have: a usage error that says what a name may be.
	if _, code := tr.run("", "resume", "--queue", "bad!"); code != exitUsage {
		t.Errorf("resume --queue bad!: exit %d, want %d", code, exitUsage)
	}
	if want := `--queue: queue name "bad!": want 1-80 letters, digits`; !strings.Contains(tr.buf.String(), want) {
		t.Errorf("the error does not say %q:\n%s", want, tr.buf.String())
	}
}

// TestLimitsEscapesWhatTheTableHolds: limits prints the names the table holds (a paused kind or
// queue, a limit's name) escaped, as it prints keys and notes, whoever wrote them: no terminal
// control sequence or bidi override reaches the terminal.
func TestLimitsEscapesWhatTheTableHolds(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "flowesc", false)
	b := backend(t)
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := awslocal.TableName(stack)
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := tbl.AcquireSlot(ctx, flow.SlotRequest{Name: "n" + hostile, Key: "k", Limit: 2, JobID: "01JDQ3ZV5XG8K2M4N6P8R0T2V5", LeaseUntil: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.TakeToken(ctx, flow.TokenRequest{Name: "r" + hostile, Limit: 1, Period: time.Second, Burst: 1, Now: now}); err != nil {
		t.Fatal(err)
	}
	// Pauses as another writer of the table may leave them (PauseKind and PauseQueue check names).
	for attr, p := range map[string]string{
		"k_" + hex.EncodeToString([]byte("k"+hostile)): `{"at":"2030-01-02T03:04:05Z"}`,
		"q_" + hex.EncodeToString([]byte("q"+hostile)): `{"at":"2030-01-02T03:04:05Z"}`,
	} {
		if _, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: flow.PauseKey}},
			UpdateExpression:          aws.String("SET #a = :v"),
			ExpressionAttributeNames:  map[string]string{"#a": attr},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": &ddbtypes.AttributeValueMemberS{Value: p}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	out := newTranscript(t, stack).must("limits")
	if r, bad := rawTerminal(out); bad {
		t.Errorf("limits printed %U raw:\n%q", r, out)
	}
	for _, want := range []string{`k\x1b]0;pwned`, `q\x1b]0;pwned`, `n\x1b]0;pwned`, `r\x1b]0;pwned`} {
		if !strings.Contains(out, want) {
			t.Errorf("limits does not show %s escaped:\n%s", want, out)
		}
	}
}
