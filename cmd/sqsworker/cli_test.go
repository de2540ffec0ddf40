package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestMain(m *testing.M) {
	// The commands talk to the embedded emulator through --endpoint, as to any endpoint: give
	// them credentials (so the SDK probes no instance metadata) and one attempt per call (so an
	// unreachable endpoint fails at once).
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_MAX_ATTEMPTS": "1", "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1",
	} {
		os.Setenv(k, v)
	}
	pgtest.Main(m) // runs the tests, then stops the PostgreSQL server the outbox tests started
}

// backend is the process's embedded emulator; the commands reach it by its URL.
func backend(t *testing.T) *awslocal.Backend {
	t.Helper()
	b := awslocaltest.Backend(t)
	return b
}

var stackSeq atomic.Int32

// newStack provisions a stack (queues and table) on the emulator. Its name has a fixed length
// (the emulator keeps state for the whole process, so names must not repeat), which keeps
// tabwriter's columns the same from run to run; transcripts show it as STACK.
func newStack(t *testing.T, base string, fifo bool) string {
	t.Helper()
	b := backend(t)
	name := fmt.Sprintf("cli-%s-%03d", base, stackSeq.Add(1))
	ctx := context.Background()
	if _, err := awslocal.Provision(ctx, sqs.NewFromConfig(b.Config), awslocal.StackOptions{Name: name, FIFO: fifo}); err != nil {
		t.Fatal(err)
	}
	if _, err := awslocal.ProvisionTable(ctx, b.DynamoDB(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// transcript runs commands against one stack and records them, normalized, for a golden file.
type transcript struct {
	t     *testing.T
	stack string
	buf   bytes.Buffer
	norm  *normalizer
}

func newTranscript(t *testing.T, stack string) *transcript {
	return &transcript{t: t, stack: stack, norm: newNormalizer(backend(t).URL, stack)}
}

// run runs `sqsworker args… --stack STACK --endpoint URL` and records the command line (without
// those two flags), its stdout, its stderr and a non-zero exit code. It returns the raw stdout.
func (tr *transcript) run(stdin string, args ...string) (string, int) {
	tr.t.Helper()
	full := append(append([]string{}, args...), "--endpoint", backend(tr.t).URL)
	if tr.stack != "" {
		full = append(full, "--stack", tr.stack)
	}
	var out, errOut bytes.Buffer
	code := runWithInput(context.Background(), full, strings.NewReader(stdin), &out, &errOut)
	shown := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " {}\"'") || a == "" {
			a = "'" + a + "'"
		}
		shown[i] = a
	}
	fmt.Fprintf(&tr.buf, "$ sqsworker %s\n", strings.Join(shown, " "))
	tr.buf.WriteString(out.String())
	if errOut.Len() > 0 {
		fmt.Fprintf(&tr.buf, "[stderr]\n%s", errOut.String())
	}
	if code != 0 {
		fmt.Fprintf(&tr.buf, "[exit %d]\n", code)
	}
	tr.buf.WriteString("\n")
	return out.String(), code
}

// must runs a command that must succeed.
func (tr *transcript) must(args ...string) string {
	tr.t.Helper()
	out, code := tr.run("", args...)
	if code != 0 {
		tr.t.Fatalf("sqsworker %v: exit %d\n%s", args, code, tr.buf.String())
	}
	return out
}

// check compares the normalized transcript with testdata/<name>.golden (rewritten with -update).
func (tr *transcript) check(name string) {
	tr.t.Helper()
	got := tr.norm.apply(tr.buf.String())
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			tr.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tr.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tr.t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		tr.t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// normalizer replaces the values that change from run to run: the endpoint's URL, the stack
// name, ULIDs and message ids (numbered by first appearance, so that a repeated id is seen to
// repeat), times within 60 days of now (seeded times are fixed, far from now, and kept), page
// tokens, FIFO sequence numbers and receive counts.
type normalizer struct {
	endpoint, stack string
}

func newNormalizer(endpoint, stack string) *normalizer { return &normalizer{endpoint, stack} }

var (
	reULID  = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	reUUID  = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reTime  = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	reToken = regexp.MustCompile(`(--page |"next_page_token": ")[A-Za-z0-9_-]{20,}`)
	reSeq   = regexp.MustCompile(`(sequence\s+|"sequence_number": ")\d+`)
	// A dead letter's receive count depends on how the dlq package scans the queue.
	reReceives = regexp.MustCompile(`(receives\s+|"receive_count": )\d+`)
)

func (n *normalizer) apply(s string) string {
	s = strings.ReplaceAll(s, n.endpoint, "ENDPOINT")
	if n.stack != "" {
		s = strings.ReplaceAll(s, n.stack, "STACK")
	}
	s = numbered(s, reULID, "ID")
	s = numbered(s, reUUID, "MSG")
	now := time.Now()
	s = reTime.ReplaceAllStringFunc(s, func(m string) string {
		t, err := time.Parse(time.RFC3339Nano, m)
		if err == nil && t.Sub(now).Abs() < 60*24*time.Hour { // now, and expiries counted from now
			return "<TIME>"
		}
		return m
	})
	s = reReceives.ReplaceAllString(s, "${1}<N>")
	s = reToken.ReplaceAllString(s, "${1}<TOKEN>")
	s = reSeq.ReplaceAllString(s, "${1}<SEQ>")
	return s
}

// numbered replaces each distinct match of re by <prefixN>.
func numbered(s string, re *regexp.Regexp, prefix string) string {
	seen := map[string]string{}
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if r, ok := seen[m]; ok {
			return r
		}
		r := fmt.Sprintf("<%s%d>", prefix, len(seen)+1)
		seen[m] = r
		return r
	})
}

// receiveAll reads the messages waiting in a queue (without deleting them).
func receiveAll(t *testing.T, queue string) []sqstypes.Message {
	t.Helper()
	client := sqs.NewFromConfig(backend(t).Config)
	ctx := context.Background()
	url, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: url.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func TestEnqueueGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "enqueue", false)
	tr := newTranscript(t, stack)
	out := tr.must("enqueue", "email.send", `{"to":"a@b.c"}`)
	tr.must("enqueue", "email.send", `{ "to": "x@y.z", "subject": "<hi> & bye" }`, "--key", "order-42-welcome", "--delay", "0s", "--max-attempts", "3", "--output", "json")
	tr.run(`{"month":"2026-11"}`, "enqueue", "report.build", "-", "--group", "tenant-7")
	// The queued records: by id (through the by_id index) and by key.
	id := strings.Fields(strings.Split(out, "\n")[1])[2]
	tr.must("status", id)
	tr.must("status", "email.send/order-42-welcome", "-o", "json")
	// A delay SQS cannot express goes through a schedule, in a group this stack (made without
	// `up`) lacks: the error says how to create it (TestEnqueueDelayThroughScheduler has one).
	tr.run("", "enqueue", "email.send", `{}`, "--delay", "16m")
	tr.check("enqueue")

	msgs := receiveAll(t, awslocal.QueueName(stack, false))
	if len(msgs) != 3 {
		t.Fatalf("%d messages on the queue, want 3", len(msgs))
	}
	found := false
	for _, m := range msgs {
		env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
		if err != nil {
			t.Fatalf("body %s: %v", aws.ToString(m.Body), err)
		}
		if env.Key == "order-42-welcome" {
			found = true
			if env.Kind != "email.send" || string(env.Args) != `{"to":"x@y.z","subject":"<hi> & bye"}` || env.MaxAttempts != 3 {
				t.Errorf("envelope = %+v (args %s)", env, env.Args)
			}
		}
	}
	if !found {
		t.Error("the job with key order-42-welcome is not on the queue")
	}
}

func TestEnqueueFIFOGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "fifo", true)
	tr := newTranscript(t, stack)
	tr.run("", "enqueue", "email.send", `{"to":"a@b.c"}`) // no --group
	tr.must("enqueue", "email.send", `{"to":"a@b.c"}`, "--group", "tenant-7", "--key", "k-1")
	// Any delay on a FIFO queue goes through a schedule; this stack has no schedule group.
	tr.run("", "enqueue", "email.send", `{"to":"a@b.c"}`, "--group", "tenant-7", "--delay", "5s")
	tr.check("enqueue_fifo")
}

// seedRecords writes job records as the worker's idempotency store does: claimed at a fixed
// time, then finished in the given state.
func seedRecords(t *testing.T, stack string, recs ...seed) {
	t.Helper()
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: backend(t).DynamoDB(), Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := time.Date(2025, 3, 14, 9, 26, 53, 589_000_000, time.UTC)
	expires := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range recs {
		at := base.Add(time.Duration(i) * time.Minute)
		for run := 1; run <= max(1, r.runs); run++ {
			tok := fmt.Sprintf("t%d", run)
			claimAt := at.Add(time.Duration(run-1) * time.Second)
			res, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: r.kind, Key: r.key, JobID: r.id, Token: tok,
				Now: claimAt, LeaseUntil: claimAt.Add(time.Minute), ExpiresAt: expires})
			if err != nil || !res.Claimed {
				t.Fatalf("claim %s/%s: %v %+v", r.kind, r.key, err, res)
			}
			state, errText := r.state, r.err
			if run < r.runs {
				state = idempotency.StateRetrying
			}
			if state == idempotency.StateRunning {
				break
			}
			if err := store.Finish(ctx, idempotency.Finish{Kind: r.kind, Key: r.key, JobID: r.id, Token: tok, State: state, Error: errText,
				Reason: r.reason, Now: claimAt.Add(500 * time.Millisecond), ExpiresAt: expires}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type seed struct {
	kind, key, id string
	state         idempotency.State
	runs          int
	err, reason   string
}

func TestStatusGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "status", false)
	seedRecords(t, stack,
		seed{kind: "email.send", key: "order-41", id: "job-order-41", state: idempotency.StateDead, runs: 5,
			err: "smtp: 550 mailbox unavailable\n\tat mailer.Send", reason: "exhausted"},
		seed{kind: "email.send", key: "order-42", id: "job-order-42", state: idempotency.StateSucceeded, runs: 2, err: "smtp: timeout"},
		seed{kind: "report.build", key: "2026/11", id: "job-report", state: idempotency.StateRunning, runs: 1},
	)
	tr := newTranscript(t, stack)
	tr.must("status", "job-order-41")
	tr.must("status", "email.send/order-42")
	tr.must("status", "report.build/2026/11")
	tr.must("status", "job-order-41", "--output", "json")
	tr.run("", "status", "job-nope")
	tr.run("", "status", "email.send/order-99")
	tr.check("status")
}

func TestJobsGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "jobs", false)
	seedRecords(t, stack,
		seed{kind: "email.send", key: "order-40", id: "job-order-40", state: idempotency.StateDead, runs: 5, err: "smtp: 550 mailbox unavailable", reason: "exhausted"},
		seed{kind: "email.send", key: "order-41", id: "job-order-41", state: idempotency.StateDead, runs: 1, err: "bad address", reason: "cancelled"},
		seed{kind: "report.build", key: "2026-11", id: "job-report", state: idempotency.StateDead, runs: 3,
			err: "query timeout: " + strings.Repeat("x", 80), reason: "exhausted"},
		seed{kind: "email.send", key: "order-43", id: "job-order-43", state: idempotency.StateRetrying, runs: 1, err: "smtp: 421 try again later"},
	)
	tr := newTranscript(t, stack)
	out := tr.must("jobs", "--status", "dead", "--limit", "2")
	m := regexp.MustCompile(`--page (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no next page token in:\n%s", out)
	}
	tr.must("jobs", "--status", "dead", "--limit", "2", "--page", m[1])
	tr.must("jobs", "--status", "dead", "--kind", "email.send")
	tr.must("jobs", "--status", "retrying", "--output", "json")
	tr.must("jobs", "--status", "scheduled")
	tr.run("", "jobs", "--status", "retrying", "--page", m[1]) // a token of another listing
	tr.run("", "jobs", "--status", "dead", "--page", "garbage")
	tr.run("", "jobs", "--status", "dead", "--page", m[1][:len(m[1])/2]) // cut short
	// Bad tokens are explained in the CLI's words, not the library's (ListQuery.PageToken) nor
	// with the bytes a JSON decoder choked on.
	if s := tr.buf.String(); strings.Contains(s, "ListQuery") || strings.Contains(s, `\u`) {
		t.Errorf("the CLI quotes the library's error:\n%s", s)
	}
	tr.check("jobs")
}

// deadLetter is a message as the worker dead-letters it: the original envelope, plus the
// failure attribute.
func deadLetter(kind, id string, f *worker.Failure) sqstypes.SendMessageBatchRequestEntry {
	body := fmt.Sprintf(`{"v":1,"id":%q,"kind":%q,"args":{"n":1},"enqueued_at":"2025-03-14T09:00:00.000Z"}`, id, kind)
	e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
		}}
	if f != nil {
		v, _ := json.Marshal(f)
		e.MessageAttributes[worker.FailureAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(v))}
	}
	return e
}

func TestDLQGolden(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "dlq", false)
	b := backend(t)
	client := sqs.NewFromConfig(b.Config)
	ctx := context.Background()
	dlqURL, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.DLQName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	failure := func(reason, kind, id, errText string, attempts int) *worker.Failure {
		return &worker.Failure{Reason: reason, Error: errText, Attempts: attempts, Kind: kind, JobID: id,
			FailedAt: "2025-03-14T09:30:00.000Z", SourceMessageID: "src-" + id, SourceQueue: "arn:aws:sqs:us-east-1:000000000000:" + awslocal.QueueName(stack, false)}
	}
	seedRecords(t, stack,
		seed{kind: "email.send", key: "job-a", id: "job-a", state: idempotency.StateDead, runs: 5, err: "smtp: 550 mailbox unavailable", reason: "exhausted"})
	out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: dlqURL.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		deadLetter("email.send", "job-a", failure("exhausted", "email.send", "job-a", "smtp: 550 mailbox unavailable\nsecond line", 5)),
		deadLetter("email.send", "job-b", failure("cancelled", "email.send", "job-b", "bad address", 1)),
		deadLetter("report.build", "job-c", nil), // moved by the redrive policy: no failure attribute
	}})
	if err != nil || len(out.Failed) > 0 {
		t.Fatalf("seed the DLQ: %v %+v", err, out.Failed)
	}

	tr := newTranscript(t, stack)
	tr.must("dlq", "list")
	one := tr.must("dlq", "list", "--output", "json")
	var doc dlqListJSON
	if err := json.Unmarshal([]byte(one), &doc); err != nil || len(doc.Messages) != 3 {
		t.Fatalf("dlq list --output json: %v, %d messages", err, len(doc.Messages))
	}
	jobB := ""
	for _, m := range doc.Messages {
		if m.JobID == "job-b" {
			jobB = m.MessageID
		}
	}
	var out1, err1 bytes.Buffer
	if code := run(ctx, []string{"dlq", "list", "--max", "1", "-o", "json", "--stack", stack, "--endpoint", b.URL}, &out1, &err1); code != 0 {
		t.Fatalf("dlq list --max 1: exit %d: %s", code, err1.String())
	}
	if err := json.Unmarshal(out1.Bytes(), &doc); err != nil || len(doc.Messages) != 1 {
		t.Errorf("dlq list --max 1: %v, %d messages, want 1", err, len(doc.Messages))
	}
	tr.must("dlq", "show", "job-a")
	tr.must("dlq", "show", "job-b", "-o", "json")
	tr.run("", "dlq", "show", "job-nope")
	// One dead letter deleted by its message id; then it is gone.
	tr.must("dlq", "purge", "--message", jobB)
	tr.run("", "dlq", "purge", "--message", jobB)
	tr.run("", "dlq", "purge", "--message", jobB, "--confirm", awslocal.DLQName(stack, false))
	tr.must("dlq", "redrive", "--job", "job-a")
	tr.must("status", "job-a") // its record was reset for the redrive
	tr.must("dlq", "redrive")
	tr.must("dlq", "list")
	tr.run("", "dlq", "purge")
	tr.run("", "dlq", "purge", "--confirm", awslocal.QueueName(stack, false))
	tr.must("dlq", "purge", "--confirm", awslocal.DLQName(stack, false))
	tr.check("dlq")

	if n := len(receiveAll(t, awslocal.QueueName(stack, false))); n != 2 {
		t.Errorf("%d messages back on the job queue, want 2 (job-b was purged)", n)
	}
}

// TestFriendlyErrors: what a user meets first, with an endpoint but no stack, or no endpoint.
func TestFriendlyErrors(t *testing.T) {
	t.Parallel()
	stack := fmt.Sprintf("cli-missing-%03d", stackSeq.Add(1))
	tr := newTranscript(t, stack)
	tr.run("", "enqueue", "email.send", `{}`)
	tr.run("", "status", "job-1")
	tr.run("", "jobs", "--status", "dead")
	tr.run("", "dlq", "list")
	// A stack with queues but no table.
	noTable := fmt.Sprintf("cli-notable-%03d", stackSeq.Add(1))
	if _, err := awslocal.Provision(context.Background(), sqs.NewFromConfig(backend(t).Config), awslocal.StackOptions{Name: noTable}); err != nil {
		t.Fatal(err)
	}
	tr2 := newTranscript(t, noTable)
	tr2.run("", "status", "job-1")
	tr2.must("enqueue", "email.send", `{}`) // works without the table, records nothing
	tr.buf.WriteString(tr2.norm.apply(tr2.buf.String()))

	// An endpoint nobody listens on.
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"jobs", "--status", "dead", "--stack", "x", "--endpoint", "http://127.0.0.1:1"}, &out, &errOut)
	fmt.Fprintf(&tr.buf, "$ sqsworker jobs --status dead --stack x --endpoint http://127.0.0.1:1\n[stderr]\n%s[exit %d]\n", errOut.String(), code)
	tr.check("errors")
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	p := newProgressAt(&buf, "redrive", true, clock)
	p.update(0, 25)
	at = at.Add(4 * time.Second)
	p.update(10, 25)
	at = at.Add(time.Second / 10)
	p.update(25, 0)
	p.done()
	if got, want := buf.String(), "\r\x1b[Kredrive: 0/25 messages (0%)\r\x1b[Kredrive: 10/25 messages (40%), 2.5/s"+
		"\r\x1b[Kredrive: 25 messages, 6.1/s\n"; got != want {
		t.Errorf("progress = %q, want %q", got, want)
	}
	// A move task started before the command: the rate counts from the task's start.
	buf.Reset()
	p = newProgressAt(&buf, "redrive", true, clock)
	p.since(at.Add(-20 * time.Second))
	p.since(time.Time{}) // not reported: no change
	p.update(50, 100)
	p.done()
	if got, want := buf.String(), "\r\x1b[Kredrive: 50/100 messages (50%), 2.5/s\n"; got != want {
		t.Errorf("progress since the task's start = %q, want %q", got, want)
	}
	buf.Reset()
	off := newProgress(&buf, "redrive", false)
	off.update(1, 2)
	off.done()
	if buf.Len() != 0 {
		t.Errorf("progress off a terminal wrote %q", buf.String())
	}
}

func TestNormalizer(t *testing.T) {
	t.Parallel()
	n := newNormalizer("http://127.0.0.1:4242", "cli-x-001")
	now := time.Now().UTC().Format(jobs.TimeLayout)
	in := "01JD5Q2Y7V3M8K4N6P0R2T4W6X 01JD5Q2Y7V3M8K4N6P0R2T4W6Y 01JD5Q2Y7V3M8K4N6P0R2T4W6X " + now +
		" 2025-03-14T09:26:53.589Z cli-x-001-jobs http://127.0.0.1:4242 --page eyJ2IjoxLCJzdCI6ImRlYWQiLCJuIjoxNn0"
	want := "<ID1> <ID2> <ID1> <TIME> 2025-03-14T09:26:53.589Z STACK-jobs ENDPOINT --page <TOKEN>"
	if got := n.apply(in); got != want {
		t.Errorf("apply =\n%s\nwant\n%s", got, want)
	}
}
