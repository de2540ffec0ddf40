// Package otelsetup turns on OpenTelemetry tracing in the Lambda functions when their environment
// asks for it: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (which the ADOT
// collector Lambda layer's users set to its local receiver, http://localhost:4318). Without either
// nothing is set up and nothing is exported.
//
// Spans go through an OTLP/HTTP exporter with the JSON encoding (our own, small one: the standard
// OTEL_EXPORTER_OTLP_* settings apply) and a batch processor that is flushed at the end of every
// invocation, because Lambda freezes the process between invocations. OTEL_PROPAGATORS containing "xray" (as AWS's ADOT documentation
// sets it) adds the X-Ray header to the producer's messages and reads it back on the worker.
package otelsetup

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsworker/sqsworker/pkg/tracing"
)

// Enabled reports whether the environment asks for tracing.
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup is the functions' tracing, once configured.
type Setup struct {
	// Tracing makes the worker's and the producer's observers.
	Tracing *tracing.Tracing
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	name    string
}

// New configures tracing from the environment, or returns nil when it is not asked for.
func New(ctx context.Context, getenv func(string) string) (*Setup, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	exp, err := exporterFromEnv(getenv)
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
	if strings.Contains(getenv("OTEL_PROPAGATORS"), "xray") {
		cfg.AWSTracePropagator = tracing.XRayPropagator{}
		props = append(props, tracing.XRayPropagator{})
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(props...))
	return &Setup{Tracing: tracing.New(cfg), tp: tp, tracer: tp.Tracer(tracing.ScopeName), name: name}, nil
}

// Invoke runs one invocation inside a span named after the function (the parent of the job
// spans), then flushes the spans before Lambda freezes the process.
func (s *Setup) Invoke(ctx context.Context, trigger string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	attrs := []attribute.KeyValue{semconv.FaaSTriggerKey.String(trigger)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.CloudResourceID(lc.InvokedFunctionArn))
	}
	ctx, span := s.tracer.Start(ctx, s.name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	out, err := fn(ctx)
	if err != nil {
		span.RecordError(err)
	}
	span.End()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = s.tp.ForceFlush(fctx) // a failed export must not fail the invocation
	return out, err
}
