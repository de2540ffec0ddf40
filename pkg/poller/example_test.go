package poller_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

// A handler written for Lambda's SQS event source mapping runs unchanged under a Poller. This
// example uses the embedded emulator and stops the poller after the first batch; Run returns once
// that batch's messages are deleted.
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example")})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(stack.QueueURL), MessageBody: aws.String(`{"to":"a@b.c"}`),
	}); err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	p, err := poller.New(poller.Config{
		SQS:      client,
		QueueURL: stack.QueueURL,
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			for _, r := range ev.Records {
				fmt.Println(r.EventSource, r.Body, "receive count", r.Attributes["ApproximateReceiveCount"])
			}
			stop() // shut down after this batch
			return events.SQSEventResponse{}, nil
		}),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: aws:sqs {"to":"a@b.c"} receive count 1
}

// A container's main: AWS configuration from the environment, batches of up to 100 gathered for
// up to 2 s, 4 batches at a time, and a graceful shutdown on SIGTERM that lets the batches in
// flight finish.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var handler poller.Handler // e.g. the same *worker.Handler the Lambda function uses
	p, err := poller.New(poller.Config{
		SQS:               sqs.NewFromConfig(cfg),
		QueueURL:          os.Getenv("QUEUE_URL"),
		Handler:           handler,
		BatchSize:         100,
		BatchWindow:       2 * time.Second,
		Concurrency:       4,
		InvocationTimeout: 15 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
