package longjob_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// backfillArgs is the long job of these tests: process items 0…N-1.
type backfillArgs struct {
	N     int `json:"n"`
	Chunk int `json:"chunk"` // items per step
}

func (backfillArgs) Kind() string { return "test.backfill" }

// stack is a job queue, its DLQ and a job table on the embedded emulator, with clients.
type stack struct {
	t     *testing.T
	b     *awslocal.Backend
	sqs   *sqs.Client
	ddb   *dynamodb.Client
	stack *awslocal.Stack
	table string
	store *idempotency.DynamoDBStore
	st    *status.Table
	prod  *producer.Producer
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	s := &stack{t: t, b: b, sqs: sqs.NewFromConfig(b.Config), ddb: b.DynamoDB()}
	var err error
	if s.stack, err = awslocal.Provision(ctx, s.sqs, awslocal.StackOptions{Name: awslocal.UniqueName("long"), VisibilityTimeout: 20}); err != nil {
		t.Fatal(err)
	}
	if s.table, err = awslocal.ProvisionTable(ctx, s.ddb, s.stack.Name); err != nil {
		t.Fatal(err)
	}
	if s.store, err = idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: s.ddb, Table: s.table}); err != nil {
		t.Fatal(err)
	}
	if s.st, err = status.New(status.Config{Client: s.ddb, Table: s.table}); err != nil {
		t.Fatal(err)
	}
	if s.prod, err = producer.New(producer.Config{SQS: s.sqs, QueueURL: s.stack.QueueURL}); err != nil {
		t.Fatal(err)
	}
	return s
}

// logger is a discarding logger, or stderr's with SQSWORKER_TEST_LOG set.
func logger() *slog.Logger {
	if os.Getenv("SQSWORKER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// items records the items a backfill processed: each one's marker is a conditional PutItem in
// the job table (pk "item#<job>#<i>", written only where there is none), which is what makes a
// step's effect happen once even when a step runs twice; the counters say what happened.
type items struct {
	ddb   *dynamodb.Client
	table string

	mu      sync.Mutex
	written map[int]int // item → successful marker writes (want exactly 1 each)
	refused atomic.Int64
	runs    []int // the cursor each run started from (-1: none)
}

func (it *items) process(ctx context.Context, job string, i int) error {
	_, err := it.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(it.table),
		Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "item#" + job + "#" + strconv.Itoa(i)},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var ccf *ddbtypes.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		it.refused.Add(1) // done before: the effect happened once
		return nil
	case err != nil:
		return err
	}
	it.mu.Lock()
	it.written[i]++
	it.mu.Unlock()
	return nil
}

// startPoller runs a poller over the stack's queue until the test ends.
func (s *stack) startPoller(h *worker.Handler, cfg poller.Config) {
	s.t.Helper()
	cfg.SQS, cfg.QueueURL, cfg.Handler = s.sqs, s.stack.QueueURL, h
	if cfg.WaitTime == 0 {
		cfg.WaitTime = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = logger()
	}
	p, err := poller.New(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.t.Errorf("poller: %v", err)
		}
	}()
	s.t.Cleanup(func() { cancel(); <-done })
}

// waitState polls the job's record until it reaches state (or fails the test after a generous
// deadline) and returns it.
func (s *stack) waitState(jobID string, state idempotency.State, within time.Duration) status.Job {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var last status.Job
	for time.Now().Before(deadline) {
		j, err := s.st.GetByID(context.Background(), jobID)
		if err == nil {
			last = j
			if j.State == state {
				return j
			}
			if status.Final(j.State) {
				s.t.Fatalf("job %s ended %s (%s: %s), want %s", jobID, j.State, j.Reason, j.LastError, state)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("job %s is %s after %s, want %s (record %+v)", jobID, last.State, within, state, last.Record)
	return status.Job{}
}

// dlqEmpty checks that nothing was dead-lettered.
func (s *stack) dlqEmpty() {
	s.t.Helper()
	out, err := s.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.stack.DLQURL),
		MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, m := range out.Messages {
		s.t.Errorf("dead letter: %s %v", aws.ToString(m.Body), attr(m, worker.FailureAttribute))
	}
}

func attr(m sqstypes.Message, name string) string {
	if a, ok := m.MessageAttributes[name]; ok {
		return aws.ToString(a.StringValue)
	}
	return ""
}

// clock is a fake clock for the middleware, the worker, the schedule client and dispatcher.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func (it *items) String() string {
	it.mu.Lock()
	defer it.mu.Unlock()
	return fmt.Sprintf("%d items written, %d refused, runs from %v", len(it.written), it.refused.Load(), it.runs)
}
