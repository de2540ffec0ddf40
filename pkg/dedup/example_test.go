package dedup_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// ExportArgs are the args of a report export.
type ExportArgs struct {
	User int `json:"user"`
}

// Kind names the job.
func (ExportArgs) Kind() string { return "report.export" }

// A user double-clicks "export": the second enqueue is a duplicate of the first job, and sends
// nothing. On the embedded emulator.
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		panic(err)
	}
	q := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, q, awslocal.StackOptions{Name: awslocal.UniqueName("example")})
	if err != nil {
		panic(err)
	}
	ddb := dynamodb.NewFromConfig(backend.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table, err := awslocal.ProvisionTable(ctx, ddb, stack.Name)
	if err != nil {
		panic(err)
	}
	jobsTable, err := status.New(status.Config{Client: ddb, Table: table})
	if err != nil {
		panic(err)
	}
	prod, err := producer.New(producer.Config{SQS: q, QueueURL: stack.QueueURL, Status: jobsTable})
	if err != nil {
		panic(err)
	}
	enq, err := dedup.New(dedup.Config{Producer: prod, DynamoDB: ddb, Table: table, Jobs: jobsTable})
	if err != nil {
		panic(err)
	}

	// One export per user while one is waiting or running, for an hour at most.
	rule := dedup.Unique{Fields: []string{"user"}, Window: time.Hour, States: dedup.WhileActive}
	first, err := enq.Enqueue(ctx, ExportArgs{User: 7}, rule)
	if err != nil {
		panic(err)
	}
	second, err := enq.Enqueue(ctx, ExportArgs{User: 7}, rule)
	if err != nil {
		panic(err)
	}
	fmt.Println(first.Outcome, first.MessageID != "")
	fmt.Println(second.Outcome, second.ID == first.ID, second.State, second.MessageID == "")
	// Output:
	// enqueued true
	// duplicate true queued true
}
