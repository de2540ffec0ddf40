package tracing_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/tracing"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// Producer → SQS (the embedded emulator) → poller → worker: each attempt's consumer span links
// to the producer's span, and a job without trace context, or with a malformed one, gets a root
// span (never an error).
func TestEmulatorProducerToWorkerTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := sqs.NewFromConfig(awslocaltest.Backend(t).Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName(t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)
	tr := tracing.New(tracing.Config{TracerProvider: tp, DisableMetrics: true})

	prod, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL, Observer: tr.Producer()})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(ctx context.Context, j *jobs.Job[testArgs]) error {
		runs.Add(1)
		if j.Args.Do == "fail" && j.Attempt == 1 {
			return jobs.RetryAfter(time.Second, context.DeadlineExceeded)
		}
		return nil
	}))
	h, err := worker.New(worker.Config{Registry: reg, SQS: client, Observer: tr.Worker(), Logger: quietLogger(),
		QueueURL: stack.QueueURL, DLQURL: stack.DLQURL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Enqueue(ctx, testArgs{Do: "fail"}); err != nil {
		t.Fatal(err)
	}
	// Producers in another language: no trace context at all, and a malformed one.
	for _, body := range []string{`{"v":1,"id":"plain-1","kind":"test.job","args":{"do":"ok"}}`,
		`{"v":1,"id":"plain-2","kind":"test.job","args":{"do":"ok"},"meta":{"traceparent":"00-not-a-trace-context"}}`} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &stack.QueueURL, MessageBody: new(body)}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := poller.New(poller.Config{SQS: client, QueueURL: stack.QueueURL, Handler: h, WaitTime: time.Second, VisibilityTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for runs.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if runs.Load() < 4 {
		t.Fatalf("%d runs, want 4 (two attempts and the two plain jobs)", runs.Load())
	}
	var producerSpan tracetest.SpanStub
	var linked, roots int
	for _, sp := range spans.GetSpans() {
		if sp.SpanKind == trace.SpanKindProducer {
			producerSpan = sp
		}
	}
	for _, sp := range spans.GetSpans() {
		if sp.SpanKind != trace.SpanKindConsumer {
			continue
		}
		switch {
		case len(sp.Links) == 1 && sp.Links[0].SpanContext.SpanID() == producerSpan.SpanContext.SpanID():
			linked++
		case len(sp.Links) == 0 && !sp.Parent.IsValid():
			roots++
		default:
			t.Errorf("consumer span %s: links %v parent %v", sp.Name, sp.Links, sp.Parent)
		}
	}
	if linked != 2 || roots != 2 {
		t.Errorf("%d consumer spans linked to the producer (want 2 attempts) and %d roots (want 2: no context, and a malformed one)", linked, roots)
	}
}
