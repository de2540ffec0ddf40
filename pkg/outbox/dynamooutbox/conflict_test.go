package dynamooutbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// conflictDB answers the next transactions with cancellations and the next single writes with
// TransactionConflictException, as DynamoDB does while another transaction holds an item; the
// refused requests are not passed on (DynamoDB wrote nothing for them). It records the
// ClientRequestToken of every transaction it saw.
type conflictDB struct {
	dynamooutbox.DynamoDBAPI
	mu sync.Mutex
	// codes, when set, are the cancellation reason codes (one per action; missing ones "None") of
	// the next txLeft transactions.
	codes          []string
	txLeft         int
	txSeen         int
	tokens         []string
	writeLeft      int // UpdateItems to refuse
	deleteLeft     int // DeleteItems to refuse
	writesRefused  int
	writesSent     int
	refusedUpdates []string // the update expressions of the refused UpdateItems
}

func (c *conflictDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	c.txSeen++
	c.tokens = append(c.tokens, aws.ToString(in.ClientRequestToken))
	refuse := c.txLeft > 0
	if refuse {
		c.txLeft--
	}
	c.mu.Unlock()
	if refuse {
		reasons := make([]types.CancellationReason, len(in.TransactItems))
		for i := range reasons {
			code := "None"
			if i < len(c.codes) {
				code = c.codes[i]
			}
			reasons[i] = types.CancellationReason{Code: aws.String(code)}
		}
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons"), CancellationReasons: reasons}
	}
	return c.DynamoDBAPI.TransactWriteItems(ctx, in, o...)
}

func (c *conflictDB) refuseWrite(what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	left := &c.writeLeft
	if what == "delete" {
		left = &c.deleteLeft
	}
	if *left > 0 {
		*left--
		c.writesRefused++
		c.refusedUpdates = append(c.refusedUpdates, what)
		return &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
	}
	c.writesSent++
	return nil
}

func (c *conflictDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.refuseWrite(aws.ToString(in.UpdateExpression)); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

func (c *conflictDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := c.refuseWrite("delete"); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.DeleteItem(ctx, in, o...)
}

// conflictEnv is an env whose outbox talks to DynamoDB through a conflictDB.
func conflictEnv(t *testing.T) (*env, *conflictDB) {
	t.Helper()
	e := newEnv(t, false, dynamooutbox.Config{})
	db := &conflictDB{DynamoDBAPI: e.ddb}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: db, Table: e.ob.Table(), Status: e.status, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.ob = ob
	return e, db
}

// A transaction cancelled by conflicts (here on the job's queued record, as when two enqueues of
// one key run at once) is sent again, unchanged, and commits once: the order, the outbox item and
// the queued record are there, and the relay sends the job once.
func TestEmulatorTransactRetriesConflicts(t *testing.T) {
	t.Parallel()
	e, db := conflictEnv(t)
	j := e.job(emailArgs{Order: "order-1"}, producer.WithKey("order-1-email"))
	db.codes, db.txLeft = []string{"None", "None", "TransactionConflict"}, 2
	if err := e.placeOrder("order-1", j); err != nil {
		t.Fatalf("a transaction cancelled twice by a conflict: %v", err)
	}
	if db.txSeen != 3 {
		t.Errorf("%d transactions sent, want 3", db.txSeen)
	}
	for _, tok := range db.tokens {
		if tok != "" {
			t.Errorf("a retry carried ClientRequestToken %q: without the caller's, each request gets the SDK's own", tok)
		}
	}
	if rec, err := e.status.Get(e.ctx, "email.send", "order-1-email"); err != nil || rec.State != idempotency.StateQueued || rec.JobID != j.ID() {
		t.Errorf("queued record %+v, %v", rec, err)
	}
	st, err := e.relay("r", nil, nil, outbox.RelayConfig{}).Drain(e.ctx)
	if err != nil || st.Sent != 1 {
		t.Fatalf("relay: %+v, %v; want one job sent", st, err)
	}
	if got := e.drainQueue(1); len(got) != 1 || got[0].ID != j.ID() {
		t.Errorf("queue holds %v, want %s once", got, j.ID())
	}

	// The caller's own token is kept on every request.
	db.mu.Lock()
	db.txSeen, db.tokens, db.txLeft, db.codes = 0, nil, 1, []string{"ThrottlingError"}
	db.mu.Unlock()
	j2 := e.job(emailArgs{Order: "order-2"})
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("order-2-request"), TransactItems: []types.TransactWriteItem{e.orderPut("order-2")}}
	if _, err := e.ob.Transact(e.ctx, in, j2); err != nil {
		t.Fatalf("a transaction throttled once: %v", err)
	}
	if len(db.tokens) != 2 || db.tokens[0] != "order-2-request" || db.tokens[1] != "order-2-request" {
		t.Errorf("tokens sent %q, want the caller's on both requests", db.tokens)
	}
}

// A cancellation that names a refused condition is an answer: no retry, even beside a conflict;
// a transaction that keeps conflicting fails after 6 requests, and nothing is written.
func TestEmulatorTransactDoesNotRetryAnswers(t *testing.T) {
	t.Parallel()
	e, db := conflictEnv(t)
	j := e.job(emailArgs{Order: "order-3"}, producer.WithKey("order-3-email"))
	db.codes, db.txLeft = []string{"ConditionalCheckFailed", "TransactionConflict"}, 10
	err := e.placeOrder("order-3", j)
	var te *dynamooutbox.TransactionError
	if !errors.As(err, &te) || !te.ConditionFailed(0) || te.Attempts != 1 || db.txSeen != 1 {
		t.Fatalf("a refused condition: %v (attempts %d, %d sent); want a TransactionError after one request", err, attemptsOf(te), db.txSeen)
	}

	db.mu.Lock()
	db.txSeen, db.txLeft, db.codes = 0, 100, []string{"TransactionConflict"}
	db.mu.Unlock()
	err = e.placeOrder("order-3", j)
	if !errors.As(err, &te) || te.Attempts != 6 || db.txSeen != 6 || !strings.Contains(err.Error(), "sent 6 times") {
		t.Fatalf("a transaction that keeps conflicting: %v (attempts %d, %d sent); want a TransactionError after 6", err, attemptsOf(te), db.txSeen)
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Errorf("the SDK's exception is not in %v", err)
	}
	if _, err := e.ob.Get(e.ctx, j.ID()); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the cancelled transaction's job is in the outbox: %v", err)
	}
}

func attemptsOf(te *dynamooutbox.TransactionError) int {
	if te == nil {
		return 0
	}
	return te.Attempts
}

// A relay's claim and its write-back refused by a transaction conflict are sent again: the job is
// sent once and leaves the outbox.
func TestEmulatorRelayWritesRetryConflicts(t *testing.T) {
	t.Parallel()
	e, db := conflictEnv(t)
	j := e.job(emailArgs{Order: "order-4"})
	if err := e.placeOrder("order-4", j); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	db.writeLeft, db.deleteLeft = 2, 2 // the claim (UpdateItem) and the delete once sent
	db.mu.Unlock()
	r := e.relay("r", nil, nil, outbox.RelayConfig{})
	st, err := r.Drain(e.ctx)
	if err != nil || st.Sent != 1 {
		t.Fatalf("relay: %+v, %v; want the job sent", st, err)
	}
	db.mu.Lock()
	if db.writesRefused != 4 || len(db.refusedUpdates) != 4 || !strings.Contains(db.refusedUpdates[0], "#at + :one") || db.refusedUpdates[3] != "delete" {
		t.Errorf("refused %d writes (%q); want the claim twice and the delete twice", db.writesRefused, db.refusedUpdates)
	}
	db.mu.Unlock()
	if got := e.drainQueue(1); len(got) != 1 || got[0].ID != j.ID() {
		t.Errorf("queue holds %v, want %s once", got, j.ID())
	}
	if p := e.pending(); len(p) != 0 {
		t.Errorf("%d entries still pending", len(p))
	}
}
