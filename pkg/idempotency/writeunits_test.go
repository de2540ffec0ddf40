package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// meteredStore returns a DynamoDB store on a new table of the embedded emulator whose every write
// is billed by a ledger (DynamoDB's rules: item sizes before and after, indexes touched; the
// emulator reports no consumed capacity), and the ledger.
func meteredStore(t *testing.T, layout idempotency.Layout) (*idempotency.DynamoDBStore, *awscost.Ledger) {
	t.Helper()
	b := awslocaltest.Backend(t)
	plain := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := awslocal.UniqueName("wru")
	in := idempotency.TableInput(table)
	if _, err := awslocal.ProvisionTable(context.Background(), plain, table); err != nil {
		t.Fatal(err)
	}
	table = awslocal.TableName(table)
	in = idempotency.TableInput(table)
	ledger := awscost.NewLedger(map[string]awscost.Schema{table: awscost.SchemaFromCreateTable(in)})
	var mu sync.Mutex
	var failure error
	cfg := b.Config.Copy()
	cfg.HTTPClient = &awscost.Counter{Next: b.Config.HTTPClient, OnWrite: func(w awscost.Write) {
		if w.Status != http.StatusOK && !w.ConditionFailed {
			return
		}
		schema, _ := ledger.Schema(w.Table)
		key := schema.Key(w)
		out, err := plain.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.Table), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			_, err = ledger.Record(w.Table, key, out.Item, w.ConditionFailed)
		}
		if err != nil {
			mu.Lock()
			failure = errors.Join(failure, err)
			mu.Unlock()
		}
	}}
	t.Cleanup(func() {
		if failure != nil {
			t.Errorf("ledger: %v", failure)
		}
	})
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	s, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: table, Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	return s, ledger
}

// TestWriteUnitsPerJob bills, by DynamoDB's rules, the writes of jobs run through the worker and
// the middleware on the embedded emulator. A first-time success of a job without a key (its key
// is its id) costs 2 write units, claim and finish: under the default layout its record is kept
// under its id and the by_id index is not written. A job with a key of its own, or any job under
// LayoutKindKey, also writes its by_id entry at the claim: 3.
func TestWriteUnitsPerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	args := `{"order":"o","amount":1}`
	for _, tt := range []struct {
		name    string
		layout  idempotency.Layout
		key     string // "" for a job whose key is its id
		run     func(r *rig, msg func(receives int) events.SQSMessage)
		table   int
		indexes map[string]int
	}{
		{"no key: succeeds", idempotency.LayoutByID, "", func(r *rig, msg func(int) events.SQSMessage) {
			r.deliver(ctx, msg(1))
		}, 2, nil},
		{"no key: succeeds, then a duplicate delivery", idempotency.LayoutByID, "", func(r *rig, msg func(int) events.SQSMessage) {
			r.deliver(ctx, msg(1))
			r.deliver(ctx, msg(2)) // one refused conditional write
		}, 3, nil},
		{"no key: fails once, then succeeds", idempotency.LayoutByID, "", func(r *rig, msg func(int) events.SQSMessage) {
			r.work = func(context.Context, *jobs.Job[chargeArgs]) error { r.work = nil; return errors.New("boom") }
			r.deliver(ctx, msg(1))
			r.deliver(ctx, msg(2))
		}, 4, map[string]int{idempotency.IndexByStatus: 2}}, // retrying enters by_status, the next claim leaves it
		{"own key: succeeds", idempotency.LayoutByID, "order-42", func(r *rig, msg func(int) events.SQSMessage) {
			r.deliver(ctx, msg(1))
		}, 2, map[string]int{idempotency.IndexByID: 1}},
		{"no key, LayoutKindKey: succeeds", idempotency.LayoutKindKey, "", func(r *rig, msg func(int) events.SQSMessage) {
			r.deliver(ctx, msg(1))
		}, 2, map[string]int{idempotency.IndexByID: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, ledger := meteredStore(t, tt.layout)
			r := newRig(t, store, 5, nil)
			id := jobs.NewID()
			msg := func(receives int) events.SQSMessage {
				m := jobMessage("m-"+id, id, "payment.charge", tt.key, args)
				m.Attributes["ApproximateReceiveCount"] = strconv.Itoa(receives)
				return m
			}
			tt.run(r, msg)
			table, ix, _ := ledger.Totals()
			if table != tt.table || len(ix) != len(tt.indexes) {
				t.Fatalf("write units: table %d, indexes %v; want %d, %v", table, ix, tt.table, tt.indexes)
			}
			for name, u := range tt.indexes {
				if ix[name] != u {
					t.Errorf("write units of %s: %d, want %d", name, ix[name], u)
				}
			}
		})
	}
}
