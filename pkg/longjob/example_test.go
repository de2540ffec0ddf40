package longjob_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Reindex is a long job: it goes over Docs documents, one step per document.
type Reindex struct {
	Docs int `json:"docs"`
}

// Kind implements jobs.Args.
func (Reindex) Kind() string { return "search.reindex" }

// A job longer than its slice: Iterate saves its cursor as it goes, the worker ends its run
// after the kind's one-second slice (here under a poller; in Lambda the invocation's deadline
// ends it too), re-sends it, and the next run goes on from the cursor. The job completes with
// every document done once and no attempt spent.
func ExampleIterate() {
	ctx := context.Background()
	backend, err := awslocal.Shared() // in a function: config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example-long")})
	if err != nil {
		log.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, backend.DynamoDB(), stack.Name)
	if err != nil {
		log.Fatal(err)
	}
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: backend.DynamoDB(), Table: table})
	if err != nil {
		log.Fatal(err)
	}
	// The cursors live on the job records: the idempotency middleware is required.
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}

	var mu sync.Mutex
	done := map[int]int{} // document → times reindexed
	runs := 0
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[Reindex](func(ctx context.Context, job *jobs.Job[Reindex]) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return longjob.Iterate(ctx, 0, func(ctx context.Context, doc int) (int, bool, error) {
			time.Sleep(100 * time.Millisecond) // the work on one document
			mu.Lock()
			done[doc]++
			mu.Unlock()
			return doc + 1, doc+1 == job.Args.Docs, nil
		}, longjob.Options{Every: -1}) // a checkpoint after every document
	}), jobs.WithSlice(time.Second))

	h, err := worker.New(worker.Config{Registry: reg, SQS: client, QueueURL: stack.QueueURL, DLQURL: stack.DLQURL,
		Middleware: []worker.Middleware{mw}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	p, err := poller.New(poller.Config{SQS: client, QueueURL: stack.QueueURL, Handler: h, WaitTime: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = p.Run(pctx) }()

	prod, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}
	res, err := prod.Enqueue(ctx, Reindex{Docs: 25})
	if err != nil {
		log.Fatal(err)
	}
	st, err := status.New(status.Config{Client: backend.DynamoDB(), Table: table})
	if err != nil {
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	j, err := st.Wait(wctx, res.ID, status.WaitOptions{Interval: 100 * time.Millisecond, MaxInterval: 200 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	once := 0
	for _, n := range done {
		if n == 1 {
			once++
		}
	}
	fmt.Println("state:", j.State)
	fmt.Println("documents reindexed once:", once)
	fmt.Println("continued in new runs:", runs > 1 && j.Continuations == runs-1)
	fmt.Println("attempts spent:", j.Runs)
	// Output:
	// state: succeeded
	// documents reindexed once: 25
	// continued in new runs: true
	// attempts spent: 1
}
