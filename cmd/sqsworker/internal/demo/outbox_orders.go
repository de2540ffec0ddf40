package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// OutboxReport is what the demo's orders did.
type OutboxReport struct {
	// Table is the outbox table; Orders the business table.
	Table, Orders string
	// Committed is the job of the order whose transaction committed.
	Committed string
	// Refused is the job of the order whose transaction was cancelled, and RefusedErr why.
	Refused    string
	RefusedErr string
	// RefusedFound lists where the refused job was found afterwards (the outbox, the job table,
	// the worker): it must stay empty.
	RefusedFound []string
}

// The demo's orders: an order and its confirmation email in one transaction, through the
// transactional outbox (docs/OUTBOX.md).
const (
	orderCommitted = "order-1001"
	orderRefused   = "order-1002"
	stockItem      = "stock#blue-widget"
	committedLabel = "order-1001 + its email, one transaction (outbox)"
	refusedLabel   = "order-1002: its transaction failed, never enqueued"
	// neverEnqueued is the outcome shown for the refused order's job.
	neverEnqueued = "never enqueued"
)

// orders sets up the outbox: its table, the business table with one blue widget in stock, and
// the relay; then it places two orders of the widget, each with its email.send job in the same
// transaction. The first commits; the second's stock condition fails, so neither its order nor
// its job is written. It returns the relay to run beside the poller. prod prepares the jobs; the
// relay gets a producer of its own, with the scheduler and without the job table: the outbox
// transaction already wrote each job's queued record (outbox.RelayConfig.Producers).
func orders(ctx context.Context, w io.Writer, b *awslocal.Backend, stack *awslocal.Stack, sqsClient *sqs.Client, prod *producer.Producer,
	sched producer.JobScheduler, st *status.Table, track *tracker, logger *slog.Logger) (*dynamooutbox.Runner, *dynamooutbox.Outbox, *OutboxReport, error) {
	ddb := b.DynamoDB()
	table := awslocal.OutboxTableName(stack.Name)
	streamARN, err := dynamooutbox.CreateTable(ctx, ddb, table)
	if err != nil {
		return nil, nil, nil, err
	}
	rep := &OutboxReport{Table: table, Orders: stack.Name + "-orders"}
	if _, err := ddbtable.Create(ctx, ddb, &dynamodb.CreateTableInput{
		TableName: aws.String(rep.Orders), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	}, ddbtable.Wait{}); err != nil {
		return nil, nil, nil, fmt.Errorf("demo: the orders table: %w", err)
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(rep.Orders), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: stockItem}, "count": &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		return nil, nil, nil, err
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: table, Status: st, Logger: logger})
	if err != nil {
		return nil, nil, nil, err
	}
	relayProd, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL, Scheduler: sched})
	if err != nil {
		return nil, nil, nil, err
	}
	runner, err := dynamooutbox.NewRunner(dynamooutbox.RunnerConfig{Outbox: ob, Producers: []*producer.Producer{relayProd}, ID: "demo",
		Streams: dynamodbstreams.NewFromConfig(b.Config), StreamARN: streamARN,
		Relay: outbox.RelayConfig{PollInterval: 200 * time.Millisecond}, Logger: logger})
	if err != nil {
		return nil, nil, nil, err
	}
	place := func(order string) (dynamooutbox.Job, error) {
		j, err := ob.Prepare(ctx, prod, examplejobs.EmailArgs{To: "ada@example.com", Subject: "Your " + order}, producer.WithKey(order+"-confirmation"))
		if err != nil {
			return j, err
		}
		_, err = ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{ // take the widget from the stock, if there is one
				TableName: aws.String(rep.Orders), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: stockItem}},
				UpdateExpression: aws.String("SET #c = #c - :one"), ConditionExpression: aws.String("#c >= :one"),
				ExpressionAttributeNames:  map[string]string{"#c": "count"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
			}},
			{Put: &types.Put{ // the order
				TableName: aws.String(rep.Orders), ConditionExpression: aws.String("attribute_not_exists(id)"),
				Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: order}, "item": &types.AttributeValueMemberS{Value: "blue-widget"}},
			}},
		}}, j)
		return j, err
	}
	j, err := place(orderCommitted)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: place %s: %w", orderCommitted, err)
	}
	rep.Committed = j.ID()
	track.expectJob(committedLabel, j.ID(), j.Entry.Message.Kind, j.Entry.Message.Key)
	fmt.Fprintf(w, "outbox    %s and its email.send job %s: committed in one transaction (stock 1 → 0); its status: queued, in the outbox\n", orderCommitted, j.ID())
	j2, err := place(orderRefused)
	var te *dynamooutbox.TransactionError
	if !errors.As(err, &te) || !te.ConditionFailed(0) {
		return nil, nil, nil, fmt.Errorf("demo: %s should have failed its stock condition, got %v", orderRefused, err)
	}
	rep.Refused, rep.RefusedErr = j2.ID(), err.Error()
	fmt.Fprintf(w, "outbox    %s and its email.send job %s: transaction cancelled, the widget is sold out\n          (%s)\n",
		orderRefused, j2.ID(), te.Actions[0]+": "+aws.ToString(te.Reasons[0].Code))
	return runner, ob, rep, nil
}

// checkRefused looks for the refused order's job everywhere it could be: the outbox, the job
// table, the worker's outcomes (rows). It must be found nowhere. It returns the job's row.
func (r *OutboxReport) checkRefused(ctx context.Context, ob *dynamooutbox.Outbox, st *status.Table, rows []Row) (Row, error) {
	row := Row{Label: refusedLabel, JobID: r.Refused, Kind: examplejobs.EmailArgs{}.Kind(), Key: orderRefused + "-confirmation", Outcome: neverEnqueued}
	if _, err := ob.Get(ctx, r.Refused); err == nil {
		r.RefusedFound = append(r.RefusedFound, "the outbox")
	} else if !errors.Is(err, outbox.ErrNotFound) {
		return row, err
	}
	if _, err := st.Get(ctx, row.Kind, row.Key); err == nil {
		r.RefusedFound = append(r.RefusedFound, "the job table")
	} else if !errors.Is(err, status.ErrNotFound) {
		return row, err
	}
	for _, other := range rows {
		if other.JobID == r.Refused {
			r.RefusedFound = append(r.RefusedFound, "the worker")
		}
	}
	return row, nil
}

func (r *OutboxReport) print(w io.Writer) {
	where := "nowhere: not in the outbox, no status record, never delivered"
	if len(r.RefusedFound) > 0 {
		where = fmt.Sprint(r.RefusedFound)
	}
	fmt.Fprintf(w, "\noutbox: %s's job %s ran once (above); %s's job %s is found %s\n", orderCommitted, r.Committed, orderRefused, r.Refused, where)
}
