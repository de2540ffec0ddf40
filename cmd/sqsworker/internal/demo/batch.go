package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// The demo's batch (docs/BATCHES.md): three children, one of which cancels itself, and a
// callback that runs once, after all three have finished, with their summary.
const (
	batchChildLabel    = "batch child (succeeds)"
	batchCancelLabel   = "batch child (cancels itself)"
	batchCallbackLabel = "batch callback: once, after its 3 children"
)

// BatchReport is what the demo's batch did.
type BatchReport struct {
	// ID is the batch's id; Callback its callback's job id.
	ID, Callback string
	// Info is the batch as the job table holds it once the demo settled.
	Info batch.Info
}

// batchStore wraps the demo's idempotency store with the batch Store, so that the worker counts
// the batch's children. The outbox table it enqueues the callback through is created later, by
// orders (the batch client makes no call until a child finishes).
func batchStore(ddb *dynamodb.Client, table, stack string, store *idempotency.DynamoDBStore, onOutbox func(), logger *slog.Logger) (*batch.Client, idempotency.Store, error) {
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(stack), Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	bc, err := batch.New(batch.Config{Client: ddb, Table: table, Outbox: ob, OnOutbox: onOutbox, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	wrapped, err := bc.WrapStore(store)
	if err != nil {
		return nil, nil, err
	}
	return bc, wrapped, nil
}

// enqueueBatch enqueues the batch: it is counted and sent, then sealed.
func enqueueBatch(ctx context.Context, w io.Writer, bc *batch.Client, prod *producer.Producer, track *tracker) (*BatchReport, error) {
	var children []producer.Message
	for _, args := range []interface{ Kind() string }{
		examplejobs.EmailArgs{To: "ada@example.com", Subject: "Your photos are ready"},
		examplejobs.EmailArgs{To: "grace@example.com", Subject: "Your photos are ready"},
		examplejobs.RefundArgs{Order: "order-44", Refunded: true},
	} {
		m, err := prod.Prepare(ctx, args)
		if err != nil {
			return nil, err
		}
		children = append(children, m)
	}
	cb, err := prod.Prepare(ctx, examplejobs.EmailArgs{To: "ops@example.com", Subject: "album-7: every photo is processed"})
	if err != nil {
		return nil, err
	}
	b, err := bc.Enqueue(ctx, prod, batch.Spec{Callback: &cb, Description: "album-7"}, children...)
	if err != nil {
		return nil, fmt.Errorf("demo: the batch: %w", err)
	}
	for i, m := range children {
		label := batchChildLabel
		if i == 2 {
			label = batchCancelLabel
		}
		track.expectJob(label, m.ID, m.Kind, m.Key)
	}
	track.expectJob(batchCallbackLabel, cb.ID, cb.Kind, cb.Key)
	fmt.Fprintf(w, "batch     %s (album-7): 3 children counted and sent, sealed; its callback %s runs once, when all 3 have finished\n", b.ID(), cb.ID)
	return &BatchReport{ID: b.ID(), Callback: cb.ID}, nil
}

// finish reads the batch as the job table holds it.
func (r *BatchReport) finish(ctx context.Context, bc *batch.Client) error {
	d, err := bc.Get(ctx, r.ID, 0)
	if err != nil {
		return err
	}
	r.Info = d.Info
	return nil
}

func (r *BatchReport) print(w io.Writer) {
	i := r.Info
	fmt.Fprintf(w, "\nbatch %s (%s): %s; %d children: %d succeeded, %d dead, %d cancelled; its callback %s was enqueued once, with that summary\n",
		i.ID, i.Description, i.State, i.Total, i.Succeeded, i.Dead, i.Cancelled, r.Callback)
}
