package dedup_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// TestUniqueWriteInTheOutboxTransaction: with the DynamoDB outbox, the key's reservation commits
// with the job (and its queued record): a held key is a DuplicateError before any write; two
// transactions that both saw the key free commit one job, the other is cancelled whole (no
// outbox item); once the relay sent the job and the worker ran it, the key is free again.
func TestUniqueWriteInTheOutboxTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, envOptions{noStatus: true}) // the relay's producer: the transaction writes the record
	obTable := awslocal.UniqueName("dedup-outbox")
	if _, err := dynamooutbox.CreateTable(ctx, e.ddb, obTable); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: e.ddb, Table: obTable, Status: e.status, Now: e.clock.Now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rule := dedup.Unique{Fields: []string{"user"}, Window: time.Hour, States: dedup.WhileActive}
	prepare := func(n int) (dynamooutbox.Job, types.TransactWriteItem) {
		t.Helper()
		job, err := ob.Prepare(ctx, e.prod, exportArgs{User: "42", N: n})
		if err != nil {
			t.Fatal(err)
		}
		w, err := e.enq.UniqueWrite(ctx, job.Entry.Message, rule)
		if err != nil {
			t.Fatalf("UniqueWrite %d: %v", n, err)
		}
		return job, w
	}
	a, wa := prepare(1)
	b, wb := prepare(2) // both saw the key free
	if _, err := ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{wa}}, a); err != nil {
		t.Fatal(err)
	}
	_, err = ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{wb}}, b)
	var te *dynamooutbox.TransactionError
	if !errors.As(err, &te) || !te.ConditionFailed(0) {
		t.Fatalf("the second transaction: %v, want it cancelled by the key's condition", err)
	}
	job, _ := ob.Prepare(ctx, e.prod, exportArgs{User: "42", N: 3})
	_, err = e.enq.UniqueWrite(ctx, job.Entry.Message, rule)
	var dup *dedup.DuplicateError
	if !errors.As(err, &dup) || !errors.Is(err, dedup.ErrDuplicate) || dup.JobID != a.ID() {
		t.Fatalf("UniqueWrite while job %s holds the key: %v", a.ID(), err)
	}

	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: []*producer.Producer{e.prod}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := relay.Drain(ctx); err != nil || st.Sent != 1 {
		t.Fatalf("relay: %+v, %v; want the one committed job sent", st, err)
	}
	msgs := e.receive()
	if len(msgs) != 1 || envelopes(t, msgs)[0].ID != a.ID() {
		t.Fatalf("%d messages, want job %s alone", len(msgs), a.ID())
	}
	e.work(msgs)
	c, wc := prepare(4) // the job succeeded: the key is free
	if _, err := ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{wc}}, c); err != nil {
		t.Fatalf("after the job ran: %v", err)
	}
}
