package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// The demo's rows of deduplication at enqueue (pkg/dedup).
const (
	uniqueLabel   = "clicked twice under a unique key (pkg/dedup): sent once"
	debounceLabel = "3 enqueues debounced into one job with the last args (pkg/dedup)"
)

// demoDedup enqueues an export twice under a unique key (the second is a duplicate: nothing is
// sent) and three invoice edits under a debounce (one job, moved by each, fired with the last
// args when the dispatcher's clock moves forward).
func demoDedup(ctx context.Context, w io.Writer, prod *producer.Producer, ddb dedup.DynamoDBAPI, table string, st *status.Table,
	sched *schedule.Client, clock func() time.Time, track *tracker) error {
	enq, err := dedup.New(dedup.Config{Producer: prod, DynamoDB: ddb, Table: table, Jobs: st, Scheduler: sched, LocalScheduler: true, Now: clock})
	if err != nil {
		return err
	}
	export := examplejobs.EmailArgs{To: "joan@example.com", Subject: "Your export"}
	unique := dedup.Unique{Fields: []string{"to"}, Window: time.Hour, States: dedup.WhileActive}
	first, err := enq.Enqueue(ctx, export, unique)
	if err != nil {
		return err
	}
	second, err := enq.Enqueue(ctx, export, unique)
	if err != nil {
		return err
	}
	if first.Outcome != dedup.Enqueued || second.Outcome != dedup.Duplicate || second.ID != first.ID {
		return fmt.Errorf("demo: unique key: %s then %s of %s, want enqueued then a duplicate of %s", first.Outcome, second.Outcome, second.ID, first.ID)
	}
	track.expect(first.MessageID, uniqueLabel, first.ID, first.Kind, first.Key)
	fmt.Fprintf(w, "unique    %s %s sent; the second click is a duplicate of it (%s): nothing sent\n", first.Kind, first.ID, second.State)

	debounce := dedup.Debounce{Key: "invoice-3000", Period: 2 * time.Minute}
	var res dedup.Result
	for i := 1; i <= 3; i++ {
		if res, err = enq.Enqueue(ctx, examplejobs.InvoiceArgs{Invoice: 3000 + i}, debounce); err != nil {
			return err
		}
	}
	track.expectJob(debounceLabel, res.ID, res.Kind, res.Key)
	fmt.Fprintf(w, "debounced %s %s: %d enqueues, runs at %s with the last args (invoice 3003)\n",
		res.Kind, res.ID, res.Events, res.RunAt.UTC().Format(time.TimeOnly))
	return nil
}
