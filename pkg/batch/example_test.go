package batch_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Resize makes one thumbnail.
type Resize struct {
	Image string `json:"image"`
}

func (Resize) Kind() string { return "image.resize" }

// AlbumReady is the batch's callback.
type AlbumReady struct {
	Album string `json:"album"`
}

func (AlbumReady) Kind() string { return "album.ready" }

// Three thumbnails as one batch, one of which cannot be made: the callback runs once, when all
// three have finished, and learns how they did.
func ExampleClient_Enqueue() {
	ctx := context.Background()
	// The embedded emulator stands in for AWS; in production pass your clients and names.
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	ddb, sqsClient := backend.DynamoDB(), sqs.NewFromConfig(backend.Config)
	name := awslocal.UniqueName("example")
	stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: name})
	if err != nil {
		log.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := dynamooutbox.CreateTable(ctx, ddb, awslocal.OutboxTableName(name)); err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(name), Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}
	wake := make(chan struct{}, 1)
	client, err := batch.New(batch.Config{Client: ddb, Table: table, Outbox: ob, OnOutbox: func() {
		select {
		case wake <- struct{}{}: // the local relay sends the callback at once (on AWS: the stream)
		default:
		}
	}})
	if err != nil {
		log.Fatal(err)
	}

	// The worker: its idempotency store wrapped by the batch Store, which counts the children.
	done := make(chan batch.Summary, 1)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[Resize](func(ctx context.Context, j *jobs.Job[Resize]) error {
		if j.Args.Image == "broken.png" {
			return jobs.Cancel(fmt.Errorf("%s is not an image", j.Args.Image))
		}
		return nil
	}))
	jobs.MustRegister(reg, jobs.WorkFunc[AlbumReady](func(ctx context.Context, j *jobs.Job[AlbumReady]) error {
		sum, _ := batch.SummaryFrom(ctx)
		done <- sum
		return nil
	}))
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	store, err := client.WrapStore(inner)
	if err != nil {
		log.Fatal(err)
	}
	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	h, err := worker.New(worker.Config{Registry: reg, SQS: sqsClient, QueueURL: stack.QueueURL, DLQURL: stack.DLQURL,
		Middleware: []worker.Middleware{idem}, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	p, err := poller.New(poller.Config{SQS: sqsClient, QueueURL: stack.QueueURL, Handler: h, WaitTime: time.Second, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	relay, err := dynamooutbox.NewRunner(dynamooutbox.RunnerConfig{Outbox: ob, Producers: []*producer.Producer{prod},
		Relay: outbox.RelayConfig{Wake: wake}, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go p.Run(runCtx)
	go relay.Run(runCtx)

	// The batch: three children and the callback.
	var children []producer.Message
	for _, img := range []string{"a.png", "b.png", "broken.png"} {
		m, err := prod.Prepare(ctx, Resize{Image: img})
		if err != nil {
			log.Fatal(err)
		}
		children = append(children, m)
	}
	cb, err := prod.Prepare(ctx, AlbumReady{Album: "holidays"})
	if err != nil {
		log.Fatal(err)
	}
	b, err := client.Enqueue(ctx, prod, batch.Spec{ID: "holidays-" + name, Callback: &cb}, children...)
	if err != nil {
		log.Fatal(err)
	}
	sum := <-done
	fmt.Printf("batch %t: %d children, %d succeeded, %d dead (%s)\n", sum.Batch == b.ID(), sum.Total, sum.Succeeded, sum.Dead,
		map[bool]string{true: "the broken one"}[len(sum.NotSucceeded) == 1 && sum.NotSucceeded[0] == children[2].ID])
	// Output: batch true: 3 children, 2 succeeded, 1 dead (the broken one)
}

// A batch whose children finish faster than about 100 a second spreads its counters over
// several items (docs/BATCHES.md, "Counter shards"): each child is counted on one of them, and
// listings, Get and the callback's summary add them up.
func ExampleSpec_counterShards() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	ddb, sqsClient := backend.DynamoDB(), sqs.NewFromConfig(backend.Config)
	name := awslocal.UniqueName("example")
	stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: name})
	if err != nil {
		log.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := dynamooutbox.CreateTable(ctx, ddb, awslocal.OutboxTableName(name)); err != nil {
		log.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(name)})
	if err != nil {
		log.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}
	client, err := batch.New(batch.Config{Client: ddb, Table: table, Outbox: ob})
	if err != nil {
		log.Fatal(err)
	}

	// 8 counter shards: up to about 800 children finishing a second.
	b, err := client.Start(ctx, batch.Spec{CounterShards: 8})
	if err != nil {
		log.Fatal(err)
	}
	var children []producer.Message
	for i := range 200 {
		m, err := prod.Prepare(ctx, Resize{Image: fmt.Sprintf("%d.png", i)})
		if err != nil {
			log.Fatal(err)
		}
		children = append(children, m)
	}
	if err := b.Add(ctx, prod, children...); err != nil {
		log.Fatal(err)
	}
	if err := b.Seal(ctx); err != nil {
		log.Fatal(err)
	}
	d, err := client.Get(ctx, b.ID(), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d children on %d counter shards, %d to run\n", d.State, d.Total, d.CounterShards, d.Remaining)
	// Output: sealed: 200 children on 8 counter shards, 200 to run
}
