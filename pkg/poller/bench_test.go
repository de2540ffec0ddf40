package poller_test

import (
	"context"
	"crypto/md5" //nolint:gosec // SQS defines the body digest as MD5.
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// memoryQueue is an SQS client without a network: ReceiveMessage hands out up to 10 of a fixed
// set of messages (as SQS returns them: system attributes, MD5 of the body) until n have been
// received, then waits as an empty long poll does; DeleteMessageBatch counts the deletes.
type memoryQueue struct {
	msgs     []sqstypes.Message
	n        int64
	received atomic.Int64
	deleted  atomic.Int64
	done     chan struct{}
	once     sync.Once
}

func newMemoryQueue(n int) *memoryQueue {
	q := &memoryQueue{n: int64(n), done: make(chan struct{})}
	for i := range 10 {
		env := jobs.Envelope{V: 1, ID: jobs.NewID(), Kind: "noop", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
			EnqueuedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
		body, _ := env.MarshalJSON()
		sum := md5.Sum(body) //nolint:gosec // SQS defines the body digest as MD5.
		q.msgs = append(q.msgs, sqstypes.Message{
			MessageId:     aws.String("059f36b4-87a3-44ab-83d2-66172702000" + strconv.Itoa(i)),
			ReceiptHandle: aws.String(benchReceiptHandle + strconv.Itoa(i)),
			Body:          aws.String(string(body)),
			MD5OfBody:     aws.String(hex.EncodeToString(sum[:])),
			Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764583200000",
				"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1764583200123"},
		})
	}
	return q
}

// benchReceiptHandle is as long as a real receipt handle.
const benchReceiptHandle = "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a/pYi2GNRfOLmC0aKZ9sHRpnODAdEX8tBcLkM2MRt9aT5GrTPAY82Nfv3Vp4VPJ4zDlMwvGPBChLhoQRHu4kCcZXT5PzEjG2RxEjWmHIZ1UTHBrgW3dZxSnjM39MjvWgkDmOoUDJbYt+GKqHQ8Mr8YK3jIqkbUBNyzD1uj26b9HNKGv+8A0jGwYE6Wew4Qq8ic44DfYs4OgwGcjRh4sgdyx2wGPT87Y2ViGvlS5vSq/lGWsROHeGV0gzaDMDUbJcyLSEYHJj+FOAjhC3GbWlgrFzM6hsVT+s+WN2XGBzgYwOMuB0eNGcijDBTVjKVFo28qmDkhrsMB5uOmuK1qTjMeuhKMuQLUHlSBfUk01FvdDhWnUDpqYSdUpBcSx"

func (q *memoryQueue) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn": "arn:aws:sqs:us-east-1:123456789012:jobs", "VisibilityTimeout": "30"}}, nil
}

func (q *memoryQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	k := int64(in.MaxNumberOfMessages)
	if got := q.received.Add(k); got-k >= q.n {
		<-ctx.Done() // an empty long poll, until the poller stops
		return nil, ctx.Err()
	}
	// A copy, as each answer of the SDK is its own.
	return &sqs.ReceiveMessageOutput{Messages: append([]sqstypes.Message(nil), q.msgs[:k]...)}, nil
}

func (q *memoryQueue) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out := &sqs.DeleteMessageBatchOutput{Successful: make([]sqstypes.DeleteMessageBatchResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		out.Successful[i].Id = e.Id
	}
	if q.deleted.Add(int64(len(in.Entries))) >= q.n {
		q.once.Do(func() { close(q.done) })
	}
	return out, nil
}

func (q *memoryQueue) ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

// BenchmarkPoller measures the poller's and the worker's own work per message, without the SDK or
// a network: batches of 10 no-op jobs received from memory, run by worker.Handler and deleted, at
// 1 and 4 concurrent batches (what the end-to-end benchmark compares with the raw SDK loop).
func BenchmarkPoller(b *testing.B) {
	const perRun = 10000
	for _, batches := range []int{1, 4} {
		b.Run("batches="+strconv.Itoa(batches), func(b *testing.B) {
			reg := jobs.NewRegistry()
			jobs.MustRegister(reg, jobs.WorkFunc[noopArgs](func(context.Context, *jobs.Job[noopArgs]) error { return nil }))
			logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
			b.ReportAllocs()
			for b.Loop() {
				q := newMemoryQueue(perRun)
				h, err := worker.New(worker.Config{Registry: reg, SQS: noSQS{}, Logger: logger})
				if err != nil {
					b.Fatal(err)
				}
				p, err := poller.New(poller.Config{SQS: q, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
					Handler: h, Concurrency: batches, BatchSize: 10, WaitTime: time.Second, Logger: logger})
				if err != nil {
					b.Fatal(err)
				}
				ctx, stop := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { errc <- p.Run(ctx) }()
				<-q.done
				stop()
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRun), "ns/job")
		})
	}
}

// noSQS is the worker's SQS client in BenchmarkPoller: every job succeeds, so it is never called.
type noSQS struct{ worker.SQSAPI }
