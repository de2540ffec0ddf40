package producer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// EmailArgs are the arguments of an "email.send" job.
type EmailArgs struct {
	To       string `json:"to"`
	Template string `json:"template"`
}

// Kind names the job type.
func (EmailArgs) Kind() string { return "email.send" }

func ExampleProducer_Enqueue() {
	ctx := context.Background()

	// The embedded emulator stands in for AWS; in production, pass sqs.NewFromConfig(cfg) and
	// your queue's URL.
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example")})
	if err != nil {
		log.Fatal(err)
	}

	p, err := producer.New(producer.Config{
		SQS:      client,
		QueueURL: stack.QueueURL,
		// A fixed clock and id source make this example's output stable; omit them normally.
		Clock: func() time.Time { return time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC) },
		IDs:   jobs.IDSource{Rand: func() uint64 { return 42 }},
	})
	if err != nil {
		log.Fatal(err)
	}

	res, err := p.Enqueue(ctx, EmailArgs{To: "a@b.c", Template: "welcome"},
		producer.WithKey("order-42-welcome"),
		producer.WithMaxAttempts(5),
	)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", res.ID, "key", res.Key)

	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &stack.QueueURL, WaitTimeSeconds: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*out.Messages[0].Body)
	fmt.Println("same message:", *out.Messages[0].MessageId == res.MessageID)
	// Output:
	// job 01M8KBYJBV00N000000000001A key order-42-welcome
	// {"v":1,"id":"01M8KBYJBV00N000000000001A","kind":"email.send","args":{"to":"a@b.c","template":"welcome"},"key":"order-42-welcome","enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":5}
	// same message: true
}

func ExampleProducer_EnqueueBatch() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example-batch")})
	if err != nil {
		log.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}

	results, err := p.EnqueueBatch(ctx, []producer.Request{
		{Args: EmailArgs{To: "a@b.c", Template: "welcome"}, Options: []producer.Option{producer.WithKey("order-42-welcome")}},
		{Args: EmailArgs{To: "d@e.f", Template: "reminder"}, Options: []producer.Option{producer.WithDelay(10 * time.Minute)}},
		{Args: EmailArgs{To: "g@h.i", Template: "digest"}, Options: []producer.Option{producer.WithDelay(2 * time.Hour)}},
	})
	if err != nil {
		log.Fatal(err) // nothing could be sent at all
	}
	for i, r := range results {
		if r.Err != nil {
			fmt.Printf("job %d: %v\n", i, r.Err)
			continue
		}
		fmt.Printf("job %d: enqueued\n", i)
	}
	// Output:
	// job 0: enqueued
	// job 1: enqueued
	// job 2: producer: job 2 (email.send): delay 2h0m0s is longer than SQS's 15-minute maximum (DelaySeconds 0-900): longer delays go through EventBridge Scheduler: set producer.Config.Scheduler
}
