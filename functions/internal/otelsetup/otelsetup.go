// Package otelsetup turns on OpenTelemetry tracing in the Lambda functions when their environment
// asks for it: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or the ADOT
// collector Lambda layer's OPENTELEMETRY_COLLECTOR_CONFIG_URI (or _FILE), in which case spans go to
// the layer's local receiver, http://localhost:4318, unless an endpoint is set. Without any of
// them nothing is set up and nothing is exported.
//
// Spans go through an OTLP/HTTP exporter with the JSON encoding (our own, small one: the standard
// OTEL_EXPORTER_OTLP_* settings apply) and a batch processor that is flushed at the end of every
// invocation, because Lambda freezes the process between invocations. OTEL_PROPAGATORS containing "xray" (as AWS's ADOT documentation
// sets it) adds the X-Ray header to the producer's messages and reads it back on the worker.
package otelsetup

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsworker/sqsworker/pkg/tracing"
)

// Enabled reports whether the environment asks for tracing.
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || adotLayer(getenv)
}

// adotLayer reports whether the ADOT collector layer's configuration is set.
func adotLayer(getenv func(string) string) bool {
	return getenv("OPENTELEMETRY_COLLECTOR_CONFIG_URI") != "" || getenv("OPENTELEMETRY_COLLECTOR_CONFIG_FILE") != ""
}

// adotReceiver is the ADOT collector layer's OTLP/HTTP receiver.
const adotReceiver = "http://localhost:4318"

// withADOTDefault points the exporter at the ADOT layer's receiver when the layer is configured
// and no endpoint is.
func withADOTDefault(getenv func(string) string) func(string) string {
	if !adotLayer(getenv) || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		return getenv
	}
	return func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return adotReceiver
		}
		return getenv(k)
	}
}

// Setup is the functions' tracing, once configured.
type Setup struct {
	// Tracing makes the worker's and the producer's observers.
	Tracing *tracing.Tracing
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	name    string
	xray    bool // OTEL_PROPAGATORS has xray: the invocation continues Lambda's X-Ray trace
}

// New configures tracing from the environment, or returns nil when it is not asked for.
func New(ctx context.Context, getenv func(string) string) (*Setup, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	exp, err := exporterFromEnv(withADOTDefault(getenv))
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry: OTLP exporter: %w", err)
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = getenv("AWS_LAMBDA_FUNCTION_NAME")
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name), semconv.CloudProviderAWS, semconv.CloudPlatformAWSLambda}
	if r := getenv("AWS_REGION"); r != "" {
		attrs = append(attrs, semconv.CloudRegion(r))
	}
	if v := getenv("AWS_LAMBDA_FUNCTION_VERSION"); v != "" {
		attrs = append(attrs, semconv.FaaSVersion(v))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)))
	otel.SetTracerProvider(tp)
	cfg := tracing.Config{TracerProvider: tp, DisableMetrics: true} // metrics: the EMF lines
	props := []propagation.TextMapPropagator{propagation.TraceContext{}, propagation.Baggage{}}
	xray := strings.Contains(getenv("OTEL_PROPAGATORS"), "xray")
	if xray {
		cfg.AWSTracePropagator = tracing.XRayPropagator{}
		props = append(props, tracing.XRayPropagator{})
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(props...))
	return &Setup{Tracing: tracing.New(cfg), tp: tp, tracer: tp.Tracer(tracing.ScopeName), name: name, xray: xray}, nil
}

// Invocation describes one invocation, for its span.
type Invocation struct {
	// Trigger is faas.trigger: "pubsub" (SQS), "http" (function URL), "timer", "datasource".
	Trigger string
	// Headers are an HTTP request's headers (function URL), or nil: a W3C traceparent in them is
	// the invocation's parent.
	Headers map[string]string
	// Method and Path are an HTTP request's, for the http.* attributes.
	Method, Path string
}

// Start starts the invocation's span, named after the function (the parent of the job spans),
// and returns its context and the function that ends it with the HTTP status code (0 when
// there is none) and the error. The parent is the request's W3C trace context, else, with the
// xray propagator, Lambda's own X-Ray trace header (active tracing: the span then sits under the
// function's segment). The end flushes the spans before Lambda freezes the process.
func (s *Setup) Start(ctx context.Context, inv Invocation) (context.Context, func(status int, err error)) {
	attrs := []attribute.KeyValue{semconv.FaaSTriggerKey.String(inv.Trigger)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.CloudResourceID(lc.InvokedFunctionArn))
	}
	if inv.Method != "" {
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(inv.Method), semconv.URLPath(inv.Path))
	}
	pctx := ctx
	if tp := header(inv.Headers, "traceparent"); tp != "" {
		c := propagation.MapCarrier{"traceparent": tp, "tracestate": header(inv.Headers, "tracestate")}
		pctx = propagation.TraceContext{}.Extract(ctx, c)
	}
	if !trace.SpanContextFromContext(pctx).IsValid() && s.xray {
		if h, _ := ctx.Value("x-amzn-trace-id").(string); h != "" { // set by aws-lambda-go
			pctx = tracing.XRayPropagator{}.Extract(ctx, propagation.MapCarrier{"X-Amzn-Trace-Id": h})
		}
	}
	kind := trace.SpanKindServer
	pctx, span := s.tracer.Start(pctx, s.name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return pctx, func(status int, err error) {
		if status != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.tp.ForceFlush(fctx) // a failed export must not fail the invocation
	}
}

// Invoke runs fn inside an invocation span (see Start).
func (s *Setup) Invoke(ctx context.Context, trigger string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	ctx, end := s.Start(ctx, Invocation{Trigger: trigger})
	out, err := fn(ctx)
	end(0, err)
	return out, err
}

// header returns the value of an HTTP header, whatever the case of its name.
func header(h map[string]string, name string) string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
