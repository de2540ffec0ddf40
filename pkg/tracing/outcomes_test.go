package tracing_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/tracing"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// deferring is a middleware that defers every job (another worker holds it, say).
var deferring = worker.MiddlewareFunc(func(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
	return jobs.Defer(time.Minute, errors.New("held elsewhere"))
})

func eventNames(sp tracetest.SpanStub) []string {
	var names []string
	for _, ev := range sp.Events {
		names = append(names, ev.Name)
	}
	return names
}

func TestDeferredAndCancelledOutcomes(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	body, _ := s.enqueue(t, "ok")
	if _, err := s.handler(t, deferring).HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", body, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	sp := s.byName("process ")[0]
	wantAttr(t, sp, "sqsworker.job.outcome", "deferred")
	if sp.Status.Code == codes.Error {
		t.Error("a deferred job's span is an error")
	}

	// A cancelled record: the delivery is skipped, and said to be cancelled, not a duplicate.
	store := idempotency.NewMemoryStore()
	body2, _ := s.enqueue(t, "ok", producer.WithKey("cancel-me"))
	env, _ := jobs.ParseEnvelope(body2)
	hash, _ := jobs.PayloadHash("test.job", env.Args)
	store.Put(context.Background(), idempotency.Record{Kind: "test.job", Key: "cancel-me", JobID: env.ID, PayloadHash: hash, State: idempotency.StateCancelled})
	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.handler(t, idem).HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m2", body2, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	spans := s.byName("process ")
	wantAttr(t, spans[len(spans)-1], "sqsworker.job.outcome", "skipped_cancelled")
}

func TestFIFOTailIsNotRun(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	fifo := queueURL + ".fifo"
	h, err := worker.New(worker.Config{Registry: registry(), SQS: s.sqs, QueueURL: fifo, DLQURL: dlqURL + ".fifo",
		Observer: s.tr.Worker(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	fail := `{"v":1,"id":"f-1","kind":"test.job","args":{"do":"fail"}}`
	ok := `{"v":1,"id":"f-2","kind":"test.job","args":{"do":"ok"}}`
	recs := []events.SQSMessage{record("m1", fail, 1, map[string]string{"MessageGroupId": "g"}), record("m2", ok, 1, map[string]string{"MessageGroupId": "g"})}
	for i := range recs {
		recs[i].EventSourceARN = queueARN + ".fifo"
	}
	if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: recs}); err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]tracetest.SpanStub{}
	for _, sp := range s.byName("process ") {
		byMsg[attrs(sp)["messaging.message.id"].AsString()] = sp
	}
	wantAttr(t, byMsg["m1"], "sqsworker.job.outcome", "retried")
	wantAttr(t, byMsg["m2"], "sqsworker.job.outcome", "not_run")
	wantAttr(t, byMsg["m2"], "sqsworker.job.group", "g")
}

// The deadline abandons a job still running: its span ends, marked abandoned, once; the job's
// goroutine finishing later does not start another.
func TestAbandonedAtTheDeadline(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	release := make(chan struct{})
	var ran sync.WaitGroup
	ran.Add(1)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(ctx context.Context, j *jobs.Job[testArgs]) error {
		defer ran.Done()
		<-release // ignores its context, as a stuck job does
		return nil
	}))
	h, err := worker.New(worker.Config{Registry: reg, SQS: s.sqs, QueueURL: queueURL, DLQURL: dlqURL, Observer: s.tr.Worker(),
		Logger: quietLogger(), DeadlineMargin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := s.enqueue(t, "ok")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{record("m1", body, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	close(release)
	ran.Wait()
	spans := s.byName("process ")
	if len(spans) != 1 {
		t.Fatalf("%d process spans, want 1", len(spans))
	}
	wantAttr(t, spans[0], "sqsworker.job.outcome", "abandoned")
	if spans[0].Status.Code != codes.Error {
		t.Errorf("status %+v, want Error", spans[0].Status)
	}
}

// failingDLQ fails every SendMessageBatch: the dead letter cannot be sent.
type failingDLQ struct{ *fakeSQS }

func (failingDLQ) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("SQS is down")
}

func TestDeadLetterAndResendEvents(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(ctx context.Context, j *jobs.Job[testArgs]) error {
		switch j.Args.Do {
		case "cancel":
			return jobs.Cancel(errors.New("not wanted"))
		case "later":
			return jobs.RetryAfter(24*time.Hour, errors.New("come back tomorrow")) // beyond the visibility cap: a re-send
		}
		return nil
	}))
	newHandler := func(api worker.SQSAPI) *worker.Handler {
		h, err := worker.New(worker.Config{Registry: reg, SQS: api, QueueURL: queueURL, DLQURL: dlqURL, Observer: s.tr.Worker(), Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	cancelBody, _ := s.enqueue(t, "cancel")
	laterBody, _ := s.enqueue(t, "later")
	if _, err := newHandler(s.sqs).HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("m-dead", cancelBody, 1, nil), record("m-later", laterBody, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := newHandler(failingDLQ{s.sqs}).HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m-lost", cancelBody, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]tracetest.SpanStub{}
	for _, sp := range s.byName("process ") {
		byMsg[attrs(sp)["messaging.message.id"].AsString()] = sp
	}
	if got := strings.Join(eventNames(byMsg["m-dead"]), ","); !strings.Contains(got, "sqsworker.dead_lettered") {
		t.Errorf("dead-lettered span events %q", got)
	}
	if got := strings.Join(eventNames(byMsg["m-later"]), ","); !strings.Contains(got, "sqsworker.resent") {
		t.Errorf("re-sent span events %q", got)
	}
	lost := byMsg["m-lost"]
	if got := strings.Join(eventNames(lost), ","); !strings.Contains(got, "sqsworker.send_failed") || strings.Contains(got, "sqsworker.dead_lettered") {
		t.Errorf("failed dead-letter span events %q, want send_failed and no dead_lettered", got)
	}
	if lost.Status.Code != codes.Error || !strings.Contains(lost.Status.Description, "SQS is down") {
		t.Errorf("failed dead-letter status %+v", lost.Status)
	}
}

// An unsampled producer still passes its trace context on, so that the worker honours the same
// sampling decision and links to it.
func TestUnsampledTraceContextIsPropagated(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.NeverSample()))
	defer tp.Shutdown(context.Background())
	tr := tracing.New(tracing.Config{TracerProvider: tp, DisableMetrics: true, AWSTracePropagator: tracing.XRayPropagator{}})
	api := newFakeSQS()
	prod, err := producer.New(producer.Config{SQS: api, QueueURL: queueURL, Observer: tr.Producer()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Enqueue(context.Background(), testArgs{Do: "ok"}); err != nil {
		t.Fatal(err)
	}
	in := api.single[0]
	env, _ := jobs.ParseEnvelope(aws.ToString(in.MessageBody))
	tp0 := env.Meta["traceparent"]
	if !strings.HasPrefix(tp0, "00-") || !strings.HasSuffix(tp0, "-00") {
		t.Errorf("meta.traceparent %q, want an unsampled W3C context", tp0)
	}
	if h := aws.ToString(in.MessageSystemAttributes["AWSTraceHeader"].StringValue); !strings.HasSuffix(h, ";Sampled=0") {
		t.Errorf("AWSTraceHeader %q, want an unsampled one", h)
	}
	if n := len(spans.GetSpans()); n != 0 {
		t.Errorf("%d spans exported with NeverSample", n)
	}
}
