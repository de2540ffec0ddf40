package jobs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// referenceEnvelopeJSON and referenceDecodeEnvelope are DecodeEnvelope as it was written with
// encoding/json, kept as the reference ParseEnvelope must agree with.
type referenceEnvelopeJSON struct {
	V              *int              `json:"v"`
	ID             string            `json:"id"`
	Kind           string            `json:"kind"`
	Args           json.RawMessage   `json:"args"`
	Key            string            `json:"key"`
	EnqueuedAt     string            `json:"enqueued_at"`
	MaxAttempts    int               `json:"max_attempts"`
	AttemptsBefore int               `json:"attempts_before"`
	RunAt          string            `json:"run_at"`
	Meta           map[string]string `json:"meta"`
}

func referenceDecodeEnvelope(body []byte) (jobs.Envelope, error) {
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", jobs.ErrMalformed, fmt.Sprintf(format, args...))
	}
	var raw referenceEnvelopeJSON
	if err := json.Unmarshal(body, &raw); err != nil {
		return jobs.Envelope{}, malformed("%v", err)
	}
	if raw.V == nil {
		return jobs.Envelope{}, malformed("v is missing")
	}
	e := jobs.Envelope{
		V: *raw.V, ID: raw.ID, Kind: raw.Kind, Args: raw.Args, Key: raw.Key,
		MaxAttempts: raw.MaxAttempts, AttemptsBefore: raw.AttemptsBefore, Meta: raw.Meta,
	}
	var err error
	if raw.EnqueuedAt != "" {
		if e.EnqueuedAt, err = time.Parse(time.RFC3339Nano, raw.EnqueuedAt); err != nil {
			return jobs.Envelope{}, malformed("enqueued_at: %v", err)
		}
	}
	if raw.RunAt != "" {
		if e.RunAt, err = time.Parse(time.RFC3339Nano, raw.RunAt); err != nil {
			return jobs.Envelope{}, malformed("run_at: %v", err)
		}
	}
	if err := e.Validate(); err != nil {
		return jobs.Envelope{}, err
	}
	return e, nil
}

// envelopeFields are the keys encoding/json matched case-insensitively and ParseEnvelope exactly.
var envelopeFields = []string{"v", "id", "kind", "args", "key", "enqueued_at", "max_attempts", "attempts_before", "run_at", "meta"}

// hasFoldedEnvelopeKey reports whether body has a top-level key that only matches a field
// case-insensitively ("ID", "Kind", "K" for "k"…): the one documented difference.
func hasFoldedEnvelopeKey(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	for k := range top {
		for _, f := range envelopeFields {
			if k != f && strings.EqualFold(k, f) {
				return true
			}
		}
	}
	return false
}

// checkParseEnvelope compares ParseEnvelope and DecodeEnvelope with the reference on body.
func checkParseEnvelope(t *testing.T, body []byte) {
	t.Helper()
	got, err := jobs.ParseEnvelope(string(body))
	want, werr := referenceDecodeEnvelope(body)
	if err != nil && !errors.Is(err, jobs.ErrMalformed) {
		t.Fatalf("ParseEnvelope(%q): error %q does not wrap ErrMalformed", body, err)
	}
	if err != nil && strings.TrimLeft(strings.TrimPrefix(err.Error(), jobs.ErrMalformed.Error()), ": ") == "" {
		t.Fatalf("ParseEnvelope(%q): error %q does not say what is wrong", body, err)
	}
	if hasFoldedEnvelopeKey(body) {
		return
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("ParseEnvelope(%q) error = %v, reference error = %v", body, err, werr)
	}
	dec, derr := jobs.DecodeEnvelope(bytes.Clone(body))
	if (derr == nil) != (err == nil) {
		t.Fatalf("DecodeEnvelope(%q) error = %v, ParseEnvelope error = %v", body, derr, err)
	}
	if err != nil {
		return
	}
	compareEnvelopes(t, "ParseEnvelope", body, got, want)
	compareEnvelopes(t, "DecodeEnvelope", body, dec, want)
}

func compareEnvelopes(t *testing.T, name string, body []byte, got, want jobs.Envelope) {
	t.Helper()
	if !bytes.Equal(got.Args, want.Args) {
		t.Errorf("%s(%q): Args = %q, want %q", name, body, got.Args, want.Args)
	}
	if !sameTime(got.EnqueuedAt, want.EnqueuedAt) || !sameTime(got.RunAt, want.RunAt) {
		t.Errorf("%s(%q): times %v, %v; want %v, %v", name, body, got.EnqueuedAt, got.RunAt, want.EnqueuedAt, want.RunAt)
	}
	if !reflect.DeepEqual(got.Meta, want.Meta) { // nil and empty differ, as they did
		t.Errorf("%s(%q): Meta = %#v, want %#v", name, body, got.Meta, want.Meta)
	}
	got.Args, got.EnqueuedAt, got.RunAt, got.Meta = nil, time.Time{}, time.Time{}, nil
	want.Args, want.EnqueuedAt, want.RunAt, want.Meta = nil, time.Time{}, time.Time{}, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s(%q) = %+v, want %+v", name, body, got, want)
	}
}

// sameTime reports whether a and b are the same instant in the same zone (name and offset).
func sameTime(a, b time.Time) bool {
	an, ao := a.Zone()
	bn, bo := b.Zone()
	return a.Equal(b) && an == bn && ao == bo && a.Location().String() == b.Location().String()
}

// envelopeBodies are the table and seed inputs: valid, invalid and odd.
func envelopeBodies() []string {
	ok := func(fields string) string {
		return `{"v":1,"id":"job-1","kind":"email.send","args":{}` + fields + `}`
	}
	return []string{
		typicalEnvelope,
		`{"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8R0T2V5","kind":"email.send","args":{"to":"a@b.c","template":"welcome"},` +
			`"key":"order-42-welcome","enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":8,"attempts_before":3,` +
			`"run_at":"2026-11-30T04:30:00.250Z","meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tenant":"acme"}}`,
		` { "v" : 1 , "id" : "a" , "kind" : "k" , "args" : { "x" : [ 1 , 2 ] } } `,
		ok(`,"unknown":{"deep":[{"x":null},true,false,-1.5e+10,"\u00e9"]}`),
		ok(`,"meta":{}`), ok(`,"meta":null`), ok(`,"meta":{"a":"1"},"meta":{"b":"2"}`), ok(`,"meta":{"a":"1"},"meta":null`),
		ok(`,"meta":{"a":null,"a\u00e9":"\ud83c\udf89"}`), ok(`,"meta":{"a":1}`), ok(`,"meta":[]`), ok(`,"meta":"x"`),
		ok(`,"id":null`), ok(`,"id":"second"`), ok(`,"id":""`), ok(`,"id":5`), ok(`,"kind":"Bad"`),
		ok(`,"args":null`), ok(`,"args":[]`), ok(`,"args":"{}"`), ok(`,"args":{"a":[}`), ok(`,"args":{"b":2}`),
		ok(`,"v":null`), ok(`,"v":2`), ok(`,"v":1.0`), ok(`,"v":"1"`), ok(`,"v":-0`), ok(`,"v":1e0`),
		ok(`,"max_attempts":3`), ok(`,"max_attempts":null`), ok(`,"max_attempts":-1`), ok(`,"max_attempts":1.5`),
		ok(`,"max_attempts":9223372036854775807`), ok(`,"max_attempts":9223372036854775808`), ok(`,"attempts_before":-3`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00Z"`), ok(`,"enqueued_at":"2026-11-29T10:00:00.123456789123Z"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00.5+05:30"`), ok(`,"enqueued_at":"2026-11-29T10:00:00-08:00"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00+24:00"`), ok(`,"enqueued_at":"2026-11-29T1:00:00Z"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00,5Z"`), ok(`,"enqueued_at":"2026-02-29T10:00:00Z"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00\u002e5Z"`), ok(`,"enqueued_at":""`), ok(`,"enqueued_at":null`),
		ok(`,"enqueued_at":"x"`), ok(`,"enqueued_at":1`), ok(`,"run_at":"2026-11-29t10:00:00z"`),
		ok(`,"enqueued_at":"2024-02-29T00:00:00Z"`), ok(`,"enqueued_at":"2100-02-29T00:00:00Z"`),
		ok(`,"enqueued_at":"2000-02-29T23:59:59.999999999Z"`), ok(`,"enqueued_at":"0000-01-01T00:00:00Z"`),
		ok(`,"enqueued_at":"0000-03-01T00:00:00.1Z"`), ok(`,"enqueued_at":"9999-12-31T23:59:59.9999999999Z"`),
		ok(`,"enqueued_at":"1969-12-31T23:59:59.5Z"`), ok(`,"enqueued_at":"2026-11-29T10:00:00.Z"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:60Z"`), ok(`,"enqueued_at":"2026-11-29T24:00:00Z"`),
		ok(`,"enqueued_at":"2026-11-31T10:00:00Z"`), ok(`,"enqueued_at":"2026-00-10T10:00:00Z"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00.12a3Z"`), ok(`,"enqueued_at":"+026-11-29T10:00:00Z"`),
		ok(`,"enqueued_at":"2026-11-29T10:00:00ZZ"`), ok(`,"enqueued_at":"2026-11-29T10:00:00.123+00:00"`),
		ok(`,"ID":"upper"`), ok(`,"Kind":5`),
		`{"v":1,"id":"a\u0000b\"c\\d\/e\b\f\n\r\t","kind":"k","args":{},"key":"\ud800\udc00\ud800x\udfff"}`,
		"{\"v\":1,\"id\":\"bad\xffutf8\",\"kind\":\"k\",\"args\":{\"x\":\"\xfe\"},\"key\":\"\xed\xa0\x80\"}",
		`{"v":1,"id":"a","kind":"k","args":{}} x`, `{"v":1,"id":"a","kind":"k","args":{}}{}`,
		`{"v":1,"id":"a","kind":"k","args":{}`, `{"v":1,"id":"a","kind":"k","args":{},}`, `{"v":1 "id":"a"}`,
		`{"v":1,"id":"a\x01","kind":"k","args":{}}`, `{"v":1,"id":"\x","kind":"k","args":{}}`,
		``, ` `, `null`, `[]`, `"job"`, `1`, `true`, `hello`, `{}`, `{"v":1}`,
	}
}

const typicalEnvelope = `{"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8R0T2V4","kind":"noop","args":{"n":1},"enqueued_at":"2026-11-29T10:00:00.123Z"}`

func TestParseEnvelopeMatchesReference(t *testing.T) {
	t.Parallel()
	for _, body := range envelopeBodies() {
		checkParseEnvelope(t, []byte(body))
	}
	// The golden files of envelope_test.go.
	files, _ := filepath.Glob("testdata/envelope/*.json")
	more, _ := filepath.Glob("testdata/envelope/*/*.json")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkParseEnvelope(t, b)
	}
}

// TestParseEnvelopeTimes compares the times of many envelopes with the reference's time.Parse:
// every fraction length, dates around month ends, leap days and the extremes of RFC 3339.
func TestParseEnvelopeTimes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 5000 {
		var ts string
		switch n % 3 {
		case 0: // anything in range
			ts = fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", rng.IntN(10000), 1+rng.IntN(12), 1+rng.IntN(31),
				rng.IntN(24), rng.IntN(60), rng.IntN(60))
		case 1: // month ends and leap days
			ts = fmt.Sprintf("%04d-%02d-%02dT23:59:59", []int{0, 1, 4, 100, 1900, 2000, 2024, 2100, 9999}[rng.IntN(9)],
				1+rng.IntN(12), 28+rng.IntN(4))
		case 2: // values time.Parse rejects or treats specially
			ts = fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", rng.IntN(10000), rng.IntN(14), rng.IntN(33),
				rng.IntN(26), rng.IntN(62), rng.IntN(62))
		}
		if digits := rng.IntN(13); digits > 0 {
			ts += "." + strconv.FormatUint(rng.Uint64(), 10)[:min(digits, 19)]
		}
		ts += []string{"Z", "Z", "Z", "+00:00", "-07:30", "+14:00", "z", ""}[rng.IntN(8)]
		checkParseEnvelope(t, []byte(`{"v":1,"id":"a","kind":"k","args":{},"enqueued_at":"`+ts+`"}`))
	}
}

func TestParseEnvelopeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, msg string }{
		{``, "offset 0: unexpected end of JSON input"},
		{`[]`, "offset 0: the body is an array, want a JSON object"},
		{`{"v":1,"id":"a","kind":"k","args":{}} x`, "offset 38: invalid character 'x' after top-level value"},
		{`{"v":1,"id":"a","kind":"k","args":{"a":[}}`, "offset 40: invalid character '}' looking for beginning of value"},
		{`{"v":"1","id":"a","kind":"k","args":{}}`, "offset 5: v is a string, want an integer or null"},
		{`{"v":1.5,"id":"a","kind":"k","args":{}}`, "offset 5: v: number 1.5 is not an integer"},
		{`{"v":1,"id":"a","kind":"k","args":{},"max_attempts":99999999999999999999}`, "max_attempts: number 99999999999999999999 is out of range"},
		{`{"v":1,"id":"a","kind":"k","args":{},"meta":{"a":1}}`, "meta.a is a number, want a string or null"},
		{`{"id":"a","kind":"k","args":{}}`, "v is missing"},
		{`{"v":1,"id":"a","kind":"k","args":[]}`, "args must be a JSON object"},
		{`{"v":1,"id":"a","kind":"k","args":{},"run_at":"soon"}`, `run_at: parsing time "soon"`},
	} {
		_, err := jobs.ParseEnvelope(tc.body)
		if !errors.Is(err, jobs.ErrMalformed) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseEnvelope(%s) = %v, want ErrMalformed and %q", tc.body, err, tc.msg)
		}
	}
}

// TestParseEnvelopeAliasesBody checks the zero-copy promise: strings without escapes and Args
// point into body.
func TestParseEnvelopeAliasesBody(t *testing.T) {
	t.Parallel()
	body := `{"v":1,"id":"job-1","kind":"email.send","args":{"to":"a@b.c"},"key":"k-1","meta":{"tenant":"acme"}}`
	e, err := jobs.ParseEnvelope(body)
	if err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(body)))
	inBody := func(p *byte) bool {
		a := uintptr(unsafe.Pointer(p))
		return a >= start && a < start+uintptr(len(body))
	}
	for name, s := range map[string]string{"id": e.ID, "kind": e.Kind, "key": e.Key, "meta value": e.Meta["tenant"]} {
		if !inBody(unsafe.StringData(s)) {
			t.Errorf("%s %q was copied", name, s)
		}
	}
	if !inBody(&e.Args[0]) || cap(e.Args) != len(e.Args) {
		t.Errorf("Args %q (cap %d) is not a view of body", e.Args, cap(e.Args))
	}
	// DecodeEnvelope's result does not alias its argument.
	b := []byte(body)
	d, err := jobs.DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'X'
	}
	if d.ID != "job-1" || string(d.Args) != `{"to":"a@b.c"}` || d.Meta["tenant"] != "acme" {
		t.Errorf("DecodeEnvelope result changed with its argument: %+v", d)
	}
}

func TestParseEnvelopeAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		max  float64
	}{
		{"typical", typicalEnvelope, 0},
		{"all fields but meta", `{"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8R0T2V4","kind":"noop","args":{"n":[1,{"a":"b"}]},"key":"k",` +
			`"enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":5,"attempts_before":1,"run_at":"2026-11-29T11:00:00Z","x":null}`, 0},
		{"meta", `{"v":1,"id":"a","kind":"k","args":{},"meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`, 2},
	} {
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := jobs.ParseEnvelope(tc.body); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > tc.max {
			t.Errorf("%s: %v allocations, want at most %v", tc.name, allocs, tc.max)
		}
	}
}

// FuzzParseEnvelope checks ParseEnvelope (and DecodeEnvelope) against the encoding/json
// reference on any input: same acceptance, same envelope; never a panic.
//
//	go test ./pkg/jobs -run '^$' -fuzz FuzzParseEnvelope -fuzztime 60s
func FuzzParseEnvelope(f *testing.F) {
	for _, body := range envelopeBodies() {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParseEnvelope(t, body)
	})
}

// BenchmarkParseEnvelope compares ParseEnvelope and DecodeEnvelope with the encoding/json
// reference on a typical envelope.
func BenchmarkParseEnvelope(b *testing.B) {
	withMeta := `{"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8R0T2V4","kind":"email.send","args":{"to":"a@b.c","template":"welcome"},` +
		`"key":"order-42-welcome","enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":8,"attempts_before":3,` +
		`"meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`
	for _, body := range []struct{ name, s string }{{"typical", typicalEnvelope}, {"full", withMeta}} {
		b.Run(body.name+"/ParseEnvelope", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jobs.ParseEnvelope(body.s); err != nil {
					b.Fatal(err)
				}
			}
		})
		bb := []byte(body.s)
		b.Run(body.name+"/DecodeEnvelope", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jobs.DecodeEnvelope(bb); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/encoding_json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := referenceDecodeEnvelope(bb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
