package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// XRayPropagator reads and writes the AWS X-Ray trace header, "X-Amzn-Trace-Id":
//
//	Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1
//
// An OpenTelemetry trace id is the X-Ray root's 8 hexadecimal digits of time followed by its 24
// of random, the span id is Parent, and Sampled=1 is the sampled flag. Other fields (Lineage,
// Self, …) are ignored on extract and not written. It is the Config.AWSTracePropagator for
// services that export to X-Ray; it needs no dependency beyond the OpenTelemetry API.
type XRayPropagator struct{}

var _ propagation.TextMapPropagator = XRayPropagator{}

// Inject writes the span context of ctx into the carrier's X-Amzn-Trace-Id.
func (XRayPropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	tid := sc.TraceID().String()
	sampled := "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	c.Set(xrayHeader, "Root=1-"+tid[:8]+"-"+tid[8:]+";Parent="+sc.SpanID().String()+";Sampled="+sampled)
}

// Extract reads the carrier's X-Amzn-Trace-Id into a remote span context; a header it cannot
// read leaves ctx as it is.
func (XRayPropagator) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	h := c.Get(xrayHeader)
	if h == "" {
		return ctx
	}
	var cfg trace.SpanContextConfig
	var haveRoot, haveParent bool
	for part := range strings.SplitSeq(h, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Root":
			// 1-<8 hex>-<24 hex>
			if len(v) != 35 || v[:2] != "1-" || v[10] != '-' {
				return ctx
			}
			tid, err := trace.TraceIDFromHex(v[2:10] + v[11:])
			if err != nil {
				return ctx
			}
			cfg.TraceID, haveRoot = tid, true
		case "Parent":
			sid, err := trace.SpanIDFromHex(v)
			if err != nil {
				return ctx
			}
			cfg.SpanID, haveParent = sid, true
		case "Sampled":
			if v == "1" {
				cfg.TraceFlags = trace.FlagsSampled
			}
		}
	}
	if !haveRoot || !haveParent {
		return ctx
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Fields returns the header the propagator uses.
func (XRayPropagator) Fields() []string { return []string{xrayHeader} }
