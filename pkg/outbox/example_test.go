package outbox_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// ConfirmOrder is the job of this example.
type ConfirmOrder struct {
	Order string `json:"order"`
}

// Kind implements jobs.Args.
func (ConfirmOrder) Kind() string { return "order.confirm" }

// A relay moves committed jobs from an outbox to their queue. Here the outbox is the in-memory
// store (what the DynamoDB and PostgreSQL stores do in a transaction, Add does at once) and the
// queue is on the embedded emulator.
func ExampleRelay() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example-outbox")})
	if err != nil {
		log.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}

	// The business transaction's side: the job is prepared (its id fixed now) and stored.
	store := outbox.NewMemoryStore()
	msg, err := prod.Prepare(ctx, ConfirmOrder{Order: "1001"}, producer.WithKey("confirm-1001"))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Add(outbox.Entry{Message: msg, CreatedAt: time.Now()}); err != nil {
		log.Fatal(err)
	}

	// The relay's side: claim, send, write back.
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Producers: []*producer.Producer{prod}})
	if err != nil {
		log.Fatal(err)
	}
	stats, err := relay.Drain(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent:", stats.Sent, "left in the outbox:", store.Len())

	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(stack.QueueURL), WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 {
		log.Fatal(err, len(out.Messages))
	}
	env, err := jobs.ParseEnvelope(aws.ToString(out.Messages[0].Body))
	fmt.Println("on the queue:", env.Kind, env.Key, env.ID == msg.ID, err)
	// Output:
	// sent: 1 left in the outbox: 0
	// on the queue: order.confirm confirm-1001 true <nil>
}
