package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

type outboxArgs struct {
	Order string `json:"order"`
}

func (outboxArgs) Kind() string { return "order.confirm" }

// The PostgreSQL outbox from the command line: migrate, list, relay --drain (one row dead),
// show, retry, and a long-running relay that sends a job committed while it runs and stops
// cleanly when its context ends (Ctrl-C).
func TestOutboxPostgresCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := backend(t)
	stack := newStack(t, "pgob", false)
	dsn := pgtest.Database(t)
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(ctx, append(args, "--dsn", dsn, "--endpoint", b.URL), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	out, errOut, code := cli("outbox", "list")
	if code != exitError || !strings.Contains(errOut, "does not exist") || !strings.Contains(errOut, "sqsworker outbox migrate") {
		t.Fatalf("list before migrate: exit %d, %q", code, errOut)
	}
	if out, _, code = cli("outbox", "migrate"); code != 0 || !strings.Contains(out, "schema version 1") {
		t.Fatalf("migrate: %d %q", code, out)
	}
	if out, _, code = cli("outbox", "migrate"); code != 0 {
		t.Fatalf("migrate again: %d %q", code, out)
	}

	// The application: three jobs in a transaction, one of them damaged afterwards.
	client := sqs.NewFromConfig(b.Config)
	q, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: aws.ToString(q.QueueUrl)})
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgxoutbox.OpenDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ob, err := pgoutbox.New(pgoutbox.Config{Producer: prod, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	commit := func(orders ...string) {
		t.Helper()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range orders {
			m, err := ob.EnqueueTx(ctx, tx, outboxArgs{Order: o})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit("1", "2", "3")
	if _, err := db.Exec(`UPDATE sqsworker_outbox SET body = 'not an envelope' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	out, _, code = cli("outbox", "list")
	if code != 0 || strings.Count(out, "order.confirm") != 3 {
		t.Fatalf("list: %d\n%s", code, out)
	}
	out, errOut, code = cli("outbox", "relay", "--drain", "--max-attempts", "1", "--stack", stack)
	if code != 0 || !strings.Contains(out, "drained: 2 sent, 1 dead") {
		t.Fatalf("relay --drain: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var listed struct {
		Entries []struct {
			JobID     string `json:"id"`
			LastError string `json:"last_error"`
			Attempts  int    `json:"attempts"`
		}
	}
	out, _, code = cli("outbox", "list", "--state", "dead", "--output", "json")
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.Entries) != 1 || listed.Entries[0].JobID != ids[1] ||
		!strings.Contains(listed.Entries[0].LastError, "not a job envelope") || listed.Entries[0].Attempts != 1 {
		t.Fatalf("list --state dead: %d %v\n%s", code, err, out)
	}
	if out, _, code = cli("outbox", "show", ids[1]); code != 0 || !strings.Contains(out, "dead") || !strings.Contains(out, "not an envelope") {
		t.Errorf("show: %d\n%s", code, out)
	}
	if _, errOut, code = cli("outbox", "show", "nope"); code != exitError || !strings.Contains(errOut, `no job "nope"`) {
		t.Errorf("show unknown: %d %q", code, errOut)
	}
	if out, _, code = cli("outbox", "retry", ids[1]); code != 0 || !strings.Contains(out, "is due now") {
		t.Errorf("retry: %d %q", code, out)
	}
	if e, err := ob.Get(ctx, ids[1]); err != nil || e.State != "pending" || e.Attempts != 0 {
		t.Errorf("after retry: %+v, %v", e, err)
	}
	if _, err := db.Exec(`DELETE FROM sqsworker_outbox WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}

	// A long-running relay: a job committed while it runs is sent (NOTIFY wakes it; its poll
	// interval is an hour), and cancelling its context stops it cleanly.
	rctx, cancel := context.WithCancel(ctx)
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(rctx, []string{"outbox", "relay", "--stack", stack, "--poll-interval", "1h", "--stats-every", "0",
			"--dsn", dsn, "--endpoint", b.URL}, stdout, stderr)
	}()
	waitFor(t, 60*time.Second, "the relay to start", func() bool { return strings.Contains(stdout.String(), "Ctrl-C stops") })
	commit("4")
	waitFor(t, 60*time.Second, "the relay to send the new job", func() bool { return strings.Contains(stdout.String(), "1 sent") })
	cancel()
	if code := <-done; code != 0 || !strings.Contains(stdout.String(), "stopped: 1 sent") {
		t.Fatalf("relay: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "woken by NOTIFY on channel sqsworker_outbox") {
		t.Errorf("relay banner: %s", stdout.String())
	}
	got := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		msgs, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			got[env.ID]++
		}
	}
	for _, id := range []string{ids[0], ids[2], ids[3]} {
		if got[id] != 1 {
			t.Errorf("job %s arrived %d times, want once (received %v)", id, got[id], got)
		}
	}
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM sqsworker_outbox`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows left, %v", left, err)
	}
}

func TestOutboxUsageErrors(t *testing.T) {
	t.Setenv(outboxDSNEnv, "")
	t.Setenv(databaseURLEnv, "")
	checkUsageErrors(t, []usageCase{
		{"outbox unknown command", []string{"outbox", "peek"}, `unknown outbox command "peek": want list, migrate, relay, retry or show`},
		{"list bad state", []string{"outbox", "list", "--state", "sent", "--dsn", "postgres://x@127.0.0.1:9/x"}, `--state "sent": want pending or dead`},
		{"list bad limit", []string{"outbox", "list", "--limit", "0", "--dsn", "postgres://x@127.0.0.1:9/x"}, "--limit 0"},
		{"show without job", []string{"outbox", "show", "--dsn", "postgres://x@127.0.0.1:9/x"}, "outbox show needs JOB"},
		{"relay without stack", []string{"outbox", "relay", "--dsn", "postgres://x@127.0.0.1:9/x"}, "outbox relay needs --stack NAME"},
		{"relay without dsn", []string{"outbox", "relay", "--stack", "s"}, "outbox relay needs --dsn"},
		{"relay bad lease", []string{"outbox", "relay", "--stack", "s", "--lease", "10ms", "--dsn", "postgres://x@127.0.0.1:9/x"}, "--lease 10ms"},
		{"relay bad batch", []string{"outbox", "relay", "--stack", "s", "--batch-size", "0", "--dsn", "postgres://x@127.0.0.1:9/x"}, "--batch-size 0"},
		{"relay bad level", []string{"outbox", "relay", "--stack", "s", "--log-level", "loud", "--dsn", "postgres://x@127.0.0.1:9/x"}, `--log-level "loud"`},
		{"migrate bad table", []string{"outbox", "migrate", "--print", "--outbox-table", "Bad"}, "--outbox-table"},
	})
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:secret@db:5432/app?sslmode=require": "postgres://app:xxxxx@db:5432/app?sslmode=require",
		"postgres://app@db/app":                             "postgres://app@db/app",
		"host=db user=app password=secret dbname=app":       "host=db user=app password=xxxxx dbname=app",
	} {
		if got := redactDSN(in); got != want {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOutboxUnreachablePostgres: a PostgreSQL outbox nobody listens for is reported as that
// database on that host (never as an unreachable AWS endpoint), without the password.
func TestOutboxUnreachablePostgres(t *testing.T) {
	t.Parallel()
	b := backend(t)
	stack := newStack(t, "pgdown", false)
	for _, dsn := range []string{
		"postgres://app:s3cret@127.0.0.1:1/appdb?sslmode=disable",
		"host=127.0.0.1 port=1 user=app password='s3cret pw' dbname=appdb sslmode=disable",
	} {
		for _, args := range [][]string{
			{"outbox", "migrate"},
			{"outbox", "list"},
			{"outbox", "show", "01JD5Q2Y7V3M8K4N6P0R2T4W6X"},
			{"outbox", "retry", "01JD5Q2Y7V3M8K4N6P0R2T4W6X"},
			{"outbox", "relay", "--drain", "--stack", stack, "--endpoint", b.URL},
		} {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(args, "--dsn", dsn), &out, &errOut)
			msg := errOut.String()
			if code != exitError || !strings.Contains(msg, `PostgreSQL database "appdb" on 127.0.0.1:1`) ||
				strings.Contains(msg, "s3cret") || strings.Contains(msg, "AWS endpoint") || !strings.Contains(msg, "connection refused") {
				t.Errorf("%v with %q: exit %d, stderr:\n%s", args, dsn, code, msg)
			}
		}
	}
}

func TestDescribeAndRedactDSN(t *testing.T) {
	t.Setenv("PGHOST", "")
	t.Setenv("PGPORT", "")
	t.Setenv("PGDATABASE", "")
	t.Setenv("PGUSER", "")
	for _, tt := range []struct{ dsn, describe, redacted string }{
		{"postgres://app:pw@db.example.com:5433/orders", `PostgreSQL database "orders" on db.example.com:5433`, "postgres://app:xxxxx@db.example.com:5433/orders"},
		{"postgresql://app@db/orders?password=pw&sslmode=require", `PostgreSQL database "orders" on db`, "postgresql://app@db/orders?password=xxxxx&sslmode=require"},
		{"postgres://app@/orders?host=/var/run/postgresql", `PostgreSQL database "orders" on /var/run/postgresql`, "postgres://app@/orders?host=/var/run/postgresql"},
		{"postgres://app@db", `PostgreSQL database "app" on db`, "postgres://app@db"}, // the database defaults to the user's name
		{"host=db port=5432 dbname=orders user=app password='p w\\'x'", `PostgreSQL database "orders" on db:5432`, "host=db port=5432 dbname=orders user=app password=xxxxx"},
		{"dbname=orders", `PostgreSQL database "orders" on the default host (a local socket or localhost)`, "dbname=orders"},
	} {
		if got := describeDSN(tt.dsn); got != tt.describe {
			t.Errorf("describeDSN(%q) = %s, want %s", tt.dsn, got, tt.describe)
		}
		if got := redactDSN(tt.dsn); got != tt.redacted {
			t.Errorf("redactDSN(%q) = %s, want %s", tt.dsn, got, tt.redacted)
		}
	}
}
