package idempotency_test

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

// conflictClient answers the next `left` writes (PutItem, UpdateItem) with the
// TransactionConflictException DynamoDB returns for a write to an item a transaction holds,
// without passing them on; later writes reach the emulator. It counts the writes it refused and
// the writes it passed.
type conflictClient struct {
	idempotency.DynamoDBAPI
	mu             sync.Mutex
	left           int
	refused, wrote int
}

func (c *conflictClient) refuse() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left > 0 {
		c.left--
		c.refused++
		return true
	}
	c.wrote++
	return false
}

// set makes the next n writes conflict and resets the counts.
func (c *conflictClient) set(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.refused, c.wrote = n, 0, 0
}

func (c *conflictClient) counts() (refused, wrote int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused, c.wrote
}

func conflict() error {
	return &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
}

func (c *conflictClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.refuse() {
		return nil, conflict()
	}
	return c.DynamoDBAPI.PutItem(ctx, in, o...)
}

func (c *conflictClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.refuse() {
		return nil, conflict()
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// TestDynamoDBStoreRetriesTransactionConflicts: a claim, a renewal, a finish and a dead mark each
// refused twice by a transaction conflict go through on the third request, with one write each;
// a write refused on every attempt fails after six, with the SDK's exception in the error.
func TestDynamoDBStoreRetriesTransactionConflicts(t *testing.T) {
	t.Parallel()
	raw := emulatorClient(t)
	table := newTable(t, raw)
	c := &conflictClient{DynamoDBAPI: raw}
	s := newDynamoDBStore(t, c, table)
	ctx := context.Background()
	now := time.Now().UTC()
	req := idempotency.ClaimRequest{Kind: "conflict", Key: "k1", JobID: "j1", PayloadHash: "h", Token: "t1",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), Fresh: true}

	step := func(name string, f func() error) {
		t.Helper()
		c.set(2)
		if err := f(); err != nil {
			t.Fatalf("%s after two conflicts: %v", name, err)
		}
		if refused, wrote := c.counts(); refused != 2 || wrote != 1 {
			t.Errorf("%s: %d writes refused and %d passed, want 2 and 1", name, refused, wrote)
		}
	}
	step("claim", func() error {
		res, err := s.Claim(ctx, req)
		if err == nil && !res.Claimed {
			err = errors.New("not claimed")
		}
		return err
	})
	step("renew", func() error {
		return s.Renew(ctx, idempotency.Renewal{Kind: "conflict", Key: "k1", JobID: "j1", Token: "t1", LeaseUntil: now.Add(2 * time.Minute)})
	})
	step("finish", func() error {
		return s.Finish(ctx, idempotency.Finish{Kind: "conflict", Key: "k1", JobID: "j1", Token: "t1", State: idempotency.StateRetrying,
			Error: "boom", Now: now.Add(time.Second), ExpiresAt: now.Add(time.Hour)})
	})
	step("mark dead", func() error {
		marked, err := s.MarkDead(ctx, idempotency.DeadMark{Kind: "conflict", Key: "k1", JobID: "j1", PayloadHash: "h",
			Reason: "unknown_kind", Now: now.Add(2 * time.Second), ExpiresAt: now.Add(time.Hour)})
		if err == nil && !marked {
			err = errors.New("not marked")
		}
		return err
	})
	rec, err := s.Get(ctx, "conflict", "k1")
	if err != nil || rec.State != idempotency.StateDead || rec.Runs != 1 {
		t.Fatalf("record %+v, %v; want dead after one run", rec, err)
	}

	c.set(100)
	req.Key, req.JobID, req.Token = "k2", "j2", "t2"
	_, err = s.Claim(ctx, req)
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Fatalf("claim refused on every attempt: err %v, want the TransactionConflictException", err)
	}
	if refused, wrote := c.counts(); refused != 6 || wrote != 0 {
		t.Errorf("claim refused on every attempt: %d refused, %d passed; want 6 and 0", refused, wrote)
	}
}
