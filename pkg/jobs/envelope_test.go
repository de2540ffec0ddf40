package jobs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// The -update flag rewrites the golden files: go test ./pkg/jobs/ -run Golden -update
//
// It is registered only when no other test file of this binary registered it first, so that a
// second golden-file test in the package cannot make the binary panic with "flag redefined".
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/")
	}
}

func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const (
	goldenEnvelopeDir = "testdata/envelope"
	decodeOnlyDir     = "testdata/envelope/decode"
)

// goldenEnvelope is a round-trip case: Envelope value ⇄ the exact bytes in <dir>/<name>.json.
type goldenEnvelope struct {
	name string
	env  jobs.Envelope
	// decoded is what DecodeEnvelope returns for the golden bytes when it is not env itself
	// (invalid UTF-8 comes back as U+FFFD).
	decoded *jobs.Envelope
}

func goldenEnvelopes() []goldenEnvelope {
	enqueued := time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC)
	plus2 := time.FixedZone("+02:00", 2*60*60)
	return []goldenEnvelope{
		{
			name: "minimal",
			env: jobs.Envelope{
				V: 1, ID: "01JDQ3ZV5XG8K2M4N6P8R0T2V4", Kind: "email.send",
				Args: json.RawMessage(`{"to":"a@b.c"}`),
			},
		},
		{
			name: "full",
			env: jobs.Envelope{
				V: 1, ID: "01JDQ3ZV5XG8K2M4N6P8R0T2V5", Kind: "email.send",
				Args:           json.RawMessage(`{"to":"a@b.c","template":"welcome"}`),
				Key:            "order-42-welcome",
				EnqueuedAt:     enqueued,
				MaxAttempts:    8,
				AttemptsBefore: 3,
				// Written in UTC whatever the location of the value.
				RunAt: time.Date(2026, 11, 30, 6, 30, 0, 250_000_000, plus2),
				Meta: map[string]string{
					"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					"tenant":      "acme",
					"b":           "2",
					"a":           "1",
					"Z":           "upper case sorts first",
				},
			},
		},
		{
			name: "escapes",
			env: jobs.Envelope{
				V: 1, ID: `quote"back\slash/solidus`, Kind: "text.escape",
				Args: json.RawMessage(`{"text":"h\u00e9llo \"q\" \\ \u2028"}`),
				Key:  "ctl:\x00\x01\b\f\n\r\t\x1f\x7f:end",
				Meta: map[string]string{
					"html":    `<a href="x">&amp;</a>`,
					"ls":      "a\u2028b\u2029c",
					"unicode": "héllo, 世界, 🎉, \u00a0nbsp, \ufffd literal",
				},
			},
		},
		{
			name: "invalid_utf8",
			env: jobs.Envelope{
				V: 1, ID: "01JDQ3ZV5XG8K2M4N6P8R0T2V6", Kind: "text.escape",
				Args: json.RawMessage(`{}`),
				Key:  "bad\xffbyte \xe2\x82truncated \xc0\xafoverlong end",
				Meta: map[string]string{"k\xfe": "v\x80"},
			},
			decoded: &jobs.Envelope{
				V: 1, ID: "01JDQ3ZV5XG8K2M4N6P8R0T2V6", Kind: "text.escape",
				Args: json.RawMessage(`{}`),
				Key:  "bad\ufffdbyte \ufffd\ufffdtruncated \ufffd\ufffdoverlong end",
				Meta: map[string]string{"k\ufffd": "v\ufffd"},
			},
		},
		{
			name: "nested_args",
			env: jobs.Envelope{
				V: 1, ID: "01JDQ3ZV5XG8K2M4N6P8R0T2V7", Kind: "order.fulfil",
				Args: json.RawMessage(`{"order":{"id":42,"lines":[{"sku":"A-1","qty":2},` +
					`{"sku":"B-2","qty":1,"options":{"gift":true,"note":null,"wrap":{"colour":"red"}}}]},` +
					`"amount":12.5,"tags":[],"empty":{}}`),
				Key:        "order-42",
				EnqueuedAt: enqueued,
			},
		},
	}
}

func TestEnvelopeGoldenEncode(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenEnvelopes() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(goldenEnvelopeDir, tc.name+".json")
			got, err := tc.env.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			want := readGolden(t, path)
			if !bytes.Equal(got, want) {
				t.Fatalf("MarshalJSON differs from %s:\n got: %s\nwant: %s", path, got, want)
			}
			// AppendJSON writes the same bytes after what is already in dst.
			if app := tc.env.AppendJSON([]byte("prefix:")); string(app) != "prefix:"+string(want) {
				t.Errorf("AppendJSON = %s, want prefix:%s", app, want)
			}
			// encoding/json calls MarshalJSON (through a pointer) and keeps the bytes, apart from
			// its HTML escaping of <, > and &, which is off here.
			var viaStd bytes.Buffer
			enc := json.NewEncoder(&viaStd)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(&tc.env); err != nil || !bytes.Equal(bytes.TrimSuffix(viaStd.Bytes(), []byte("\n")), want) {
				t.Errorf("json.Encoder.Encode(&env) = %s, %v; want %s", viaStd.Bytes(), err, want)
			}
		})
	}
}

func TestEnvelopeGoldenDecodeRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenEnvelopes() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := readGolden(t, filepath.Join(goldenEnvelopeDir, tc.name+".json"))
			want := tc.env
			if tc.decoded != nil {
				want = *tc.decoded
			}
			got, err := jobs.DecodeEnvelope(body)
			if err != nil {
				t.Fatalf("DecodeEnvelope: %v", err)
			}
			assertEnvelopeEqual(t, got, want)
			if !bytes.Equal(got.Args, want.Args) {
				t.Errorf("args = %s, want the exact bytes %s", got.Args, want.Args)
			}
			again, err := got.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON of the decoded envelope: %v", err)
			}
			if tc.decoded == nil {
				// Encoding the decoded value gives the golden bytes back.
				if !bytes.Equal(again, body) {
					t.Errorf("re-encoded = %s, want %s", again, body)
				}
				return
			}
			// U+FFFD is now a valid character, written as itself rather than as \ufffd: the
			// bytes differ, the value does not.
			twice, err := jobs.DecodeEnvelope(again)
			if err != nil {
				t.Fatalf("DecodeEnvelope(%s): %v", again, err)
			}
			assertEnvelopeEqual(t, twice, want)
		})
	}
}

// TestEnvelopeGoldenReadByEncodingJSON reads every golden file with encoding/json, an independent
// JSON reader, so that an escaping mistake in the encoder cannot hide behind the decoder.
func TestEnvelopeGoldenReadByEncodingJSON(t *testing.T) {
	t.Parallel()
	type wire struct {
		V              int               `json:"v"`
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
	for _, tc := range goldenEnvelopes() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := readGolden(t, filepath.Join(goldenEnvelopeDir, tc.name+".json"))
			if !json.Valid(body) {
				t.Fatalf("not valid JSON: %s", body)
			}
			var w wire
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&w); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			want := tc.env
			if tc.decoded != nil {
				want = *tc.decoded
			}
			if w.V != want.V || w.ID != want.ID || w.Kind != want.Kind || w.Key != want.Key ||
				w.MaxAttempts != want.MaxAttempts || w.AttemptsBefore != want.AttemptsBefore {
				t.Errorf("encoding/json read %+v, want %+v", w, want)
			}
			if !bytes.Equal(w.Args, want.Args) {
				t.Errorf("args = %s, want %s", w.Args, want.Args)
			}
			if !maps.Equal(w.Meta, want.Meta) {
				t.Errorf("meta = %q, want %q", w.Meta, want.Meta)
			}
			for _, ts := range []struct {
				field, got string
				want       time.Time
			}{{"enqueued_at", w.EnqueuedAt, want.EnqueuedAt}, {"run_at", w.RunAt, want.RunAt}} {
				if ts.want.IsZero() {
					if ts.got != "" {
						t.Errorf("%s = %q, want it omitted", ts.field, ts.got)
					}
					continue
				}
				// Always UTC, always exactly three fraction digits.
				if wantS := ts.want.UTC().Format("2006-01-02T15:04:05.000Z"); ts.got != wantS {
					t.Errorf("%s = %q, want %q", ts.field, ts.got, wantS)
				}
			}
		})
	}
}

// TestEnvelopeGoldenFilesHaveCases fails on a stale golden file that no case writes or reads.
func TestEnvelopeGoldenFilesHaveCases(t *testing.T) {
	t.Parallel()
	check := func(dir string, names []string) {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range files {
			got = append(got, strings.TrimSuffix(filepath.Base(f), ".json"))
		}
		slices.Sort(got)
		slices.Sort(names)
		if !slices.Equal(got, names) {
			t.Errorf("%s holds %q, the tests know %q", dir, got, names)
		}
	}
	var golden []string
	for _, tc := range goldenEnvelopes() {
		golden = append(golden, tc.name)
	}
	check(goldenEnvelopeDir, golden)
	var decodeOnly []string
	for _, tc := range decodeOnlyEnvelopes() {
		decodeOnly = append(decodeOnly, tc.name)
	}
	check(decodeOnlyDir, decodeOnly)
}

// decodeOnlyEnvelope is a hand-written input in testdata/envelope/decode: what a producer in
// another language may send, the Envelope it decodes to, and the canonical bytes it re-encodes to.
type decodeOnlyEnvelope struct {
	name      string
	want      jobs.Envelope // Args compared as compact JSON
	key       string        // want EffectiveKey()
	reencoded string
}

func decodeOnlyEnvelopes() []decodeOnlyEnvelope {
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	return []decodeOnlyEnvelope{
		{
			name: "unknown_fields",
			want: jobs.Envelope{V: 1, ID: "job-1", Kind: "email.send", Args: json.RawMessage(`{"to":"a@b.c"}`),
				Meta: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
			key: "job-1",
			reencoded: `{"v":1,"id":"job-1","kind":"email.send","args":{"to":"a@b.c"},` +
				`"meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`,
		},
		{
			name:      "key_missing",
			want:      jobs.Envelope{V: 1, ID: "job-2", Kind: "report.build", Args: json.RawMessage(`{}`)},
			key:       "job-2",
			reencoded: `{"v":1,"id":"job-2","kind":"report.build","args":{}}`,
		},
		{
			name:      "key_empty",
			want:      jobs.Envelope{V: 1, ID: "job-3", Kind: "report.build", Args: json.RawMessage(`{}`)},
			key:       "job-3",
			reencoded: `{"v":1,"id":"job-3","kind":"report.build","args":{}}`,
		},
		{
			name: "enqueued_at_no_fraction",
			want: jobs.Envelope{V: 1, ID: "job-4", Kind: "a", Args: json.RawMessage(`{}`),
				EnqueuedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
			key:       "job-4",
			reencoded: `{"v":1,"id":"job-4","kind":"a","args":{},"enqueued_at":"2026-11-29T10:00:00.000Z"}`,
		},
		{
			name: "enqueued_at_nanoseconds",
			want: jobs.Envelope{V: 1, ID: "job-5", Kind: "a", Args: json.RawMessage(`{}`),
				EnqueuedAt: time.Date(2026, 11, 29, 10, 0, 0, 123_456_789, time.UTC)},
			key: "job-5",
			// Written with milliseconds: the extra digits are truncated, not rounded.
			reencoded: `{"v":1,"id":"job-5","kind":"a","args":{},"enqueued_at":"2026-11-29T10:00:00.123Z"}`,
		},
		{
			name: "enqueued_at_offset",
			want: jobs.Envelope{V: 1, ID: "job-6", Kind: "a", Args: json.RawMessage(`{}`),
				EnqueuedAt: at("2026-11-29T10:00:00.5Z"), RunAt: at("2026-11-29T17:30:00Z")},
			key: "job-6",
			reencoded: `{"v":1,"id":"job-6","kind":"a","args":{},"enqueued_at":"2026-11-29T10:00:00.500Z",` +
				`"run_at":"2026-11-29T17:30:00.000Z"}`,
		},
		{
			name: "whitespace",
			want: jobs.Envelope{V: 1, ID: "job-7", Kind: "email.send",
				Args: json.RawMessage(`{"to":"a@b.c","cc":["d@e.f"]}`), Key: "welcome-7",
				EnqueuedAt: at("2026-11-29T10:00:00.123Z"), MaxAttempts: 3, AttemptsBefore: 1,
				Meta: map[string]string{"tenant": "acme"}},
			key: "welcome-7",
			reencoded: `{"v":1,"id":"job-7","kind":"email.send","args":{ "to" : "a@b.c", "cc" : [ "d@e.f" ] },` +
				`"key":"welcome-7","enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":3,"attempts_before":1,` +
				`"meta":{"tenant":"acme"}}`,
		},
		{
			name: "zero_optional_fields",
			want: jobs.Envelope{V: 1, ID: "job-8", Kind: "a", Args: json.RawMessage(`{}`),
				Meta: map[string]string{}},
			key:       "job-8",
			reencoded: `{"v":1,"id":"job-8","kind":"a","args":{}}`,
		},
	}
}

func TestDecodeEnvelopeAcceptsProducerVariants(t *testing.T) {
	t.Parallel()
	for _, tc := range decodeOnlyEnvelopes() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := readGolden(t, filepath.Join(decodeOnlyDir, tc.name+".json"))
			got, err := jobs.DecodeEnvelope(body)
			if err != nil {
				t.Fatalf("DecodeEnvelope: %v", err)
			}
			assertEnvelopeEqual(t, got, tc.want)
			if k := got.EffectiveKey(); k != tc.key {
				t.Errorf("EffectiveKey() = %q, want %q", k, tc.key)
			}
			b, err := got.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			// Canonical form: fixed field order, UTC milliseconds, zero fields omitted.
			if compact(t, b) != compact(t, []byte(tc.reencoded)) {
				t.Errorf("re-encoded:\n got: %s\nwant: %s", b, tc.reencoded)
			}
			if !json.Valid(b) {
				t.Errorf("re-encoded body is not valid JSON: %s", b)
			}
		})
	}
}

func TestEnvelopeEffectiveKeyDefaultsToID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ id, key, want string }{
		{"id-1", "", "id-1"},
		{"id-1", "order-42", "order-42"},
		{"", "", ""},
	} {
		e := jobs.Envelope{ID: tc.id, Key: tc.key}
		if got := e.EffectiveKey(); got != tc.want {
			t.Errorf("Envelope{ID: %q, Key: %q}.EffectiveKey() = %q, want %q", tc.id, tc.key, got, tc.want)
		}
	}
}

// invalidEnvelope is a body DecodeEnvelope must reject. Every entry of mentions must appear in
// the error message; an entry may list alternatives separated by "|".
type invalidEnvelope struct {
	name     string
	body     string
	mentions []string
}

func invalidEnvelopes() []invalidEnvelope {
	kind129 := strings.Repeat("k", 129)
	ok := func(fields string) string {
		return `{"v":1,"id":"job-1","kind":"email.send","args":{}` + fields + `}`
	}
	return []invalidEnvelope{
		{"empty body", ``, []string{"JSON|end|empty"}},
		{"not JSON", `hello`, []string{"invalid|JSON|syntax"}},
		{"JSON array", `[{"v":1,"id":"job-1","kind":"a","args":{}}]`, []string{"array|object"}},
		{"JSON string", `"job"`, []string{"string|object"}},
		{"truncated", `{"v":1,"id":"job-1","kind":"a","args":{}`, []string{"end|unexpected|JSON"}},
		{"trailing garbage", `{"v":1,"id":"job-1","kind":"a","args":{}} x`, []string{"after top-level value|trailing|after"}},
		{"second object", `{"v":1,"id":"job-1","kind":"a","args":{}}{}`, []string{"after top-level value|trailing|after"}},
		{"v missing", `{"id":"job-1","kind":"a","args":{}}`, []string{"v", "missing|required"}},
		{"v is 2", `{"v":2,"id":"job-1","kind":"a","args":{}}`, []string{"version|v=2", "2"}},
		{"v is 0", `{"v":0,"id":"job-1","kind":"a","args":{}}`, []string{"version|v=0", "0"}},
		{"v is a string", `{"v":"1","id":"job-1","kind":"a","args":{}}`, []string{"string|v"}},
		{"id missing", `{"v":1,"kind":"a","args":{}}`, []string{"id", "empty|missing|required"}},
		{"id empty", `{"v":1,"id":"","kind":"a","args":{}}`, []string{"id", "empty|missing|required"}},
		{"id is a number", `{"v":1,"id":42,"kind":"a","args":{}}`, []string{"number|id"}},
		{"kind missing", `{"v":1,"id":"job-1","args":{}}`, []string{"kind", "empty|missing|required"}},
		{"kind upper case", `{"v":1,"id":"job-1","kind":"Email.send","args":{}}`, []string{"Email.send", "not allowed|invalid"}},
		{"kind leading dot", `{"v":1,"id":"job-1","kind":".email","args":{}}`, []string{".email", "not allowed|invalid"}},
		{"kind with space", `{"v":1,"id":"job-1","kind":"email send","args":{}}`, []string{"email send", "not allowed|invalid"}},
		{"kind 129 characters", `{"v":1,"id":"job-1","kind":"` + kind129 + `","args":{}}`, []string{"kind", "129", "128"}},
		{"args missing", `{"v":1,"id":"job-1","kind":"a"}`, []string{"args", "object|missing|required"}},
		{"args array", `{"v":1,"id":"job-1","kind":"a","args":[1,2]}`, []string{"args", "object"}},
		{"args string", `{"v":1,"id":"job-1","kind":"a","args":"{}"}`, []string{"args", "object"}},
		{"args null", `{"v":1,"id":"job-1","kind":"a","args":null}`, []string{"args", "object"}},
		{"args number", `{"v":1,"id":"job-1","kind":"a","args":1}`, []string{"args", "object"}},
		{"max_attempts negative", ok(`,"max_attempts":-1`), []string{"max_attempts", "-1|negative"}},
		{"max_attempts fractional", ok(`,"max_attempts":1.5`), []string{"max_attempts|number|1.5"}},
		{"attempts_before negative", ok(`,"attempts_before":-3`), []string{"attempts_before", "-3|negative"}},
		{"enqueued_at date only", ok(`,"enqueued_at":"2026-11-29"`), []string{"enqueued_at"}},
		{"enqueued_at space separator", ok(`,"enqueued_at":"2026-11-29 10:00:00Z"`), []string{"enqueued_at"}},
		{"enqueued_at no zone", ok(`,"enqueued_at":"2026-11-29T10:00:00"`), []string{"enqueued_at"}},
		{"enqueued_at month 13", ok(`,"enqueued_at":"2026-13-01T10:00:00Z"`), []string{"enqueued_at"}},
		{"enqueued_at unix number", ok(`,"enqueued_at":1764410400`), []string{"enqueued_at|number"}},
		{"run_at not a time", ok(`,"run_at":"tomorrow"`), []string{"run_at"}},
		{"meta value not a string", ok(`,"meta":{"attempt":1}`), []string{"meta|number|string"}},
		{"meta not an object", ok(`,"meta":["traceparent"]`), []string{"meta|array|object"}},
	}
}

func TestDecodeEnvelopeRejectsInvalidBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range invalidEnvelopes() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := jobs.DecodeEnvelope([]byte(tc.body))
			if err == nil {
				t.Fatalf("DecodeEnvelope(%s) = %+v, want an error", tc.body, got)
			}
			if !errors.Is(err, jobs.ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			msg := err.Error()
			if detail := strings.TrimPrefix(msg, jobs.ErrMalformed.Error()); len(strings.TrimLeft(detail, ": ")) == 0 {
				t.Errorf("error %q does not say what is wrong", msg)
			}
			for _, m := range tc.mentions {
				if !mentionsAny(msg, m) {
					t.Errorf("error %q does not mention %q", msg, m)
				}
			}
		})
	}
}

func TestEnvelopeMarshalJSONValidates(t *testing.T) {
	t.Parallel()
	valid := func() jobs.Envelope {
		return jobs.Envelope{V: 1, ID: "job-1", Kind: "email.send", Args: json.RawMessage(`{"to":"a@b.c"}`)}
	}
	for _, tc := range []struct {
		name    string
		edit    func(*jobs.Envelope)
		mention string
		// onlyMarshal: Validate checks the shape of args, MarshalJSON also checks that they parse.
		onlyMarshal bool
	}{
		{"version 0", func(e *jobs.Envelope) { e.V = 0 }, "v=0", false},
		{"version 2", func(e *jobs.Envelope) { e.V = 2 }, "v=2", false},
		{"empty id", func(e *jobs.Envelope) { e.ID = "" }, "id", false},
		{"invalid kind", func(e *jobs.Envelope) { e.Kind = "Email" }, "Email", false},
		{"empty kind", func(e *jobs.Envelope) { e.Kind = "" }, "kind", false},
		{"nil args", func(e *jobs.Envelope) { e.Args = nil }, "args", false},
		{"args array", func(e *jobs.Envelope) { e.Args = json.RawMessage(`[]`) }, "args", false},
		{"args invalid JSON", func(e *jobs.Envelope) { e.Args = json.RawMessage(`{"to":}`) }, "args", true},
		{"args two objects", func(e *jobs.Envelope) { e.Args = json.RawMessage(`{} {}`) }, "args", true},
		{"negative max_attempts", func(e *jobs.Envelope) { e.MaxAttempts = -1 }, "max_attempts", false},
		{"negative attempts_before", func(e *jobs.Envelope) { e.AttemptsBefore = -1 }, "attempts_before", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := valid()
			tc.edit(&e)
			b, err := e.MarshalJSON()
			if err == nil {
				t.Fatalf("MarshalJSON = %s, want an error", b)
			}
			if !errors.Is(err, jobs.ErrMalformed) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q: want ErrMalformed mentioning %q", err, tc.mention)
			}
			if !tc.onlyMarshal {
				if verr := e.Validate(); !errors.Is(verr, jobs.ErrMalformed) {
					t.Errorf("Validate() = %v, want ErrMalformed", verr)
				}
			}
		})
	}
	e := valid()
	if err := e.Validate(); err != nil {
		t.Errorf("Validate() on a valid envelope = %v", err)
	}
}

// FuzzEnvelopeStringsEscape checks that any Go string in id, key and meta is written as valid
// JSON that encoding/json reads back as encoding/json itself would have written it, and that
// DecodeEnvelope agrees. The seeds run as an ordinary test.
func FuzzEnvelopeStringsEscape(f *testing.F) {
	for _, s := range []string{
		"plain", `"`, `\`, "/", "\x00", "\x1f", "\x7f", "\b\f\n\r\t", "\u2028\u2029", "é世界🎉",
		"\xff", "\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "\ufffd", "<>&", "a\u2028\xffb\"c\\d",
	} {
		f.Add(s, s, s, s)
	}
	f.Fuzz(func(t *testing.T, id, key, metaKey, metaValue string) {
		if id == "" {
			id = "x" // an empty id is invalid; keep the input interesting otherwise
		}
		e := jobs.Envelope{V: 1, ID: id, Kind: "fuzz", Args: json.RawMessage(`{}`), Key: key,
			Meta: map[string]string{metaKey: metaValue}}
		body := e.AppendJSON(nil)
		if !json.Valid(body) {
			t.Fatalf("not valid JSON: %q", body)
		}
		var got struct {
			ID   string            `json:"id"`
			Key  string            `json:"key"`
			Meta map[string]string `json:"meta"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("encoding/json: %v in %q", err, body)
		}
		want := func(s string) string { // what encoding/json makes of s (invalid UTF-8 → U+FFFD)
			b, _ := json.Marshal(s)
			var out string
			_ = json.Unmarshal(b, &out)
			return out
		}
		if got.ID != want(id) || got.Key != want(key) || got.Meta[want(metaKey)] != want(metaValue) {
			t.Fatalf("read back id=%q key=%q meta=%q from %q", got.ID, got.Key, got.Meta, body)
		}
		dec, err := jobs.DecodeEnvelope(body)
		if err != nil {
			t.Fatalf("DecodeEnvelope(%q): %v", body, err)
		}
		if dec.ID != got.ID || dec.Key != got.Key || !maps.Equal(dec.Meta, got.Meta) {
			t.Fatalf("DecodeEnvelope read id=%q key=%q meta=%q, encoding/json %q %q %q",
				dec.ID, dec.Key, dec.Meta, got.ID, got.Key, got.Meta)
		}
	})
}

var writeGoldenOnce sync.Once

// readGolden reads a golden file. With -update it first rewrites every round-trip golden file
// (once, before any parallel test reads one).
func readGolden(t *testing.T, path string) []byte {
	t.Helper()
	if updatingGolden() {
		writeGoldenOnce.Do(func() {
			for _, tc := range goldenEnvelopes() {
				b, err := tc.env.MarshalJSON()
				if err != nil {
					panic(fmt.Sprintf("golden case %s: %v", tc.name, err))
				}
				if err := os.WriteFile(filepath.Join(goldenEnvelopeDir, tc.name+".json"), b, 0o644); err != nil {
					panic(err)
				}
			}
		})
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create golden files)", err)
	}
	return b
}

// assertEnvelopeEqual compares envelopes field by field: times with Equal (the location may
// differ), args as compact JSON, meta as a map (nil and empty are the same).
func assertEnvelopeEqual(t *testing.T, got, want jobs.Envelope) {
	t.Helper()
	if got.V != want.V || got.ID != want.ID || got.Kind != want.Kind || got.Key != want.Key ||
		got.MaxAttempts != want.MaxAttempts || got.AttemptsBefore != want.AttemptsBefore {
		t.Errorf("envelope = %+v\n     want %+v", got, want)
	}
	if !got.EnqueuedAt.Equal(want.EnqueuedAt) {
		t.Errorf("EnqueuedAt = %v, want %v", got.EnqueuedAt, want.EnqueuedAt)
	}
	if !got.RunAt.Equal(want.RunAt) {
		t.Errorf("RunAt = %v, want %v", got.RunAt, want.RunAt)
	}
	if compact(t, got.Args) != compact(t, want.Args) {
		t.Errorf("Args = %s, want %s", got.Args, want.Args)
	}
	if !maps.Equal(got.Meta, want.Meta) {
		t.Errorf("Meta = %q, want %q", got.Meta, want.Meta)
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.String()
}

func mentionsAny(msg, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(msg, a) {
			return true
		}
	}
	return false
}
