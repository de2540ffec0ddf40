package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type confirm struct {
	N int `json:"n"`
}

func (confirm) Kind() string { return "order.confirm" }

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

type fixture struct {
	db     *sql.DB
	ob     *pgoutbox.Outbox
	client *sqs.Client
	url    string
	dsn    string
}

func newFixture(t *testing.T, jobs int) *fixture {
	t.Helper()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("pgrelay")})
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.Database(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := pgoutbox.New(pgoutbox.Config{DB: db, Producer: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var reqs []producer.Request
	for i := range jobs {
		reqs = append(reqs, producer.Request{Args: confirm{N: i}})
	}
	if _, err := ob.EnqueueBatchTx(ctx, tx, reqs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return &fixture{db: db, ob: ob, client: client, url: stack.QueueURL, dsn: dsn}
}

func (f *fixture) handler(t *testing.T, extra map[string]string, metrics io.Writer) *handler {
	t.Helper()
	m := map[string]string{config.EnvQueueURL: f.url, config.EnvOutboxDSN: f.dsn}
	for k, v := range extra {
		m[k] = v
	}
	cfg, err := config.LoadPGRelay(env(m))
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHandler(context.Background(), cfg, awslocaltest.Backend(t).Config, slog.New(slog.DiscardHandler), metrics, "test-relay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.db.Close() })
	return h
}

// emf parses the one EMF line of an invocation.
func emf(t *testing.T, b *bytes.Buffer) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("metrics: %d lines, want 1:\n%s", len(lines), b.String())
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	aws := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if aws["Namespace"] != "sqsworker" || doc["Service"] != "test-relay" || doc["Table"] != "sqsworker_outbox" {
		t.Errorf("EMF document: %s", lines[0])
	}
	b.Reset()
	return doc
}

// An invocation drains the outbox into the queue: the damaged row ends dead, the metrics say
// so, and the next invocation finds nothing to send.
func TestInvokeDrainsTheOutbox(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 25)
	if _, err := f.db.Exec(`UPDATE sqsworker_outbox SET body = 'garbage' WHERE seq = 7`); err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	h := f.handler(t, map[string]string{config.EnvOutboxMaxAttempts: "1", config.EnvOutboxBatchSize: "10"}, &metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := h.Invoke(ctx, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	if s.Sent != 24 || s.Dead != 1 || s.Stopped != "empty" || s.DeadRows != 1 || s.PendingRows != 0 || s.Passes < 3 {
		t.Errorf("summary %+v", s)
	}
	doc := emf(t, &metrics)
	if doc["OutboxSent"] != 24.0 || doc["OutboxDead"] != 1.0 || doc["OutboxDeadRows"] != 1.0 || doc["OutboxRelayErrors"] != 0.0 {
		t.Errorf("metrics %v", doc)
	}
	var got int
	deadline := time.Now().Add(60 * time.Second)
	for got < 24 && time.Now().Before(deadline) {
		r, err := f.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		got += len(r.Messages)
	}
	if got != 24 {
		t.Errorf("the queue got %d messages, want 24", got)
	}
	out, err = h.Invoke(ctx, nil)
	if err != nil || !strings.Contains(string(out), `"sent":0`) {
		t.Errorf("second invocation: %s, %v", out, err)
	}
}

// An invocation that starts inside its deadline margin claims nothing and is not an error.
func TestInvokeStopsAtTheDeadlineMargin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	var metrics bytes.Buffer
	h := f.handler(t, nil, &metrics)
	ctx, cancel := context.WithTimeout(context.Background(), config.DefaultRelayDeadlineMargin-time.Second)
	defer cancel()
	out, err := h.Invoke(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(out, &s); err != nil || s.Sent != 0 || s.Stopped != "deadline" || s.PendingRows != 3 {
		t.Errorf("summary %+v, %v", s, err)
	}
}

// A database the relay cannot reach fails the invocation (the function's Errors metric) and
// counts a relay error.
func TestInvokeReportsRelayErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	var metrics bytes.Buffer
	h := f.handler(t, map[string]string{config.EnvOutboxDSN: "postgres://nobody@127.0.0.1:9/none?connect_timeout=2"}, &metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := h.Invoke(ctx, nil); err == nil {
		t.Fatal("Invoke succeeded without a database")
	}
	doc := emf(t, &metrics)
	if doc["OutboxRelayErrors"] != 1.0 {
		t.Errorf("metrics %v", doc)
	}
	if _, ok := doc["OutboxDeadRows"]; ok {
		t.Errorf("row gauges written although the rows could not be counted: %v", doc)
	}
}

type fakeSecrets struct {
	calls  atomic.Int32
	secret string
}

func (f *fakeSecrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.calls.Add(1)
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.secret)}, nil
}

// The database from a Secrets Manager secret in the RDS format: the password is read at every
// new connection (cached), so the function connects with it.
func TestDatabaseFromSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	var port string
	if err := f.db.QueryRow(`SELECT current_setting('port')`).Scan(&port); err != nil {
		t.Fatal(err)
	}
	dbname := f.dsn[strings.LastIndexByte(f.dsn, '/')+1 : strings.IndexByte(f.dsn, '?')]
	for _, p := range []string{port, `"` + port + `"`} {
		sm := &fakeSecrets{secret: `{"username":"postgres","password":"any (trust)","host":"127.0.0.1","port":` + p + `,"dbname":"` + dbname + `","engine":"postgres"}`}
		cfg := config.PGRelay{SecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:db", SSLMode: "disable"}
		db, err := openDB(context.Background(), cfg, sm)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sqsworker_outbox`).Scan(&n); err != nil {
			t.Errorf("port %s: %v", p, err)
		}
		db.Close()
		if c := sm.calls.Load(); c != 1 {
			t.Errorf("GetSecretValue called %d times, want once (cached)", c)
		}
	}
	sm := &fakeSecrets{secret: `{"user":"x"}`}
	if _, err := openDB(context.Background(), config.PGRelay{SecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:db"}, sm); err == nil ||
		!strings.Contains(err.Error(), "not an RDS secret") {
		t.Errorf("a secret in another format: %v", err)
	}
}

// The connection built from the secret is encrypted by default (sslmode require), and connects
// to a server whose certificate no trust store knows, as RDS's is to the function; verify-full
// connects only with the CA bundle in SQSWORKER_OUTBOX_SSLROOTCERT.
func TestDatabaseFromSecretUsesTLS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	var port string
	if err := f.db.QueryRow(`SELECT current_setting('port')`).Scan(&port); err != nil {
		t.Fatal(err)
	}
	dbname := f.dsn[strings.LastIndexByte(f.dsn, '/')+1 : strings.IndexByte(f.dsn, '?')]
	secret := `{"username":"postgres","password":"any (trust)","host":"127.0.0.1","port":` + port + `,"dbname":"` + dbname + `"}`
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:db"
	ca := pgtest.Server(t).CAFile
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string // "" connects over TLS; else a part of the error
	}{
		{"default", nil, ""},
		{"verify-full without the CA", map[string]string{config.EnvOutboxSSLMode: "verify-full"}, "certificate signed by unknown authority"},
		{"verify-full with the CA", map[string]string{config.EnvOutboxSSLMode: "verify-full", config.EnvOutboxSSLRootCert: ca}, ""},
		{"a missing CA file", map[string]string{config.EnvOutboxSSLMode: "verify-full", config.EnvOutboxSSLRootCert: "/opt/missing.pem"}, "SQSWORKER_OUTBOX_SSLROOTCERT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{config.EnvQueueURL: f.url, config.EnvOutboxSecretARN: arn}
			maps.Copy(env, tt.env)
			cfg, err := config.LoadPGRelay(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			db, err := openDB(context.Background(), cfg, &fakeSecrets{secret: secret})
			var ssl bool
			if err == nil {
				defer db.Close()
				err = db.QueryRow(`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl)
			}
			switch {
			case tt.want == "" && (err != nil || !ssl):
				t.Errorf("sslmode %s: ssl %v, %v; want a TLS connection", cfg.SSLMode, ssl, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("sslmode %s: %v; want an error with %q", cfg.SSLMode, err, tt.want)
			}
		})
	}
}

// A job larger than an SQS message, committed through a producer with a payload store, is sent
// by the relay through SQSWORKER_PAYLOAD_BUCKET: the message is a pointer to the S3 object.
func TestInvokeSendsLargeJobsThroughThePayloadBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 0)
	b := awslocaltest.Backend(t)
	bucket, err := awslocal.ProvisionBucket(ctx, b.S3(), awslocal.UniqueName("pgrelay"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := payload.New(payload.Config{S3: b.S3(), Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: f.client, QueueURL: f.url, Payload: st})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := pgoutbox.New(pgoutbox.Config{DB: f.db, Producer: p})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := f.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1200<<10)
	m, err := ob.EnqueueTx(ctx, tx, bigJob{Data: big})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	h := f.handler(t, map[string]string{config.EnvPayloadBucket: bucket}, &metrics)
	ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := h.Invoke(ictx, nil)
	if err != nil || !strings.Contains(string(out), `"sent":1`) {
		t.Fatalf("Invoke = %s, %v", out, err)
	}
	r, err := f.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.url), WaitTimeSeconds: 5,
		MessageAttributeNames: []string{"All"}})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(r.Messages))
	}
	msg := r.Messages[0]
	if _, ok := msg.MessageAttributes[payload.SizeAttribute]; !ok || !payload.MaybePointer(aws.ToString(msg.Body)) {
		t.Errorf("message for job %s is not a payload pointer: %.200s (attributes %v)", m.ID, aws.ToString(msg.Body), msg.MessageAttributes)
	}
}

type bigJob struct {
	Data string `json:"data"`
}

func (bigJob) Kind() string { return "blob.store" }
