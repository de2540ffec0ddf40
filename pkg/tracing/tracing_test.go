package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/tracing"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

const (
	queueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/app-jobs"
	queueARN = "arn:aws:sqs:us-east-1:123456789012:app-jobs"
	dlqURL   = "https://sqs.us-east-1.amazonaws.com/123456789012/app-jobs-dlq"
)

// fakeSQS is an SQS for both the producer and the worker: it keeps what was sent.
type fakeSQS struct {
	mu     sync.Mutex
	sent   map[string][]sqstypes.SendMessageBatchRequestEntry
	single []*sqs.SendMessageInput
	n      int
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{sent: map[string][]sqstypes.SendMessageBatchRequestEntry{}}
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.single = append(f.single, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("msg-%d", f.n))}, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		f.n++
		e.MessageBody = aws.String(aws.ToString(e.MessageBody)) // the producer reuses its buffers
		f.sent[aws.ToString(in.QueueUrl)] = append(f.sent[aws.ToString(in.QueueUrl)], e)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("msg-%d", f.n))})
	}
	return out, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return nil, errors.New("not used: QueueURL is set")
}

func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, errors.New("not used: DLQURL is set")
}

// testArgs says what the job does.
type testArgs struct {
	Do string `json:"do"`
}

func (testArgs) Kind() string { return "test.job" }

func registry() *jobs.Registry {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(ctx context.Context, j *jobs.Job[testArgs]) error {
		switch j.Args.Do {
		case "fail":
			return errors.New("it failed")
		case "cancel":
			return jobs.Cancel(errors.New("not wanted"))
		case "panic":
			panic("boom")
		}
		return nil
	}), jobs.WithMaxAttempts(2))
	return reg
}

type setup struct {
	spans   *tracetest.InMemoryExporter
	metrics *sdkmetric.ManualReader
	tr      *tracing.Tracing
	sqs     *fakeSQS
	prod    *producer.Producer
}

func newSetup(t *testing.T, cfg tracing.Config) *setup {
	t.Helper()
	s := &setup{spans: tracetest.NewInMemoryExporter(), metrics: sdkmetric.NewManualReader(), sqs: newFakeSQS()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(s.spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg.TracerProvider = tp
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.metrics))
	s.tr = tracing.New(cfg)
	var err error
	s.prod, err = producer.New(producer.Config{SQS: s.sqs, QueueURL: queueURL, Observer: s.tr.Producer()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *setup) handler(t *testing.T, mws ...worker.Middleware) *worker.Handler {
	t.Helper()
	h, err := worker.New(worker.Config{Registry: registry(), SQS: s.sqs, QueueURL: queueURL, DLQURL: dlqURL,
		Observer: s.tr.Worker(), Middleware: mws, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// record turns a body into an SQS event record of the job queue.
func record(id, body string, receiveCount int, attrs map[string]string) events.SQSMessage {
	a := map[string]string{"ApproximateReceiveCount": strconv.Itoa(receiveCount), "SentTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)}
	for k, v := range attrs {
		a[k] = v
	}
	return events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSource: "aws:sqs", EventSourceARN: queueARN, Attributes: a}
}

func (s *setup) byName(prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range s.spans.GetSpans() {
		if strings.HasPrefix(sp.Name, prefix) {
			out = append(out, sp)
		}
	}
	return out
}

func attrs(sp tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range sp.Attributes {
		m[a.Key] = a.Value
	}
	return m
}

func wantAttr(t *testing.T, sp tracetest.SpanStub, key string, want any) {
	t.Helper()
	v, ok := attrs(sp)[attribute.Key(key)]
	if !ok {
		t.Errorf("span %s has no attribute %s", sp.Name, key)
		return
	}
	if got := v.AsInterface(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("span %s: %s = %v, want %v", sp.Name, key, got, want)
	}
}

func TestProducerSpanAndItsContextInTheEnvelope(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{AWSTracePropagator: tracing.XRayPropagator{}})
	res, err := s.prod.Enqueue(context.Background(), testArgs{Do: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	spans := s.byName("send ")
	if len(spans) != 1 {
		t.Fatalf("%d send spans, want 1", len(spans))
	}
	sp := spans[0]
	if sp.Name != "send app-jobs" || sp.SpanKind != trace.SpanKindProducer {
		t.Errorf("span %q kind %v", sp.Name, sp.SpanKind)
	}
	wantAttr(t, sp, "messaging.system", "aws_sqs")
	wantAttr(t, sp, "messaging.operation.type", "send")
	wantAttr(t, sp, "messaging.destination.name", "app-jobs")
	wantAttr(t, sp, "messaging.message.id", res.MessageID)
	wantAttr(t, sp, "sqsworker.job.kind", "test.job")
	wantAttr(t, sp, "sqsworker.job.id", res.ID)
	in := s.sqs.single[0]
	env, err := jobs.ParseEnvelope(aws.ToString(in.MessageBody))
	if err != nil {
		t.Fatal(err)
	}
	wantTP := fmt.Sprintf("00-%s-%s-01", sp.SpanContext.TraceID(), sp.SpanContext.SpanID())
	if env.Meta["traceparent"] != wantTP {
		t.Errorf("meta.traceparent = %q, want the producer span's %q", env.Meta["traceparent"], wantTP)
	}
	tid := sp.SpanContext.TraceID().String()
	wantXRay := "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + sp.SpanContext.SpanID().String() + ";Sampled=1"
	if got := aws.ToString(in.MessageSystemAttributes["AWSTraceHeader"].StringValue); got != wantXRay {
		t.Errorf("AWSTraceHeader = %q, want %q", got, wantXRay)
	}
}

func TestEnqueueBatchIsOneSpan(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	reqs := make([]producer.Request, 12)
	for i := range reqs {
		reqs[i] = producer.Request{Args: testArgs{Do: "ok"}}
	}
	if _, err := s.prod.EnqueueBatch(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	spans := s.byName("send ")
	if len(spans) != 1 {
		t.Fatalf("%d send spans, want 1", len(spans))
	}
	wantAttr(t, spans[0], "messaging.batch.message_count", 12)
	tp := fmt.Sprintf("00-%s-%s-01", spans[0].SpanContext.TraceID(), spans[0].SpanContext.SpanID())
	for _, e := range s.sqs.sent[queueURL] {
		env, _ := jobs.ParseEnvelope(aws.ToString(e.MessageBody))
		if env.Meta["traceparent"] != tp {
			t.Fatalf("a batch job carries %q, want %q", env.Meta["traceparent"], tp)
		}
	}
	if _, ok := attrs(spans[0])["sqsworker.job.id"]; ok {
		t.Error("a batch span names one job id")
	}
}

func TestProducerErrorSetsStatus(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	_, err := s.prod.Enqueue(context.Background(), testArgs{}, producer.WithDelay(-time.Second))
	if err == nil {
		t.Fatal("a negative delay was accepted")
	}
	sp := s.byName("send ")[0]
	if sp.Status.Code != codes.Error || !strings.Contains(sp.Status.Description, "delay -1s is negative") {
		t.Errorf("status %+v", sp.Status)
	}
}

// enqueue makes a body with the producer (so it carries a producer span's context).
func (s *setup) enqueue(t *testing.T, do string, opts ...producer.Option) (string, tracetest.SpanStub) {
	t.Helper()
	n := len(s.sqs.single)
	if _, err := s.prod.Enqueue(context.Background(), testArgs{Do: do}, opts...); err != nil {
		t.Fatal(err)
	}
	spans := s.byName("send ")
	return aws.ToString(s.sqs.single[n].MessageBody), spans[len(spans)-1]
}

func TestConsumerSpanPerOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		do, outcome, reason string
		receive             int
		errorStatus         bool
	}{
		{"ok", "succeeded", "", 1, false},
		{"fail", "retried", "", 1, true},
		{"fail", "dead_lettered", "exhausted", 2, true},
		{"cancel", "dead_lettered", "cancelled", 1, true},
		{"panic", "retried", "", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.do+"-"+tt.outcome, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, tracing.Config{})
			body, prodSpan := s.enqueue(t, tt.do)
			h := s.handler(t)
			if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", body, tt.receive, nil)}}); err != nil {
				t.Fatal(err)
			}
			spans := s.byName("process ")
			if len(spans) != 1 {
				t.Fatalf("%d process spans, want 1", len(spans))
			}
			sp := spans[0]
			if sp.Name != "process app-jobs" || sp.SpanKind != trace.SpanKindConsumer {
				t.Errorf("span %q kind %v", sp.Name, sp.SpanKind)
			}
			if sp.Parent.IsValid() {
				t.Errorf("the consumer span has parent %v: it must be linked to the producer, not parented", sp.Parent)
			}
			if len(sp.Links) != 1 || sp.Links[0].SpanContext.SpanID() != prodSpan.SpanContext.SpanID() || sp.Links[0].SpanContext.TraceID() != prodSpan.SpanContext.TraceID() {
				t.Errorf("links %+v, want one to the producer span %v", sp.Links, prodSpan.SpanContext)
			}
			wantAttr(t, sp, "sqsworker.job.outcome", tt.outcome)
			wantAttr(t, sp, "sqsworker.job.attempt", tt.receive)
			wantAttr(t, sp, "sqsworker.job.max_attempts", 2)
			wantAttr(t, sp, "sqsworker.job.kind", "test.job")
			wantAttr(t, sp, "messaging.message.id", "m1")
			if tt.reason != "" {
				wantAttr(t, sp, "sqsworker.job.dead_letter_reason", tt.reason)
			}
			if got := sp.Status.Code == codes.Error; got != tt.errorStatus {
				t.Errorf("status %+v, want error %v", sp.Status, tt.errorStatus)
			}
			if tt.do == "panic" {
				found := false
				for _, ev := range sp.Events {
					for _, a := range ev.Attributes {
						if a.Key == "exception.stacktrace" && strings.Contains(a.Value.AsString(), "goroutine") {
							found = true
						}
					}
				}
				if !found {
					t.Errorf("the panic's stack is not recorded: events %+v", sp.Events)
				}
			}
		})
	}
}

func TestRetriedJobHasTwoSpansLinkedToOneProducer(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	body, prodSpan := s.enqueue(t, "fail")
	h := s.handler(t)
	for receive := 1; receive <= 2; receive++ {
		if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", body, receive, nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	spans := s.byName("process ")
	if len(spans) != 2 {
		t.Fatalf("%d process spans, want 2", len(spans))
	}
	for i, sp := range spans {
		if len(sp.Links) != 1 || sp.Links[0].SpanContext.SpanID() != prodSpan.SpanContext.SpanID() {
			t.Errorf("attempt %d links %+v, want the one producer span", i+1, sp.Links)
		}
	}
	wantAttr(t, spans[0], "sqsworker.job.outcome", "retried")
	wantAttr(t, spans[1], "sqsworker.job.outcome", "dead_lettered")
	if spans[0].SpanContext.TraceID() == prodSpan.SpanContext.TraceID() {
		t.Error("an attempt shares the producer's trace: it should be a trace of its own, linked")
	}
}

func TestDuplicateSkippedByTheStore(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	body, _ := s.enqueue(t, "ok", producer.WithKey("once"))
	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: idempotency.NewMemoryStore(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := s.handler(t, idem)
	for i := range 2 {
		if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(fmt.Sprint("m", i), body, 1, nil)}}); err != nil {
			t.Fatal(err)
		}
	}
	spans := s.byName("process ")
	if len(spans) != 2 {
		t.Fatalf("%d process spans, want 2", len(spans))
	}
	wantAttr(t, spans[0], "sqsworker.job.outcome", "succeeded")
	wantAttr(t, spans[1], "sqsworker.job.outcome", "skipped_duplicate")
	if spans[1].Status.Code == codes.Error {
		t.Error("a duplicate is an error on its span")
	}
	// The store's claim and finish are child spans of the attempt.
	children := func(parent tracetest.SpanStub) []string {
		var names []string
		for _, sp := range s.spans.GetSpans() {
			if sp.Parent.SpanID() == parent.SpanContext.SpanID() {
				names = append(names, sp.Name)
			}
		}
		return names
	}
	if got := fmt.Sprint(children(spans[0])); got != "[idempotency.claim idempotency.finish]" {
		t.Errorf("first attempt's children %s, want the claim and the finish", got)
	}
	if got := fmt.Sprint(children(spans[1])); got != "[idempotency.claim]" {
		t.Errorf("duplicate's children %s, want the refused claim only", got)
	}
}

func TestMessagesThatNeverRunAreVisible(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	h := s.handler(t)
	unknown := `{"v":1,"id":"u-1","kind":"nobody.handles","args":{}}`
	badTP := `{"v":1,"id":"t-1","kind":"test.job","args":{"do":"ok"},"meta":{"traceparent":"00-garbage"}}`
	noTP := `{"v":1,"id":"t-2","kind":"test.job","args":{"do":"ok"}}`
	recs := []events.SQSMessage{record("m-malformed", "not json", 1, nil), record("m-unknown", unknown, 1, nil),
		record("m-badtp", badTP, 1, nil), record("m-notp", noTP, 1, nil)}
	if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: recs}); err != nil {
		t.Fatal(err)
	}
	spans := s.byName("process ")
	if len(spans) != 4 {
		t.Fatalf("%d process spans, want 4", len(spans))
	}
	byMsg := map[string]tracetest.SpanStub{}
	for _, sp := range spans {
		byMsg[attrs(sp)["messaging.message.id"].AsString()] = sp
	}
	wantAttr(t, byMsg["m-malformed"], "sqsworker.job.dead_letter_reason", "malformed")
	wantAttr(t, byMsg["m-unknown"], "sqsworker.job.dead_letter_reason", "unknown_kind")
	wantAttr(t, byMsg["m-unknown"], "sqsworker.job.kind", "nobody.handles")
	for _, id := range []string{"m-badtp", "m-notp"} {
		sp := byMsg[id]
		if len(sp.Links) != 0 || sp.Parent.IsValid() {
			t.Errorf("%s: links %v parent %v, want a root span without links", id, sp.Links, sp.Parent)
		}
		wantAttr(t, sp, "sqsworker.job.outcome", "succeeded")
	}
}

func TestAWSTraceHeaderLinksWhenThereIsNoTraceparent(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{AWSTracePropagator: tracing.XRayPropagator{}})
	h := s.handler(t)
	body := `{"v":1,"id":"x-1","kind":"test.job","args":{"do":"ok"}}`
	hdr := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1"
	if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", body, 1, map[string]string{"AWSTraceHeader": hdr})}}); err != nil {
		t.Fatal(err)
	}
	sp := s.byName("process ")[0]
	if len(sp.Links) != 1 || sp.Links[0].SpanContext.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || sp.Links[0].SpanContext.SpanID().String() != "53995c3f42cd8ad8" {
		t.Errorf("links %+v, want the X-Ray header's span", sp.Links)
	}
}

func TestInvocationSpanIsTheParent(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	body, _ := s.enqueue(t, "ok")
	h := s.handler(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(s.spans))
	ctx, inv := tp.Tracer("lambda").Start(context.Background(), "invoke")
	if _, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{record("m1", body, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	inv.End()
	sp := s.byName("process ")[0]
	if sp.Parent.SpanID() != inv.SpanContext().SpanID() {
		t.Errorf("parent %v, want the invocation span %v", sp.Parent, inv.SpanContext())
	}
}

func TestJobsEnqueuedFromAJobContinueItsTrace(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(ctx context.Context, j *jobs.Job[testArgs]) error {
		_, err := s.prod.Enqueue(ctx, followUp{})
		return err
	}))
	h, err := worker.New(worker.Config{Registry: reg, SQS: s.sqs, QueueURL: queueURL, DLQURL: dlqURL, Observer: s.tr.Worker(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := s.enqueue(t, "ok")
	if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", body, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	consumer := s.byName("process ")[0]
	sends := s.byName("send ")
	child := sends[len(sends)-1]
	if child.Parent.SpanID() != consumer.SpanContext.SpanID() {
		t.Errorf("the follow-up's producer span has parent %v, want the consumer span %v", child.Parent, consumer.SpanContext)
	}
	env, _ := jobs.ParseEnvelope(aws.ToString(s.sqs.single[len(s.sqs.single)-1].MessageBody))
	if !strings.Contains(env.Meta["traceparent"], child.SpanContext.SpanID().String()) {
		t.Errorf("the follow-up carries %q, want its producer span %v", env.Meta["traceparent"], child.SpanContext.SpanID())
	}
}

type followUp struct{}

func (followUp) Kind() string { return "test.follow_up" }

func TestMetricsHaveNoJobIDs(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tracing.Config{})
	body, _ := s.enqueue(t, "ok")
	h := s.handler(t)
	if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m1", body, 1, nil)}}); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := s.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = true
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, set := range sets {
				for _, kv := range set.ToSlice() {
					if kv.Key == tracing.AttrJobID || kv.Key == "messaging.message.id" {
						t.Errorf("metric %s has the high-cardinality attribute %s", m.Name, kv.Key)
					}
				}
				if v, ok := set.Value(tracing.AttrJobKind); !ok || v.AsString() != "test.job" {
					t.Errorf("metric %s attributes %v lack the kind", m.Name, set)
				}
			}
		}
	}
	for _, name := range []string{"messaging.process.duration", "messaging.client.consumed.messages", "messaging.client.sent.messages"} {
		if !found[name] {
			t.Errorf("metric %s was not recorded (have %v)", name, found)
		}
	}
}

func TestXRayPropagator(t *testing.T) {
	t.Parallel()
	p := tracing.XRayPropagator{}
	tests := []struct {
		header string
		valid  bool
	}{
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1;Parent=53995c3f42cd8ad8;Lineage=10:1234abcd:3", true},
		{"Root=1-5759e988-bd862e3fe1be46a994272793", false},                         // no parent
		{"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false}, // unknown version
		{"Root=1-zzzz;Parent=53995c3f42cd8ad8", false},
		{"garbage", false},
		{"", false},
	}
	for _, tt := range tests {
		ctx := p.Extract(context.Background(), mapCarrier{"X-Amzn-Trace-Id": tt.header})
		sc := trace.SpanContextFromContext(ctx)
		if sc.IsValid() != tt.valid {
			t.Errorf("Extract(%q) valid = %v, want %v", tt.header, sc.IsValid(), tt.valid)
			continue
		}
		if !tt.valid {
			continue
		}
		out := mapCarrier{}
		p.Inject(ctx, out)
		if !strings.HasPrefix(tt.header, out["X-Amzn-Trace-Id"][:len("Root=1-5759e988-bd862e3fe1be46a994272793")]) || !sc.IsSampled() || !sc.IsRemote() {
			t.Errorf("round trip of %q gave %q (sampled %v)", tt.header, out["X-Amzn-Trace-Id"], sc.IsSampled())
		}
	}
}

type mapCarrier map[string]string

func (m mapCarrier) Get(k string) string { return m[k] }
func (m mapCarrier) Set(k, v string)     { m[k] = v }
func (m mapCarrier) Keys() []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
