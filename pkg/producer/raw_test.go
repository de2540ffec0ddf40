package producer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestEnqueueRawBuildsTheSameMessageAsEnqueue(t *testing.T) {
	t.Parallel()
	opts := []Option{WithID("id-1"), WithKey("order-42-welcome"), WithMaxAttempts(7)}

	typed := &fakeSQS{}
	if _, err := newTestProducer(t, typed, stdURL).Enqueue(context.Background(), emailArgs{To: "a@b.c", Subject: "<hi> & bye"}, opts...); err != nil {
		t.Fatal(err)
	}
	raw := &fakeSQS{}
	res, err := newTestProducer(t, raw, stdURL).EnqueueRaw(context.Background(), "email.send",
		json.RawMessage(" {\n  \"to\": \"a@b.c\",\t\"subject\": \"<hi> & bye\"\n}\n"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"id":"id-1","kind":"email.send","args":{"to":"a@b.c","subject":"<hi> & bye"},"key":"order-42-welcome",` +
		`"enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":7}`
	if got := raw.sendCalls()[0].Body; got != want {
		t.Errorf("raw body\n got %s\nwant %s", got, want)
	}
	if got := typed.sendCalls()[0].Body; got != want {
		t.Errorf("typed body\n got %s\nwant %s", got, want)
	}
	if res.ID != "id-1" || res.Kind != "email.send" || res.Key != "order-42-welcome" || res.MessageID != "msg-1" {
		t.Errorf("result = %+v", res)
	}
}

func TestEnqueueRawFIFO(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, fifoURL)
	if _, err := p.EnqueueRaw(context.Background(), "email.send", json.RawMessage(`{}`), WithGroupID("g"), WithKey("k")); err != nil {
		t.Fatal(err)
	}
	if got := api.sendCalls()[0]; got.Group != "g" || got.Dedup != "email.send:k" {
		t.Errorf("sent %+v, want group g, dedup email.send:k", got)
	}
}

func TestEnqueueRawRejectsInvalidJobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, kind, args string
		opts                  []Option
		want                  []string
		wantKind              string
	}{
		{name: "bad kind", kind: "Email", args: `{}`, want: []string{"producer: enqueue job: ", `kind "Email": character 'E' at 0 is not allowed`}},
		{name: "empty kind", kind: "", args: `{}`, want: []string{"enqueue job: kind is empty"}},
		{name: "no args", kind: "a.b", args: ``, wantKind: "a.b", want: []string{"enqueue a.b: args are empty: want a JSON object"}},
		{name: "blank args", kind: "a.b", args: " \n", wantKind: "a.b", want: []string{"args are empty"}},
		{name: "invalid JSON", kind: "a.b", args: `{"to":`, wantKind: "a.b", want: []string{"args are not valid JSON: unexpected end of JSON input"}},
		{name: "trailing data", kind: "a.b", args: `{} {}`, wantKind: "a.b", want: []string{"args are not valid JSON: invalid character '{' after top-level value"}},
		{name: "array", kind: "a.b", args: `[1]`, wantKind: "a.b", want: []string{"args are a JSON array; args must be a JSON object"}},
		{name: "string", kind: "a.b", args: `"x"`, wantKind: "a.b", want: []string{"args are a JSON string"}},
		{name: "null", kind: "a.b", args: ` null`, wantKind: "a.b", want: []string{"args are a JSON null"}},
		{name: "number", kind: "a.b", args: `42`, wantKind: "a.b", want: []string{"args are a JSON number"}},
		{name: "option", kind: "a.b", args: `{}`, opts: []Option{WithMaxAttempts(0)}, wantKind: "a.b", want: []string{"enqueue a.b: max attempts 0: must be at least 1"}},
		{name: "fifo without group", url: fifoURL, kind: "a.b", args: `{}`, wantKind: "a.b", want: []string{"no message group id"}},
		{name: "too large", kind: "a.b", args: `{"d":"` + strings.Repeat("x", MaxMessageSize) + `"}`, wantKind: "a.b", want: []string{"would exceed 1040384 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{}
			url := stdURL
			if tt.url != "" {
				url = tt.url
			}
			res, err := newTestProducer(t, api, url).EnqueueRaw(context.Background(), tt.kind, json.RawMessage(tt.args), tt.opts...)
			mustContain(t, err, tt.want...)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if res.Err != err || res.Kind != tt.wantKind {
				t.Errorf("result = %+v, want Err = the returned error and Kind %q", res, tt.wantKind)
			}
			if n := len(api.sendCalls()); n != 0 {
				t.Errorf("%d SendMessage calls for an invalid job", n)
			}
		})
	}
}
