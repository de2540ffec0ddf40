package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/tracing"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

// benchPayload is a Lambda SQS event of n no-op jobs, each with a traceparent.
func benchPayload(n int) []byte {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, n)}
	for i := range ev.Records {
		env := jobs.Envelope{V: 1, ID: jobs.NewID(), Kind: "noop", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
			EnqueuedAt: time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC),
			Meta:       map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
		body, _ := env.MarshalJSON()
		ev.Records[i] = events.SQSMessage{
			MessageId: fmt.Sprintf("059f36b4-87a3-44ab-83d2-%012d", i), ReceiptHandle: "rh", Body: string(body),
			Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764410400000"},
			EventSource:    "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:jobs", AWSRegion: "us-east-1",
		}
	}
	p, _ := json.Marshal(ev)
	return p
}

// BenchmarkInvoke compares the worker's whole Lambda path without an Observer and with this
// package's observer on no-op providers (what a function pays for the instrumentation when no SDK
// is configured). docs/BENCHMARKS.md has the numbers.
func BenchmarkInvoke(b *testing.B) {
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[noopArgs](func(context.Context, *jobs.Job[noopArgs]) error { return nil }))
	tr := tracing.New(tracing.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	for _, n := range []int{100, 1000} {
		payload := benchPayload(n)
		for _, c := range []struct {
			name string
			obs  worker.Observer
		}{{"tracing=off", nil}, {"tracing=noop", tr.Worker()}} {
			b.Run(fmt.Sprintf("records=%d/%s", n, c.name), func(b *testing.B) {
				h, err := worker.New(worker.Config{Registry: reg, SQS: newFakeSQS(), Logger: logger, Observer: c.obs,
					QueueURL: queueURL, DLQURL: dlqURL})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := h.Invoke(ctx, payload); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
			})
		}
	}
}
