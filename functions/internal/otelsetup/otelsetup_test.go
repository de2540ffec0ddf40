package otelsetup

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// collector is a fake OTLP/HTTP receiver: it keeps the JSON bodies it was sent.
type collector struct {
	mu     sync.Mutex
	bodies [][]byte
	header http.Header
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want POST /v1/traces with JSON", http.StatusBadRequest)
		return
	}
	c.bodies = append(c.bodies, b)
	c.header = r.Header.Clone()
	w.WriteHeader(http.StatusOK)
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDisabledWithoutAnEndpoint(t *testing.T) {
	s, err := New(context.Background(), env(nil))
	if s != nil || err != nil {
		t.Errorf("New without OTEL_EXPORTER_OTLP_ENDPOINT = %v, %v; want nil, nil", s, err)
	}
}

func TestExporterConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, "is not an http(s) URL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc is not supported"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "not a positive number of milliseconds"},
	} {
		_, err := New(context.Background(), env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v) = %v, want an error with %q", tt.env, err, tt.want)
		}
	}
}

func TestInvocationSpansReachTheCollectorAsOTLPJSON(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	s, err := New(context.Background(), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s%3Dcret",
		"AWS_LAMBDA_FUNCTION_NAME": "app-worker", "AWS_REGION": "eu-west-1", "OTEL_PROPAGATORS": "tracecontext,xray",
	}))
	if err != nil || s == nil {
		t.Fatalf("New = %v, %v", s, err)
	}
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, Remote: true})
	_, err = s.Invoke(context.Background(), "pubsub", func(ctx context.Context) ([]byte, error) {
		_, child := s.tracer.Start(ctx, "process app-jobs", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(trace.Link{SpanContext: link}),
			trace.WithAttributes(attribute.Int("sqsworker.job.attempt", 2), attribute.Bool("b", true), attribute.Float64("f", 1.5),
				attribute.StringSlice("ss", []string{"a", "b"})))
		child.AddEvent("sqsworker.dead_lettered", trace.WithAttributes(attribute.String("reason", "exhausted")))
		child.RecordError(errors.New("it failed"))
		child.SetStatus(codes.Error, "it failed")
		child.End()
		return []byte(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.bodies) != 1 {
		t.Fatalf("the collector got %d exports, want 1 (flushed at the end of the invocation)", len(col.bodies))
	}
	if col.header.Get("x-api-key") != "s=cret" {
		t.Errorf("headers %v: OTEL_EXPORTER_OTLP_HEADERS not sent", col.header)
	}
	// The body is what OTLP's protobuf schema describes, in its JSON mapping (ids in hex).
	var req tracepb.TracesData // the same resourceSpans field as ExportTraceServiceRequest
	if err := protojson.Unmarshal(hexIDsToBase64(t, col.bodies[0]), &req); err != nil {
		t.Fatalf("the export is not an OTLP ExportTraceServiceRequest: %v\n%s", err, col.bodies[0])
	}
	rs := req.ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || len(rs[0].ScopeSpans[0].Spans) != 2 {
		t.Fatalf("want one resource, one scope, two spans: %s", col.bodies[0])
	}
	res := map[string]string{}
	for _, kv := range rs[0].Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "app-worker" || res["cloud.region"] != "eu-west-1" || res["cloud.platform"] != "aws_lambda" {
		t.Errorf("resource %v", res)
	}
	spans := rs[0].ScopeSpans[0].Spans
	child, inv := spans[0], spans[1]
	if inv.Name != "app-worker" || inv.Kind != 2 || child.Kind != 5 {
		t.Errorf("kinds: invocation %q %d, child %d; want SERVER (2) and CONSUMER (5)", inv.Name, inv.Kind, child.Kind)
	}
	if hex.EncodeToString(child.ParentSpanId) != hex.EncodeToString(inv.SpanId) || hex.EncodeToString(child.TraceId) != hex.EncodeToString(inv.TraceId) {
		t.Error("the job span is not the invocation span's child")
	}
	if child.Status.GetCode() != 2 || child.Status.Message != "it failed" || inv.Status.GetCode() != 0 {
		t.Errorf("status: child %v, invocation %v; want ERROR (2) and UNSET (0)", child.Status, inv.Status)
	}
	if len(child.Links) != 1 || hex.EncodeToString(child.Links[0].TraceId) != link.TraceID().String() {
		t.Errorf("links %v", child.Links)
	}
	if len(child.Events) != 2 || child.Events[0].Name != "sqsworker.dead_lettered" || child.Events[1].Name != "exception" {
		t.Errorf("events %v", child.Events)
	}
	got := map[string]string{}
	for _, kv := range child.Attributes {
		got[kv.Key] = kv.Value.String()
	}
	if !strings.Contains(got["sqsworker.job.attempt"], "int_value:2") || !strings.Contains(got["b"], "bool_value:true") ||
		!strings.Contains(got["f"], "double_value:1.5") || !strings.Contains(got["ss"], "array_value") {
		t.Errorf("attributes %v", got)
	}
	if child.StartTimeUnixNano == 0 || child.EndTimeUnixNano < child.StartTimeUnixNano {
		t.Errorf("times %d..%d", child.StartTimeUnixNano, child.EndTimeUnixNano)
	}
}

// hexIDsToBase64 rewrites OTLP/JSON's hexadecimal ids as the base64 that protojson expects of
// bytes fields.
func hexIDsToBase64(t *testing.T, body []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
					b, err := hex.DecodeString(s)
					if err != nil {
						t.Fatalf("%s %q is not hexadecimal", k, s)
					}
					x[k] = base64.StdEncoding.EncodeToString(b)
					continue
				}
				walk(val)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	out, _ := json.Marshal(v)
	return out
}

func TestTheADOTLayerAloneTurnsTracingOn(t *testing.T) {
	e := env(map[string]string{"OPENTELEMETRY_COLLECTOR_CONFIG_URI": "/opt/collector-config/config.yaml"})
	if !Enabled(e) {
		t.Fatal("the ADOT layer's configuration does not turn tracing on")
	}
	exp, err := exporterFromEnv(withADOTDefault(e))
	if err != nil || exp.url != "http://localhost:4318/v1/traces" {
		t.Errorf("exporter %+v, %v; want the layer's receiver", exp, err)
	}
	exp, err = exporterFromEnv(withADOTDefault(env(map[string]string{"OPENTELEMETRY_COLLECTOR_CONFIG_FILE": "/x", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})))
	if err != nil || exp.url != "http://collector:4318/v1/traces" {
		t.Errorf("an explicit endpoint lost to the layer's default: %+v, %v", exp, err)
	}
}

// The invocation continues the caller's trace: a function URL request's traceparent, else (with
// the xray propagator) the X-Ray header aws-lambda-go puts in the context under active tracing.
func TestInvocationParents(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	s, err := New(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_PROPAGATORS": "tracecontext,xray",
		"AWS_LAMBDA_FUNCTION_NAME": "app-api"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := s.Start(context.Background(), Invocation{Trigger: "http", Method: "POST", Path: "/jobs",
		Headers: map[string]string{"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	sc := trace.SpanContextFromContext(ctx)
	end(202, nil)
	if sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("HTTP invocation trace %s, want the request's", sc.TraceID())
	}
	lambdaCtx := context.WithValue(context.Background(), "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a:1")
	ctx, end = s.Start(lambdaCtx, Invocation{Trigger: "pubsub"})
	sc = trace.SpanContextFromContext(ctx)
	end(0, nil)
	if sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("SQS invocation trace %s, want Lambda's X-Ray trace", sc.TraceID())
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	body := strings.Join(func() []string {
		var out []string
		for _, b := range col.bodies {
			out = append(out, string(b))
		}
		return out
	}(), "\n")
	for _, want := range []string{`"key":"http.response.status_code","value":{"intValue":"202"}`, `"key":"http.request.method","value":{"stringValue":"POST"}`,
		`"parentSpanId":"b7ad6b7169203331"`, `"parentSpanId":"53995c3f42cd8ad8"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the exported spans lack %s:\n%s", want, body)
		}
	}
}
