package status

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// conflictDB answers the next `left` writes with the TransactionConflictException DynamoDB
// returns for a write to an item a transaction holds (the write is not passed on), and counts the
// writes it refused and passed.
type conflictDB struct {
	DynamoDBAPI
	mu                   sync.Mutex
	left, refused, wrote int
}

func (c *conflictDB) set(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.refused, c.wrote = n, 0, 0
}

func (c *conflictDB) refuse() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left > 0 {
		c.left--
		c.refused++
		return &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
	}
	c.wrote++
	return nil
}

func (c *conflictDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := c.refuse(); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.PutItem(ctx, in, o...)
}

func (c *conflictDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.refuse(); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// TestWritesRetryTransactionConflicts: every write of this package refused twice by a transaction
// conflict goes through on the third request (one write); one refused on every attempt fails
// after six with the SDK's exception.
func TestWritesRetryTransactionConflicts(t *testing.T) {
	t.Parallel()
	_, client, name := emulatorTable(t)
	db := &conflictDB{DynamoDBAPI: checked{client}}
	tbl, err := New(Config{Client: db, Table: name, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := QueuedJob{Kind: "email.send", Key: "order-1", JobID: "job-1", PayloadHash: "h", At: testNow, ExpiresAt: testNow.Add(time.Hour)}
	steps := []struct {
		name string
		do   func() error
	}{
		{"ReserveQueued", func() error {
			_, ok, err := tbl.ReserveQueued(ctx, q)
			if err == nil && !ok {
				err = errors.New("not reserved")
			}
			return err
		}},
		{"MarkSent", func() error { return tbl.MarkSent(ctx, q.Kind, q.Key, q.JobID, testNow) }},
		{"Cancel", func() error { return tbl.Cancel(ctx, q.Kind, q.Key, testNow, "no longer wanted") }},
		{"RecordQueued (the job's next key)", func() error {
			return tbl.RecordQueued(ctx, QueuedJob{Kind: "email.send", Key: "order-2", JobID: "job-2", At: testNow, ExpiresAt: testNow.Add(time.Hour)})
		}},
	}
	for _, st := range steps {
		db.set(2)
		if err := st.do(); err != nil {
			t.Fatalf("%s after two conflicts: %v", st.name, err)
		}
		db.mu.Lock()
		refused, wrote := db.refused, db.wrote
		db.mu.Unlock()
		if refused != 2 || wrote != 1 {
			t.Errorf("%s: %d writes refused, %d passed; want 2 and 1", st.name, refused, wrote)
		}
	}
	j, err := tbl.Get(ctx, q.Kind, q.Key)
	if err != nil || j.State != idempotency.StateCancelled || j.SentAt.IsZero() {
		t.Fatalf("record %+v, %v: want cancelled, after MarkSent", j, err)
	}

	putSeeds(t, client, name, seed{kind: "email.send", key: "order-3", jobID: "job-3", state: idempotency.StateDead, runs: 5, upd: testNow.Add(-time.Minute), reason: "exhausted"})
	db.set(100)
	err = tbl.ResetForRedrive(ctx, "email.send", "order-3", false)
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Fatalf("ResetForRedrive refused on every attempt: %v, want the TransactionConflictException", err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.refused != 6 || db.wrote != 0 {
		t.Errorf("ResetForRedrive refused on every attempt: %d refused, %d passed; want 6 and 0", db.refused, db.wrote)
	}
}
