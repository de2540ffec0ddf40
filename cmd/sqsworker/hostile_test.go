package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Hostile text, as anyone who can send to the queue or write to the table may store it: a
// window-title change, a screen clear, a carriage return that overwrites what was printed, a
// right-to-left override, a C1 control sequence introducer (U+009B) and DEL.
const (
	hTitle   = "\x1b]0;pwned\x07"
	hClear   = "\x1b[2J"
	hRLO     = "\u202e"
	hostile  = hTitle + "evil" + hClear + "\r" + hRLO + "exe.pdf\u009b31m\x7f"
	hJSONStr = `\u001b]0;pwned\u0007evil\u001b[2J\r` + hRLO + `exe.pdf` // the same as a JSON string's text (SQS bodies take no raw C0)
)

// rawTerminal reports the first character of s a terminal would act on, judged by the unicode
// package's tables (not internal/termsafe's): a control character other than the newline that
// ends each line, a bidirectional control, a line or paragraph separator, or a byte that is not
// UTF-8.
func rawTerminal(s string) (rune, bool) {
	if !utf8.ValidString(s) {
		return utf8.RuneError, true
	}
	for _, r := range s {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			return r, true
		}
	}
	return 0, false
}

// cutEscape matches an escape cut short by a truncation: `\x1` or `\u20` right before "…".
var cutEscape = regexp.MustCompile(`\\(x[0-9a-f]?|u[0-9a-f]{0,3})…`)

// TestHostileJobDataIsEscaped runs every command that prints job data, in table form, over
// records, dead letters, schedules and outbox entries full of terminal control sequences and bidi
// overrides: nothing reaches the terminal raw, the data is shown escaped (`\x1b`, `\u202e`), and
// no truncation cuts an escape in half. JSON output keeps the data as it is.
func TestHostileJobDataIsEscaped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack, sc, sch := newScheduleStack(t)
	b := backend(t)

	// Job records: a hostile key, error and reason on a plain id; a hostile id and kind; and an
	// error whose 60th rune falls inside an escape.
	seedRecords(t, stack,
		seed{kind: "email.send", key: "k-" + hostile, id: "job-hostile", state: idempotency.StateDead, runs: 2,
			err: hostile + "\n\tat " + hostile, reason: "exhausted" + hClear},
		seed{kind: "evil" + hClear + ".kind", key: "k2", id: "id-" + hTitle, state: idempotency.StateDead, runs: 1, err: "x", reason: "cancelled"},
		seed{kind: "email.send", key: "k3", id: "job-cut", state: idempotency.StateDead, runs: 1,
			err: strings.Repeat("x", 57) + hClear + hClear, reason: "exhausted"},
	)

	// Dead letters: an envelope with hostile args, attribute and failure; a body that is not an
	// envelope, with a hostile id and kind in its failure attribute.
	client := sqs.NewFromConfig(b.Config)
	dlqURL, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.DLQName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	failure := func(id, kind string) string {
		f, _ := json.Marshal(worker.Failure{Reason: "exhausted" + hRLO, Error: hostile + "\nsecond " + hostile, Attempts: 3, Kind: kind, JobID: id,
			FailedAt: "2025-03-14T09:30:00.000Z", SourceQueue: "arn:aws:sqs:us-east-1:000000000000:q" + hTitle})
		return string(f)
	}
	if out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: dlqURL.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String(`{"v":1,"id":"dl-hostile","kind":"email.send","args":{"name":"` + hJSONStr + `"},"enqueued_at":"2025-03-14T09:00:00.000Z"}`),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				"tenant":                {DataType: aws.String("String"), StringValue: aws.String("acme\r" + hRLO + "\u009b[2J")},
				worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(failure("", ""))},
			}},
		{Id: aws.String("b"), MessageBody: aws.String("not an envelope \r" + hRLO + "\u009b[2J"),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(failure("dl-2"+hTitle, "k"+hClear))},
			}},
	}}); err != nil || len(out.Failed) > 0 {
		t.Fatalf("seed the DLQ: %v %+v", err, out)
	}

	// A recurring schedule written by someone else through the Scheduler API: a hostile kind,
	// args, description and message group in a template this client reads back.
	name := "hostile-sched"
	input := `{"v":1,"id":"<aws.scheduler.execution-id>","kind":"\u001b]0;pwned\u0007","args":{"a":"` + hJSONStr + `"},` +
		`"key":"` + name + `@<aws.scheduler.scheduled-time>","enqueued_at":"<aws.scheduler.scheduled-time>","meta":{"schedule":"` + name + `"}}`
	queueARN := "arn:aws:sqs:us-east-1:000000000000:" + awslocal.QueueName(stack, false)
	if r, err := sc.Get(ctx, "nope"); err == nil {
		t.Fatalf("Get nope = %+v", r)
	}
	if _, err := sch.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(name), GroupName: aws.String(sc.Group()), ScheduleExpression: aws.String("rate(5 minutes)"),
		Description:        aws.String("desc " + hostile),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target:             &schedtypes.Target{Arn: aws.String(queueARN), RoleArn: aws.String(awslocal.SchedulerRoleARN(stack)), Input: aws.String(input)},
	}); err != nil {
		t.Fatal(err)
	}
	if r, err := sc.Get(ctx, name); err != nil || !strings.Contains(r.Kind, "\x1b") {
		t.Fatalf("the hostile schedule does not read back as a recurring one: %+v, %v", r, err)
	}

	// The outbox: a job with a hostile key, dead with a hostile error; another claimed by a
	// relay with a hostile id.
	table := awslocal.OutboxTableName(stack)
	if _, err := dynamooutbox.CreateTable(ctx, b.DynamoDB(), table); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: b.DynamoDB(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	q, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: client, QueueURL: aws.ToString(q.QueueUrl)})
	if err != nil {
		t.Fatal(err)
	}
	var obIDs []string
	for _, key := range []string{"ob-" + hostile, "ob-2" + hRLO} {
		j, err := ob.Prepare(ctx, p, outboxEmail{To: hostile}, producer.WithKey(key))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ob.Transact(ctx, nil, j); err != nil {
			t.Fatal(err)
		}
		obIDs = append(obIDs, j.ID())
	}
	now := time.Now()
	if claimed, err := ob.Claim(ctx, outbox.Claim{Owner: "relay" + hClear, Max: 10, Now: now, Until: now.Add(time.Hour)}); err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	if err := ob.Complete(ctx, "relay"+hClear, []outbox.Outcome{{ID: obIDs[0], Attempts: 1, Dead: true, Error: hostile}}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		args []string
		// shows is what the output must hold: the hostile data, escaped.
		shows []string
		code  int
	}{
		{"jobs", []string{"jobs", "--status", "dead"}, []string{`k-\x1b]0;pwned\x07evil`, `evil\x1b[2J.kind`, `id-\x1b]0;pwned\x07`, `exhausted\x1b[2J`}, 0},
		{"status by id", []string{"status", "job-hostile"}, []string{`k-\x1b]0;pwned\x07evil\x1b[2J\r\u202eexe.pdf\u009b31m\x7f`, `    at \x1b]0;pwned`}, 0},
		{"status by key", []string{"status", "email.send/k-" + hostile}, []string{`job-hostile`, `exhausted\x1b[2J`}, 0},
		{"usage error", []string{"status", "Evil" + hClear + "/k"}, []string{`Evil\x1b[2J`}, 2},
		{"dlq list", []string{"dlq", "list"}, []string{`dl-2\x1b]0;pwned\x07`, `k\x1b[2J`, `exhausted\u202e`, `\x1b]0;pwned\x07evil`}, 0},
		{"dlq show envelope", []string{"dlq", "show", "dl-hostile"}, []string{`tenant=acme\r\u202e\u009b[2J`, `second \x1b]0;pwned`, `q\x1b]0;pwned\x07`, `\u202eexe.pdf`}, 0},
		{"dlq show not an envelope", []string{"dlq", "show", "dl-2" + hTitle}, []string{`not an envelope \r\u202e\u009b[2J`}, 0},
		{"dlq show missing", []string{"dlq", "show", "nope" + hTitle}, []string{`nope\x1b]0;pwned`}, 1},
		{"schedules list", []string{"schedules", "list"}, []string{`\x1b]0;pwned\x07`}, 0},
		{"schedules show", []string{"schedules", "show", name}, []string{`desc \x1b]0;pwned\x07evil`, `\u202eexe.pdf`}, 0},
		{"outbox list dead", []string{"outbox", "list", "--state", "dead"}, []string{`ob-\x1b]0;pwned`, `\x1b]0;pwned\x07evil`}, 0},
		{"outbox list pending", []string{"outbox", "list"}, []string{`ob-2\u202e`, `claimed by relay\x1b[2J`}, 0},
		{"outbox show dead", []string{"outbox", "show", obIDs[0]}, []string{`ob-\x1b]0;pwned\x07evil`, `last error  \x1b]0;pwned\x07evil`}, 0},
		{"outbox show claimed", []string{"outbox", "show", obIDs[1]}, []string{`ob-2\u202e`, `claimed by  relay\x1b[2J`}, 0},
		{"enqueue", []string{"enqueue", "email.send", `{}`, "--key", "q-" + hostile}, []string{`q-\x1b]0;pwned\x07evil`}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			full := append(append([]string{}, tt.args...), "--stack", stack, "--endpoint", b.URL)
			var out, errOut bytes.Buffer
			code := run(ctx, full, &out, &errOut)
			all := out.String() + errOut.String()
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s", code, tt.code, all)
			}
			if r, ok := rawTerminal(all); ok {
				t.Errorf("the output holds a raw %U:\n%q", r, all)
			}
			for _, want := range tt.shows {
				if !strings.Contains(all, want) {
					t.Errorf("the output lacks %s:\n%s", want, all)
				}
			}
			if m := cutEscape.FindString(all); m != "" {
				t.Errorf("a truncation cut an escape in half (%s):\n%s", m, all)
			}
		})
	}

	// JSON output stays as it is: the data round-trips.
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"status", "job-hostile", "-o", "json", "--stack", stack, "--endpoint", b.URL}, &out, &errOut); code != 0 {
		t.Fatalf("status -o json: %d %s", code, errOut.String())
	}
	var doc jobJSON
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Key != "k-"+hostile || doc.LastError != hostile+"\n\tat "+hostile {
		t.Errorf("status -o json: %v, key %q, last error %q", err, doc.Key, doc.LastError)
	}
}
