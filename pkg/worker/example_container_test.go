package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// ResizeImage is the job of this example.
type ResizeImage struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

// Kind implements jobs.Args.
func (ResizeImage) Kind() string { return "image.resize" }

// The main of a long-running consumer (a container, or a process on a laptop): the same
// worker.Handler a Lambda function uses, fed by pkg/poller, which gives it the semantics of
// Lambda's SQS event source mapping (batches, partial batch failures, deletes, a visibility
// heartbeat for long jobs) and stops on SIGTERM once the batches in flight are settled.
//
// In a container, main loads the AWS configuration from the environment
// (config.LoadDefaultConfig) and runs until it is stopped; here the embedded emulator stands in
// for AWS, and the example stops itself once its three jobs have run.
func Example_container() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	backend, err := awslocal.Shared() // in a container: config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example-container")})
	if err != nil {
		log.Fatal(err)
	}
	queueURL := stack.QueueURL // in a container: from the environment

	var mu sync.Mutex
	resized := map[string]int{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[ResizeImage](func(ctx context.Context, job *jobs.Job[ResizeImage]) error {
		mu.Lock()
		defer mu.Unlock()
		resized[job.Args.URL] = job.Args.Width
		if len(resized) == 3 {
			stop() // the example's own end; a container runs until SIGTERM
		}
		return nil
	}), jobs.WithTimeout(time.Minute))
	h, err := worker.New(worker.Config{Registry: reg, SQS: client, QueueURL: queueURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	p, err := poller.New(poller.Config{
		SQS:               client,
		QueueURL:          queueURL,
		Handler:           h,
		Concurrency:       2,               // batches in flight
		WaitTime:          time.Second,     // long polls
		InvocationTimeout: 5 * time.Minute, // each batch's deadline, as a function timeout
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}

	// A producer elsewhere enqueues the jobs.
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: queueURL})
	if err != nil {
		log.Fatal(err)
	}
	for i, u := range []string{"s3://photos/a.jpg", "s3://photos/b.jpg", "s3://photos/c.jpg"} {
		if _, err := prod.Enqueue(ctx, ResizeImage{URL: u, Width: 320 * (i + 1)}); err != nil {
			log.Fatal(err)
		}
	}

	if err := p.Run(ctx); err != nil { // until SIGTERM; the batches in flight finish first
		log.Fatal(err)
	}
	for _, u := range []string{"s3://photos/a.jpg", "s3://photos/b.jpg", "s3://photos/c.jpg"} {
		fmt.Println("resized", u, "to", resized[u], "px")
	}
	// Output:
	// resized s3://photos/a.jpg to 320 px
	// resized s3://photos/b.jpg to 640 px
	// resized s3://photos/c.jpg to 960 px
}
