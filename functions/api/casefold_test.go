package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"unicode"

	gojson "github.com/goccy/go-json"

	"github.com/sqsworker/sqsworker/pkg/producer"
)

// caseKinds has the docs' email.send schema (no additionalProperties: false, as in
// docs/FUNCTIONS.md before the fix) and a nested one reached through $ref, allOf and items.
var caseKinds = map[string]string{
	"SQSWORKER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
	"SQSWORKER_API_KINDS": "email.send,order.ship",
	"SQSWORKER_API_SCHEMAS": `{
	"email.send": {"type":"object","required":["to"],"properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"}}},
	"order.ship": {"type":"object","$defs":{"line":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z0-9-]+$"},"qty":{"type":"integer","minimum":1}}}},
		"allOf":[{"properties":{"order_id":{"type":"string"}}}],
		"properties":{"address":{"type":"object","properties":{"zip":{"type":"string","maxLength":10}}},
			"lines":{"type":"array","items":{"$ref":"#/$defs/line"}}}}}`,
}

func caseAPI(t *testing.T) (*API, *fakeSQS) {
	t.Helper()
	fs := &fakeSQS{}
	prod, err := producer.New(producer.Config{SQS: fs, QueueURL: caseKinds["SQSWORKER_QUEUE_URL"], MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &API{Producer: prod, Policy: testPolicy(t, caseKinds), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, fs
}

// The API refuses keys that differ from a property of the schema only by case, at every place
// the schema describes: JSON Schema did not validate them, and the worker's decoder would take
// them for the property.
func TestCaseVariantsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		wantCode   int
		wantFields []FieldError
	}{
		{name: "the issue's payload", body: `{"kind":"email.send","args":{"to":"ada@example.com","TO":"<anything>"}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/TO", Error: "'TO' differs from the property 'to' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'to'"}}},
		{name: "the variant first", body: `{"kind":"email.send","args":{"tO":"<anything>","to":"ada@example.com"}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/tO", Error: "'tO' differs from the property 'to' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'to'"}}},
		{name: "long s (U+017F) folds to s", body: `{"kind":"email.send","args":{"to":"ada@example.com","ſubject":"<anything>"}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/ſubject", Error: `'\u017fubject' differs from the property 'subject' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'subject'`}}},
		{name: "escaped in the JSON", body: `{"kind":"email.send","args":{"to":"ada@example.com","\u0054o":"<anything>"}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/To", Error: "'To' differs from the property 'to' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'to'"}}},
		{name: "the variant alone also fails required", body: `{"kind":"email.send","args":{"TO":"ada@example.com"}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "", Error: "missing property 'to'"},
				{Field: "/TO", Error: "'TO' differs from the property 'to' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'to'"}}},
		{name: "nested object", body: `{"kind":"order.ship","args":{"address":{"zip":"12345","ZIP":"` + strings.Repeat("9", 40) + `"}}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/address/ZIP", Error: "'ZIP' differs from the property 'zip' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'zip'"}}},
		{name: "array items through $ref", body: `{"kind":"order.ship","args":{"lines":[{"sku":"A-1","qty":1},{"sku":"B-2","Qty":-5}]}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/lines/1/Qty", Error: "'Qty' differs from the property 'qty' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'qty'"}}},
		{name: "through allOf", body: `{"kind":"order.ship","args":{"order_id":"o-1","order_id_":"x","ORDER_ID":"o-2"}}`, wantCode: http.StatusBadRequest,
			wantFields: []FieldError{{Field: "/ORDER_ID", Error: "'ORDER_ID' differs from the property 'order_id' only by case: refused, since Go's JSON decoding (case-insensitive) would take it for 'order_id'"}}},
		{name: "exact names pass", body: `{"kind":"order.ship","args":{"order_id":"o-1","address":{"zip":"1"},"lines":[{"sku":"A","qty":2}]}}`, wantCode: http.StatusAccepted},
		{name: "'_' and '-' are not folded (the decoder compares them as they are)", body: `{"kind":"order.ship","args":{"order-id":"x","orderid":"y"}}`, wantCode: http.StatusAccepted},
		{name: "keys the schema does not describe are not its business", body: `{"kind":"order.ship","args":{"Extra":1,"extra":2,"address":{"zip":"1"}}}`, wantCode: http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api, fs := caseAPI(t)
			resp, err := api.Handle(context.Background(), request("POST", "/jobs", tt.body, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, resp.Body, tt.wantCode)
			}
			if tt.wantCode != http.StatusBadRequest {
				return
			}
			var e errorResponse
			if err := json.Unmarshal([]byte(resp.Body), &e); err != nil {
				t.Fatal(err)
			}
			if len(e.Fields) != len(tt.wantFields) {
				t.Fatalf("fields %+v, want %+v", e.Fields, tt.wantFields)
			}
			for i := range e.Fields {
				if e.Fields[i] != tt.wantFields[i] {
					t.Errorf("field %d = %+v, want %+v", i, e.Fields[i], tt.wantFields[i])
				}
			}
			if len(fs.sent) != 0 {
				t.Errorf("%d messages sent for refused args", len(fs.sent))
			}
		})
	}
}

// shipArgs is order.ship's args as a worker declares them.
type shipArgs struct {
	OrderID string `json:"order_id"`
	Address struct {
		Zip string `json:"zip"`
	} `json:"address"`
	Lines []struct {
		Sku string `json:"sku"`
		Qty int    `json:"qty"`
	} `json:"lines"`
}

// The API's folding is the worker decoder's: for every key, goccy/go-json (the worker's args
// decoder) puts its value into a property's field exactly when the key is that property or the
// API refuses it as a case variant.
func TestCaseVariantsMatchTheWorkersDecoder(t *testing.T) {
	t.Parallel()
	api, _ := caseAPI(t)
	names := []string{"order_id", "zip", "sku"}
	var keys []string
	for _, n := range names {
		keys = append(keys, n, strings.ToUpper(n), strings.ToUpper(n[:1])+n[1:], strings.ReplaceAll(n, "_", "-"), strings.ReplaceAll(n, "_", ""),
			n+"_", "_"+n, strings.ReplaceAll(n, "s", "ſ"), strings.ReplaceAll(n, "k", "\u212a"), strings.ReplaceAll(n, "i", "ı"),
			strings.ReplaceAll(strings.ToUpper(n), "I", "İ"), strings.ReplaceAll(n, "z", "ｚ"), n+"\u0301")
		// Every rune whose simple-folding orbit holds one of the name's letters, in its place.
		for i, r := range n {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				keys = append(keys, n[:i]+string(f)+n[i+len(string(r)):])
			}
		}
	}
	for _, k := range keys {
		kj, _ := json.Marshal(k)
		for _, place := range []struct {
			args  string
			field func(a shipArgs) string
			name  string
		}{
			{`{` + string(kj) + `:"X"}`, func(a shipArgs) string { return a.OrderID }, "order_id"},
			{`{"address":{` + string(kj) + `:"X"}}`, func(a shipArgs) string { return a.Address.Zip }, "zip"},
			{`{"lines":[{` + string(kj) + `:"X"}]}`, func(a shipArgs) string {
				if len(a.Lines) == 0 {
					return ""
				}
				return a.Lines[0].Sku
			}, "sku"},
		} {
			var a shipArgs
			if err := gojson.Unmarshal([]byte(place.args), &a); err != nil {
				t.Fatalf("goccy: %s: %v", place.args, err)
			}
			decoderTakesIt := place.field(a) == "X"
			resp, err := api.Handle(context.Background(), request("POST", "/jobs", `{"kind":"order.ship","args":`+place.args+`}`, nil))
			if err != nil {
				t.Fatal(err)
			}
			refused := resp.StatusCode == http.StatusBadRequest && strings.Contains(resp.Body, "only by case")
			want := decoderTakesIt && k != place.name
			if refused != want {
				t.Errorf("args %s: the worker's decoder takes %q for %s: %v; the API refused it as a case variant: %v (%d %s)",
					place.args, k, place.name, decoderTakesIt, refused, resp.StatusCode, resp.Body)
			}
		}
	}
}

func TestFoldKeyIsEqualFold(t *testing.T) {
	t.Parallel()
	runes := []rune{'a', 'A', 's', 'S', 'ſ', 'k', 'K', '\u212a', 'ß', 'ẞ', 'µ', 'μ', 'Μ', 'ı', 'I', 'i', 'İ', 'Σ', 'σ', 'ς', 'ǅ', 'ǆ', 'Ǆ', 'ｚ', 'Z', '_', '-', '\ufffd'}
	for _, a := range runes {
		for _, b := range runes {
			x, y := "x"+string(a), "x"+string(b)
			if got, want := foldKey(x) == foldKey(y), strings.EqualFold(x, y); got != want {
				t.Errorf("foldKey(%q) == foldKey(%q) is %v, strings.EqualFold %v", x, y, got, want)
			}
		}
	}
}
