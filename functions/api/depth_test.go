package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/producer"
)

// treeKinds has a recursive schema: a tree of arrays, as deep as the args go.
var treeKinds = map[string]string{
	"SQSWORKER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
	"SQSWORKER_API_KINDS": "tree.walk",
	"SQSWORKER_API_SCHEMAS": `{"tree.walk": {"type":"object","properties":{"n":{"$ref":"#/$defs/node"}},
		"$defs":{"node":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}`,
}

// nested returns args {"n":[[…]]} nested depth deep in all (the args object included).
func nested(depth int) string {
	return `{"n":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// The payload, a 20 KB body nested 9,990 deep against a recursive schema (1.6 s to
// validate), is refused before anything decodes it; 64 levels of args pass.
func TestNestingCapped(t *testing.T) {
	t.Parallel()
	fs := &fakeSQS{}
	prod, err := producer.New(producer.Config{SQS: fs, QueueURL: treeKinds["SQSWORKER_QUEUE_URL"], MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Producer: prod, Policy: testPolicy(t, treeKinds), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	deep := `{"kind":"tree.walk","args":` + nested(9990) + `}`
	if len(deep) < 19_000 || len(deep) > 21_000 {
		t.Fatalf("the payload is %d bytes, want about 20 KB", len(deep))
	}
	const refused = `the body nests arrays and objects more than 65 levels deep: \"args\" may nest at most 64 (the args object is the first)`
	for _, tc := range []struct {
		name, body string
		wantCode   int
		wantBody   string
	}{
		{"9,990 deep (the issue's payload)", deep, http.StatusBadRequest, refused},
		{"65 deep", `{"kind":"tree.walk","args":` + nested(65) + `}`, http.StatusBadRequest, refused},
		{"64 deep: the limit", `{"kind":"tree.walk","args":` + nested(64) + `}`, http.StatusAccepted, `"id"`},
		{"deep objects", `{"kind":"tree.walk","args":{"a":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat("}", 71) + `}}`, http.StatusBadRequest, refused},
		{"brackets inside strings do not count", `{"kind":"tree.walk","args":{"s":"` + strings.Repeat("[{", 100) + `\"[[[","n":[]}}`, http.StatusAccepted, `"id"`},
		{"a deep unknown field", `{"kind":"tree.walk","x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, http.StatusBadRequest, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := api.Handle(context.Background(), request("POST", "/jobs", tc.body, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantCode || !strings.Contains(resp.Body, tc.wantBody) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, resp.Body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestNestedDeeper(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int
		want  bool
	}{
		{`{}`, 1, false},
		{`{"a":[]}`, 1, true},
		{`{"a":[]}`, 2, false},
		{`"[[[["`, 0, false},
		{`"\"[[[["`, 0, false},
		{`["\\",[]]`, 1, true},
		{`["\\\"[",1]`, 1, false},
		{`[[[`, 2, true},
		{``, 0, false},
	} {
		if got := nestedDeeper([]byte(tc.in), tc.limit); got != tc.want {
			t.Errorf("nestedDeeper(%s, %d) = %v, want %v", tc.in, tc.limit, got, tc.want)
		}
	}
}
