package pgoutbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openDB opens a database/sql handle on dsn, closed when the test ends.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	t.Cleanup(func() { db.Close() })
	return db
}

var schemas atomic.Int64

// newSchemaOutbox returns an Outbox on a table of its own (a fresh schema of db), migrated.
func newSchemaOutbox(t testing.TB, db *sql.DB, cfg pgoutbox.Config) *pgoutbox.Outbox {
	t.Helper()
	schema := fmt.Sprintf("s%d", schemas.Add(1))
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	cfg.DB = db
	cfg.Table = schema + ".outbox"
	o, err := pgoutbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return o
}

// newOutbox returns an Outbox on the default table of a fresh database, migrated, and the
// database's DSN and handle.
func newOutbox(t testing.TB, cfg pgoutbox.Config) (*pgoutbox.Outbox, *sql.DB, string) {
	t.Helper()
	dsn := pgtest.Database(t)
	db := openDB(t, dsn)
	cfg.DB = db
	o, err := pgoutbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return o, db, dsn
}

// inTx runs fn in a transaction and commits it.
func inTx(t testing.TB, db *sql.DB, fn func(tx *sql.Tx) error) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func rowCount(t testing.TB, db *sql.DB, o *pgoutbox.Outbox) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + o.Table()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// orderArgs is the tests' job.
type orderArgs struct {
	Order string `json:"order"`
	Group string `json:"group,omitempty"`
	N     int    `json:"n,omitempty"`
}

func (orderArgs) Kind() string { return "order.confirm" }

// sent is one entry a countingSQS accepted.
type sent struct {
	JobID, Group string
	Body         string
	Call         int64
	At           time.Time // when SQS (the fake, or next) had accepted it
}

// countingSQS accepts every SendMessageBatch entry (unless reject says otherwise) and records
// what it accepted; next, when set, receives the accepted entries afterwards (the emulator).
type countingSQS struct {
	mu       sync.Mutex
	accepted []sent
	rejected map[string][]int64 // job id → the calls that rejected it
	reject   func(body string) bool
	next     producer.SQSAPI
	calls    atomic.Int64
	entries  atomic.Int64
}

func (f *countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("countingSQS: SendMessage is not used by the relay")
}

func (f *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	n := f.calls.Add(1)
	f.entries.Add(int64(len(in.Entries)))
	out := &sqs.SendMessageBatchOutput{}
	pass := *in
	pass.Entries = nil
	var accepted []sent
	f.mu.Lock()
	for _, e := range in.Entries {
		env, err := jobs.ParseEnvelope(aws.ToString(e.MessageBody))
		if err != nil {
			f.mu.Unlock()
			return nil, err
		}
		if f.reject != nil && f.reject(aws.ToString(e.MessageBody)) {
			if f.rejected == nil {
				f.rejected = map[string][]int64{}
			}
			f.rejected[env.ID] = append(f.rejected[env.ID], n)
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"),
				Message: aws.String("rejected by the test"), SenderFault: true})
			continue
		}
		accepted = append(accepted, sent{JobID: env.ID, Group: aws.ToString(e.MessageGroupId), Body: aws.ToString(e.MessageBody), Call: n})
		pass.Entries = append(pass.Entries, e)
		if f.next == nil {
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("m-%d-%s", n, aws.ToString(e.Id)))})
		}
	}
	f.mu.Unlock()
	if f.next != nil && len(pass.Entries) > 0 {
		res, err := f.next.SendMessageBatch(ctx, &pass, o...)
		if err != nil {
			return nil, err
		}
		out.Successful = append(out.Successful, res.Successful...)
		out.Failed = append(out.Failed, res.Failed...)
	}
	now := time.Now()
	f.mu.Lock()
	for i := range accepted {
		accepted[i].At = now
	}
	f.accepted = append(f.accepted, accepted...)
	f.mu.Unlock()
	return out, nil
}

func (f *countingSQS) sent() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.accepted...)
}

// rejections returns the calls that rejected a job.
func (f *countingSQS) rejections(id string) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.rejected[id]...)
}

func (f *countingSQS) setReject(reject func(body string) bool) {
	f.mu.Lock()
	f.reject = reject
	f.mu.Unlock()
}

// emulatorQueue provisions a queue (FIFO or not) on the shared embedded emulator.
func emulatorQueue(t testing.TB, fifo bool) (*sqs.Client, *awslocal.Stack) {
	t.Helper()
	client := sqs.NewFromConfig(awslocaltest.Backend(t).Config)
	stack, err := awslocal.Provision(context.Background(), client, awslocal.StackOptions{Name: awslocal.UniqueName(strings.ReplaceAll(t.Name(), "/", "-")), FIFO: fifo})
	if err != nil {
		t.Fatal(err)
	}
	return client, stack
}

func newProducer(t testing.TB, api producer.SQSAPI, url string) *producer.Producer {
	t.Helper()
	p, err := producer.New(producer.Config{SQS: api, QueueURL: url, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// keepConnection is the per-call option of sdkhttp: without it a receive whose response the SDK
// failed to read (the connection closed under it) is retried, and the messages of the lost
// response stay invisible for the whole visibility timeout — on a FIFO queue with their groups
// behind them (seen here: whole groups missing after 60 s).
func keepConnection(o *sqs.Options) { o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient) }

// received reads messages from the queue until want job ids were seen or the deadline passes,
// and returns how many times each job id arrived and the envelopes in arrival order.
func received(t testing.TB, client *sqs.Client, url string, want int, deadline time.Duration) (map[string]int, []jobs.Envelope) {
	t.Helper()
	ctx := context.Background()
	seen := map[string]int{}
	var order []jobs.Envelope
	end := time.Now().Add(deadline)
	for time.Now().Before(end) && len(order) < want {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600}, keepConnection)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			seen[env.ID]++
			order = append(order, env)
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}, keepConnection); err != nil {
				t.Fatal(err)
			}
		}
	}
	return seen, order
}

// constBackoff retries after d.
type constBackoff time.Duration

func (c constBackoff) Backoff(int) time.Duration { return time.Duration(c) }

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, time.Minute, what, cond)
}

// stallingStore is a Store whose Complete can be held back (a paused relay) or dropped (a
// relay killed after SendMessage and before its write-back).
type stallingStore struct {
	outbox.Store
	drop    bool
	hold    chan struct{} // when set, Complete waits for it to close
	holding chan struct{} // closed when a Complete starts waiting
	once    sync.Once
}

var errKilled = errors.New("relay killed before its write-back")

func (s *stallingStore) Complete(ctx context.Context, owner string, outcomes []outbox.Outcome) error {
	if s.drop {
		return errKilled
	}
	if s.hold != nil {
		s.once.Do(func() { close(s.holding) })
		<-s.hold
	}
	return s.Store.Complete(ctx, owner, outcomes)
}
