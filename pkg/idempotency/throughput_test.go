package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// countingDynamoDB counts the calls the store makes.
type countingDynamoDB struct {
	*dynamodb.Client
	updates, gets, puts atomic.Int64
}

func (c *countingDynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *countingDynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

func (c *countingDynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.puts.Add(1)
	return c.Client.PutItem(ctx, in, o...)
}

// BenchmarkPollerThroughput measures jobs/s through the poller and the worker on the embedded
// emulator, with and without the idempotency middleware (DynamoDB store), at the same
// concurrency: each iteration enqueues 2,000 no-op jobs and runs until all succeeded.
//
//	go test -run '^$' -bench PollerThroughput -benchtime 3x ./pkg/idempotency
func BenchmarkPollerThroughput(b *testing.B) {
	const n = 2000
	backend := awslocaltest.Backend(b)
	for _, withIdem := range []bool{false, true} {
		b.Run(fmt.Sprintf("idempotency=%v", withIdem), func(b *testing.B) {
			ctx := context.Background()
			sqsClient := sqs.NewFromConfig(backend.Config)
			ddb := &countingDynamoDB{Client: backend.DynamoDB()}
			var total time.Duration
			var jobsDone int64
			for b.Loop() {
				stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: awslocal.UniqueName("tp")})
				if err != nil {
					b.Fatal(err)
				}
				var mws []worker.Middleware
				if withIdem {
					table, err := awslocal.ProvisionTable(ctx, backend.DynamoDB(), awslocal.UniqueName("tp"))
					if err != nil {
						b.Fatal(err)
					}
					store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: table})
					if err != nil {
						b.Fatal(err)
					}
					mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					mws = append(mws, mw)
				}
				reg := jobs.NewRegistry()
				jobs.MustRegister(reg, jobs.WorkFunc[chargeArgs](func(context.Context, *jobs.Job[chargeArgs]) error { return nil }))
				var succeeded atomic.Int64
				done := make(chan struct{})
				h, err := worker.New(worker.Config{Registry: reg, SQS: sqsClient, QueueURL: stack.QueueURL, DLQURL: stack.DLQURL,
					Middleware: mws, Logger: slog.New(slog.DiscardHandler),
					OnBatch: func(_ context.Context, os []worker.Outcome) {
						for _, o := range os {
							if o.Outcome == worker.OutcomeSucceeded && succeeded.Add(1) == n {
								close(done)
							}
						}
					}})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				enqueueRaw(b, sqsClient, stack.QueueURL, n)
				ddb.updates.Store(0)
				ddb.gets.Store(0)
				ddb.puts.Store(0)
				b.StartTimer()
				p, err := poller.New(poller.Config{SQS: sqsClient, QueueURL: stack.QueueURL, Handler: h, Concurrency: 4,
					BatchSize: 10, WaitTime: time.Second, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				runCtx, stop := context.WithCancel(ctx)
				errc := make(chan error, 1)
				go func() { errc <- p.Run(runCtx) }()
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					b.Fatal("jobs did not finish")
				}
				total += time.Since(start)
				jobsDone += n
				stop()
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(jobsDone)/total.Seconds(), "jobs/s")
			if withIdem {
				perJob := float64(ddb.updates.Load()+ddb.gets.Load()+ddb.puts.Load()) / float64(n)
				b.ReportMetric(perJob, "ddb-calls/job")
			}
		})
	}
}

func enqueueRaw(b *testing.B, client *sqs.Client, url string, n int) {
	b.Helper()
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			body := `{"v":1,"id":"` + jobs.NewID() + `","kind":"payment.charge","args":{"order":"` + strconv.Itoa(j) + `","amount":1}}`
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j - i)), MessageBody: aws.String(body)})
		}
		if _, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			b.Fatal(err)
		}
	}
}
