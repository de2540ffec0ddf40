package otelsetup

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// jsonExporter is an OTLP/HTTP exporter with the JSON encoding (POST <endpoint>/v1/traces,
// Content-Type application/json), which every OTLP/HTTP receiver accepts, the ADOT collector
// layer's included. It exists so that the functions can trace without the protobuf and gRPC
// modules the official exporter links, which would add about 9 MB to each bootstrap
// (docs/TRACING.md).
//
// The encoding follows OTLP's JSON rules: lowerCamelCase field names, trace and span ids as
// hexadecimal strings, enums as integers, 64-bit integers as decimal strings.
type jsonExporter struct {
	url     string
	headers map[string]string
	client  *http.Client

	mu       sync.Mutex
	shutdown bool
}

// exporterFromEnv builds the exporter from the standard OTEL_EXPORTER_OTLP_* settings:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (to which
// /v1/traces is added), OTEL_EXPORTER_OTLP_HEADERS / _TRACES_HEADERS (k=v pairs, comma
// separated, URL-encoded), OTEL_EXPORTER_OTLP_TIMEOUT / _TRACES_TIMEOUT (milliseconds, default
// 10 s). OTEL_EXPORTER_OTLP_PROTOCOL, when set, must be http/json (or http/protobuf, which is
// answered with JSON: receivers take both).
func exporterFromEnv(getenv func(string) string) (*jsonExporter, error) {
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		base := strings.TrimRight(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/")
		if base == "" {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT is empty")
		}
		endpoint = base + "/v1/traces"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q is not an http(s) URL", endpoint)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p == "grpc" {
				return nil, fmt.Errorf("%s=grpc is not supported by the functions' exporter: use http/json (the collector's port 4318)", name)
			}
			break
		}
	}
	headers := map[string]string{}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for pair := range strings.SplitSeq(getenv(name), ",") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				continue
			}
			k, _ = url.QueryUnescape(strings.TrimSpace(k))
			v, _ = url.QueryUnescape(strings.TrimSpace(v))
			if k != "" {
				headers[k] = v
			}
		}
	}
	timeout := 10 * time.Second
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
		if v := getenv(name); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms <= 0 {
				return nil, fmt.Errorf("%s=%q is not a positive number of milliseconds", name, v)
			}
			timeout = time.Duration(ms) * time.Millisecond
			break
		}
	}
	return &jsonExporter{url: endpoint, headers: headers, client: &http.Client{Timeout: timeout}}, nil
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *jsonExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	done := e.shutdown
	e.mu.Unlock()
	if done || len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return fmt.Errorf("otlp json: encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("otlp json: export %d spans: %w", len(spans), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp json: export %d spans: %s: %s", len(spans), resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (e *jsonExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	return nil
}

// The OTLP JSON shapes (opentelemetry-proto's trace/v1 and common/v1 messages).
type (
	exportRequest struct {
		ResourceSpans []resourceSpans `json:"resourceSpans"`
	}
	resourceSpans struct {
		Resource   resourceJSON `json:"resource"`
		ScopeSpans []scopeSpans `json:"scopeSpans"`
		SchemaURL  string       `json:"schemaUrl,omitempty"`
	}
	resourceJSON struct {
		Attributes []keyValue `json:"attributes"`
	}
	scopeSpans struct {
		Scope     scopeJSON  `json:"scope"`
		Spans     []spanJSON `json:"spans"`
		SchemaURL string     `json:"schemaUrl,omitempty"`
	}
	scopeJSON struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	spanJSON struct {
		TraceID                string      `json:"traceId"`
		SpanID                 string      `json:"spanId"`
		TraceState             string      `json:"traceState,omitempty"`
		ParentSpanID           string      `json:"parentSpanId,omitempty"`
		Flags                  uint32      `json:"flags,omitempty"`
		Name                   string      `json:"name"`
		Kind                   int         `json:"kind"`
		StartTimeUnixNano      string      `json:"startTimeUnixNano"`
		EndTimeUnixNano        string      `json:"endTimeUnixNano"`
		Attributes             []keyValue  `json:"attributes,omitempty"`
		DroppedAttributesCount int         `json:"droppedAttributesCount,omitempty"`
		Events                 []eventJSON `json:"events,omitempty"`
		DroppedEventsCount     int         `json:"droppedEventsCount,omitempty"`
		Links                  []linkJSON  `json:"links,omitempty"`
		DroppedLinksCount      int         `json:"droppedLinksCount,omitempty"`
		Status                 statusJSON  `json:"status"`
	}
	eventJSON struct {
		TimeUnixNano string     `json:"timeUnixNano"`
		Name         string     `json:"name"`
		Attributes   []keyValue `json:"attributes,omitempty"`
	}
	linkJSON struct {
		TraceID    string     `json:"traceId"`
		SpanID     string     `json:"spanId"`
		TraceState string     `json:"traceState,omitempty"`
		Attributes []keyValue `json:"attributes,omitempty"`
		Flags      uint32     `json:"flags,omitempty"`
	}
	statusJSON struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
	keyValue struct {
		Key   string   `json:"key"`
		Value anyValue `json:"value"`
	}
	anyValue struct {
		StringValue *string     `json:"stringValue,omitempty"`
		BoolValue   *bool       `json:"boolValue,omitempty"`
		IntValue    *string     `json:"intValue,omitempty"`
		DoubleValue *float64    `json:"doubleValue,omitempty"`
		ArrayValue  *arrayValue `json:"arrayValue,omitempty"`
		BytesValue  *string     `json:"bytesValue,omitempty"`
	}
	arrayValue struct {
		Values []anyValue `json:"values"`
	}
)

// OTLP's span flags: bit 8 says whether the parent is known to be remote, bit 9 whether it is.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// encodeSpans groups spans by resource and scope, in the order they came.
func encodeSpans(spans []sdktrace.ReadOnlySpan) exportRequest {
	var req exportRequest
	resIdx := map[string]int{}
	scopeIdx := map[[2]string]int{}
	for _, s := range spans {
		var res attribute.Set
		schema := ""
		if r := s.Resource(); r != nil {
			res, schema = *r.Set(), r.SchemaURL()
		}
		rk := res.Encoded(attribute.DefaultEncoder()) + "|" + schema
		ri, ok := resIdx[rk]
		if !ok {
			ri = len(req.ResourceSpans)
			resIdx[rk] = ri
			req.ResourceSpans = append(req.ResourceSpans, resourceSpans{Resource: resourceJSON{Attributes: keyValues(res.ToSlice())}, SchemaURL: schema})
		}
		rs := &req.ResourceSpans[ri]
		sc := s.InstrumentationScope()
		sk := [2]string{rk, sc.Name + "@" + sc.Version + "|" + sc.SchemaURL}
		si, ok := scopeIdx[sk]
		if !ok {
			si = len(rs.ScopeSpans)
			scopeIdx[sk] = si
			rs.ScopeSpans = append(rs.ScopeSpans, scopeSpans{Scope: scopeJSON{Name: sc.Name, Version: sc.Version}, SchemaURL: sc.SchemaURL})
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, encodeSpan(s))
	}
	return req
}

func encodeSpan(s sdktrace.ReadOnlySpan) spanJSON {
	sc := s.SpanContext()
	out := spanJSON{
		TraceID:                sc.TraceID().String(),
		SpanID:                 sc.SpanID().String(),
		TraceState:             sc.TraceState().String(),
		Flags:                  uint32(sc.TraceFlags()) | flagHasIsRemote,
		Name:                   s.Name(),
		Kind:                   int(s.SpanKind()), // OTLP's SpanKind numbers are the API's
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: s.DroppedAttributes(),
		DroppedEventsCount:     s.DroppedEvents(),
		DroppedLinksCount:      s.DroppedLinks(),
	}
	if p := s.Parent(); p.IsValid() {
		out.ParentSpanID = p.SpanID().String()
		if p.IsRemote() {
			out.Flags |= flagIsRemote
		}
	}
	for _, ev := range s.Events() {
		out.Events = append(out.Events, eventJSON{TimeUnixNano: unixNano(ev.Time), Name: ev.Name, Attributes: keyValues(ev.Attributes)})
	}
	for _, l := range s.Links() {
		lj := linkJSON{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String(),
			TraceState: l.SpanContext.TraceState().String(), Attributes: keyValues(l.Attributes),
			Flags: uint32(l.SpanContext.TraceFlags()) | flagHasIsRemote}
		if l.SpanContext.IsRemote() {
			lj.Flags |= flagIsRemote
		}
		out.Links = append(out.Links, lj)
	}
	// OTLP: UNSET 0, OK 1, ERROR 2; the API: Unset 0, Error 1, Ok 2.
	switch st := s.Status(); st.Code {
	case codes.Ok:
		out.Status = statusJSON{Code: 1}
	case codes.Error:
		out.Status = statusJSON{Code: 2, Message: st.Description}
	}
	return out
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func keyValues(kvs []attribute.KeyValue) []keyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]keyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, keyValue{Key: string(kv.Key), Value: value(kv.Value)})
	}
	return out
}

func value(v attribute.Value) anyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return anyValue{BoolValue: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return anyValue{IntValue: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return anyValue{DoubleValue: &f}
	case attribute.BOOLSLICE:
		return arrayOf(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return arrayOf(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return arrayOf(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return arrayOf(v.AsStringSlice(), attribute.StringValue)
	}
	s := v.Emit()
	if v.Type() != attribute.STRING && v.Type() != attribute.INVALID {
		b := base64.StdEncoding.EncodeToString([]byte(s))
		return anyValue{BytesValue: &b}
	}
	return anyValue{StringValue: &s}
}

// arrayOf is the arrayValue of a slice attribute's elements.
func arrayOf[T any](elems []T, valueOf func(T) attribute.Value) anyValue {
	a := arrayValue{Values: make([]anyValue, 0, len(elems))}
	for _, e := range elems {
		a.Values = append(a.Values, value(valueOf(e)))
	}
	return anyValue{ArrayValue: &a}
}
