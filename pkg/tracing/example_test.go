package tracing_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/tracing"
)

// A producer and a worker share one Tracing. Here the spans go to an in-memory exporter; a
// service would give sdktrace.NewTracerProvider an OTLP exporter instead.
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example-tracing")})
	if err != nil {
		log.Fatal(err)
	}

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)
	tr := tracing.New(tracing.Config{TracerProvider: tp, AWSTracePropagator: tracing.XRayPropagator{}})

	prod, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL, Observer: tr.Producer()})
	if err != nil {
		log.Fatal(err)
	}
	// The worker takes tr.Worker() as worker.Config.Observer.
	if _, err := prod.Enqueue(ctx, testArgs{Do: "ok"}); err != nil {
		log.Fatal(err)
	}
	for _, s := range spans.GetSpans() {
		fmt.Println(s.SpanKind, s.Name[:len("send")])
	}
	// Output: producer send
}
