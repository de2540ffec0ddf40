package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/metrics"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// noopSQS stands in for the SQS client: a batch whose jobs all succeed needs no SQS call.
type noopSQS struct{}

var errNoSQS = errors.New("no SQS in this example")

func (noopSQS) ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return nil, errNoSQS
}

func (noopSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errNoSQS
}

func (noopSQS) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return nil, errNoSQS
}

func (noopSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, errNoSQS
}

// Resize is a job's arguments.
type Resize struct {
	Image string `json:"image"`
}

func (Resize) Kind() string { return "image.resize" }

// A Recorder wired as the worker's OnBatch writes one EMF line per kind per batch to stdout,
// where Lambda hands it to CloudWatch Logs.
func Example() {
	const queueARN = "arn:aws:sqs:eu-west-1:123456789012:images"
	// A fake clock: the job "takes" 42.5 ms, and the message was sent 1.2 s before the batch.
	var nowMicros atomic.Int64
	nowMicros.Store(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).UnixMicro())
	now := func() time.Time { return time.UnixMicro(nowMicros.Load()) }

	rec, err := metrics.New(metrics.Config{
		Writer:  os.Stdout,
		Service: "image-worker",
		Queue:   metrics.QueueName(queueARN),
		Now:     now,
	})
	if err != nil {
		panic(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[Resize](func(ctx context.Context, job *jobs.Job[Resize]) error {
		nowMicros.Add(42_500)
		return nil
	}))
	h, err := worker.New(worker.Config{
		Registry: reg,
		SQS:      noopSQS{},
		OnBatch:  rec.ObserveBatch, // and idempotency.MiddlewareConfig{OnFinishError: rec.FinishError}
		Logger:   slog.New(slog.DiscardHandler),
		Now:      now,
	})
	if err != nil {
		panic(err)
	}

	sent := now().Add(-1200 * time.Millisecond).UnixMilli()
	_, err = h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{
		MessageId:      "9f1c2d3e-0000-4000-8000-000000000001",
		ReceiptHandle:  "rh-1",
		Body:           `{"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8R0T2V4","kind":"image.resize","args":{"image":"cat.png"}}`,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": strconv.FormatInt(sent, 10)},
		EventSourceARN: queueARN,
	}}})
	if err != nil {
		panic(err)
	}
	// Output:
	// {"_aws":{"Timestamp":1795946400042,"CloudWatchMetrics":[{"Namespace":"sqsworker","Dimensions":[["Service","Queue","Kind"]],"Metrics":[{"Name":"JobsSucceeded","Unit":"Count"},{"Name":"JobsFailed","Unit":"Count"},{"Name":"JobsRetried","Unit":"Count"},{"Name":"JobsDeadLettered","Unit":"Count"},{"Name":"JobsSkippedDuplicate","Unit":"Count"},{"Name":"JobsDeferred","Unit":"Count"},{"Name":"JobsNotRun","Unit":"Count"},{"Name":"JobsAbandoned","Unit":"Count"},{"Name":"DeadLetterSendFailed","Unit":"Count"},{"Name":"CompletionWriteFailed","Unit":"Count"},{"Name":"BatchSize","Unit":"Count"},{"Name":"JobDuration","Unit":"Milliseconds"},{"Name":"JobQueueLatency","Unit":"Milliseconds"}]}]},"Service":"image-worker","Queue":"images","Kind":"image.resize","JobsSucceeded":1,"JobsFailed":0,"JobsRetried":0,"JobsDeadLettered":0,"JobsSkippedDuplicate":0,"JobsDeferred":0,"JobsNotRun":0,"JobsAbandoned":0,"DeadLetterSendFailed":0,"CompletionWriteFailed":0,"BatchSize":1,"JobDuration":[42.5],"JobQueueLatency":[1200]}
}

func ExampleQueueName() {
	fmt.Println(metrics.QueueName("arn:aws:sqs:eu-west-1:123456789012:orders.fifo"))
	fmt.Println(metrics.QueueName("https://sqs.eu-west-1.amazonaws.com/123456789012/images"))
	// Output:
	// orders.fifo
	// images
}
