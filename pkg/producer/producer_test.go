package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no client", Config{QueueURL: stdURL}, "Config.SQS is nil"},
		{"no url", Config{SQS: api}, "Config.QueueURL is empty"},
		{"not a url", Config{SQS: api, QueueURL: "jobs"}, `Config.QueueURL "jobs" is not a queue URL`},
		{"no path", Config{SQS: api, QueueURL: "https://sqs.us-east-1.amazonaws.com/"}, "is not a queue URL"},
		{"negative retries", Config{SQS: api, QueueURL: stdURL, MaxRetries: -2}, "Config.MaxRetries -2 is negative"},
		{"negative delay", Config{SQS: api, QueueURL: stdURL, RetryBaseDelay: -time.Second}, "must not be negative"},
		{"max below base", Config{SQS: api, QueueURL: stdURL, RetryBaseDelay: time.Second, RetryMaxDelay: time.Millisecond}, "RetryMaxDelay 1ms is below RetryBaseDelay 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.cfg)
			if p != nil {
				t.Errorf("New returned a producer with an error")
			}
			mustContain(t, err, "producer: ", tt.want)
		})
	}

	p, err := New(Config{SQS: api, QueueURL: fifoURL})
	if err != nil || !p.FIFO() || p.QueueURL() != fifoURL {
		t.Fatalf("New(fifo) = %v, %v; FIFO() = %v", p, err, p != nil && p.FIFO())
	}
	if p, _ := New(Config{SQS: api, QueueURL: stdURL}); p.FIFO() || p.maxRetries != 3 || p.retryBase != 50*time.Millisecond {
		t.Errorf("defaults: fifo=%v maxRetries=%d base=%v", p.FIFO(), p.maxRetries, p.retryBase)
	}
	if p, _ := New(Config{SQS: api, QueueURL: stdURL, MaxRetries: -1}); p.maxRetries != 0 {
		t.Errorf("MaxRetries -1 gave %d retries", p.maxRetries)
	}
}

func TestEnqueueRejectsInvalidJobs(t *testing.T) {
	t.Parallel()
	nineAttrs := map[string]types.MessageAttributeValue{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		nineAttrs[n] = strAttr("v")
	}
	attrs := func(name string, v types.MessageAttributeValue) Option {
		return WithAttributes(map[string]types.MessageAttributeValue{name: v})
	}
	tests := []struct {
		name      string
		url       string
		args      jobs.Args
		opts      []Option
		want      []string
		scheduler bool // also ErrNeedsScheduler
		tooLarge  bool // also ErrTooLarge
	}{
		{name: "bad kind", args: badKindArgs{}, want: []string{"enqueue job:", `kind "Bad Kind": character 'B' at 0 is not allowed`}},
		{name: "nil args", args: nil, want: []string{"args are nil"}},
		{name: "nil pointer args", args: (*ptrArgs)(nil), want: []string{"args are a nil *producer.ptrArgs"}},
		{name: "array args", args: sliceArgs{"x"}, want: []string{"bad.slice", "encode to a JSON array", "must encode to a JSON object"}},
		{name: "string args", args: stringArgs("x"), want: []string{"encode to a JSON string"}},
		{name: "null args", args: mapArgs(nil), want: []string{"encode to a JSON null"}},
		{name: "unencodable args", args: chanArgs{C: make(chan int)}, want: []string{"args producer.chanArgs do not encode to JSON", "chan int"}},
		{name: "max attempts 0", args: emailArgs{}, opts: []Option{WithMaxAttempts(0)}, want: []string{"enqueue email.send: max attempts 0: must be at least 1"}},
		{name: "empty key", args: emailArgs{}, opts: []Option{WithKey("")}, want: []string{"key is empty"}},
		{name: "long key", args: emailArgs{}, opts: []Option{WithKey(strings.Repeat("k", MaxKeyLength+1))}, want: []string{"is 1025 bytes long, the limit is 1024"}},
		{name: "invalid utf-8 key", args: emailArgs{}, opts: []Option{WithKey("a\xffb")}, want: []string{"not valid UTF-8"}},
		{name: "empty id", args: emailArgs{}, opts: []Option{WithID("")}, want: []string{"id is empty"}},
		{name: "id with space", args: emailArgs{}, opts: []Option{WithID("a b")}, want: []string{`id "a b": character ' ' at 1 is not allowed`}},
		{name: "negative delay", args: emailArgs{}, opts: []Option{WithDelay(-time.Second)}, want: []string{"delay -1s is negative"}},
		{name: "delay above 15m", args: emailArgs{}, opts: []Option{WithDelay(15*time.Minute + time.Millisecond)}, scheduler: true,
			want: []string{"delay 15m0.001s is longer than SQS's 15-minute maximum", "EventBridge Scheduler", "set producer.Config.Scheduler"}},
		{name: "delay on fifo", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("g"), WithDelay(time.Second)}, scheduler: true,
			want: []string{"delay 1s on a FIFO queue", "no per-message delay", "set producer.Config.Scheduler"}},
		{name: "too many attributes", args: emailArgs{}, opts: []Option{WithAttributes(nineAttrs)}, want: []string{"9 message attributes, at most 8"}},
		{name: "reserved sqsworker attribute", args: emailArgs{}, opts: []Option{attrs("sqsworker.failure", strAttr("x"))}, want: []string{`"sqsworker.failure"`, "reserved for the sqsworker worker"}},
		{name: "reserved AWS attribute", args: emailArgs{}, opts: []Option{attrs("aws.trace", strAttr("x"))}, want: []string{`"aws.trace"`, "reserved by AWS"}},
		{name: "reserved Amazon attribute", args: emailArgs{}, opts: []Option{attrs("Amazon.x", strAttr("x"))}, want: []string{"reserved by AWS"}},
		{name: "attribute bad character", args: emailArgs{}, opts: []Option{attrs("a b", strAttr("x"))}, want: []string{`"a b": character ' ' at 1 is not allowed`}},
		{name: "attribute leading period", args: emailArgs{}, opts: []Option{attrs(".a", strAttr("x"))}, want: []string{"must not start or end with a period"}},
		{name: "attribute double period", args: emailArgs{}, opts: []Option{attrs("a..b", strAttr("x"))}, want: []string{"consecutive periods"}},
		{name: "attribute long name", args: emailArgs{}, opts: []Option{attrs(strings.Repeat("a", 257), strAttr("x"))}, want: []string{"257 characters long, SQS allows at most 256"}},
		{name: "attribute no type", args: emailArgs{}, opts: []Option{attrs("a", types.MessageAttributeValue{StringValue: aws.String("x")})}, want: []string{`"a" has no DataType`}},
		{name: "attribute bad type", args: emailArgs{}, opts: []Option{attrs("a", types.MessageAttributeValue{DataType: aws.String("Text"), StringValue: aws.String("x")})}, want: []string{`DataType "Text" is not String, Number or Binary`}},
		{name: "attribute empty value", args: emailArgs{}, opts: []Option{attrs("a", strAttr(""))}, want: []string{`"a" (String) has an empty StringValue`}},
		{name: "attribute control char", args: emailArgs{}, opts: []Option{attrs("a", strAttr("x\x00"))}, want: []string{"character SQS does not allow at byte 1"}},
		{name: "attribute empty binary", args: emailArgs{}, opts: []Option{attrs("a", types.MessageAttributeValue{DataType: aws.String("Binary")})}, want: []string{"empty BinaryValue"}},
		{name: "fifo without group", url: fifoURL, args: emailArgs{}, want: []string{"no message group id: FIFO queue jobs.fifo needs one", "WithGroupID"}},
		{name: "empty group", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("")}, want: []string{"message group id is empty"}},
		{name: "group with space", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("a b")}, want: []string{`message group id "a b": character ' ' at 1`}},
		{name: "long group", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID(strings.Repeat("g", 129))}, want: []string{"129 characters long, SQS allows at most 128"}},
		{name: "dedup on standard queue", args: emailArgs{}, opts: []Option{WithDeduplicationID("d")}, want: []string{`deduplication id "d" on standard queue jobs`, "only to FIFO queues"}},
		{name: "bad dedup on fifo", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("g"), WithDeduplicationID("é")}, want: []string{"deduplication id", "is not allowed"}},
		{name: "empty meta key", args: emailArgs{}, opts: []Option{WithMeta("", "x")}, want: []string{"meta key is empty"}},
		{name: "oversize args", args: blobArgs{Data: strings.Repeat("x", MaxMessageSize)}, tooLarge: true, want: []string{"enqueue blob.store", "would exceed 1040384 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{}
			url := stdURL
			if tt.url != "" {
				url = tt.url
			}
			p := newTestProducer(t, api, url)
			res, err := p.Enqueue(context.Background(), tt.args, tt.opts...)
			mustContain(t, err, append([]string{"producer: enqueue "}, tt.want...)...)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if got := errors.Is(err, ErrNeedsScheduler); got != tt.scheduler {
				t.Errorf("errors.Is(ErrNeedsScheduler) = %v, want %v", got, tt.scheduler)
			}
			if got := errors.Is(err, ErrTooLarge); got != tt.tooLarge {
				t.Errorf("errors.Is(ErrTooLarge) = %v, want %v", got, tt.tooLarge)
			}
			if res.Err != err {
				t.Errorf("Result.Err = %v, want the returned error", res.Err)
			}
			if n := len(api.sendCalls()); n != 0 {
				t.Errorf("%d SendMessage calls for an invalid job", n)
			}
		})
	}
}

func TestEnqueueSizeLimitIsExact(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	attr := WithAttributes(map[string]types.MessageAttributeValue{
		"tenant": strAttr("acme"),                                                // 6 + 6 + 4 = 16 bytes
		"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}}, // 4 + 6 + 3 = 13
	})
	const attrSize = 16 + 13
	// Measure the envelope's overhead around the data, then fill the message exactly.
	if _, err := p.Enqueue(context.Background(), blobArgs{}, attr, WithID("id")); err != nil {
		t.Fatal(err)
	}
	overhead := len(api.sendCalls()[0].Body)
	fill := MaxMessageSize - attrSize - overhead
	if _, err := p.Enqueue(context.Background(), blobArgs{Data: strings.Repeat("x", fill)}, attr, WithID("id")); err != nil {
		t.Fatalf("message of exactly MaxMessageSize rejected: %v", err)
	}
	if got := api.sendCalls()[1].size(); got != MaxMessageSize {
		t.Fatalf("message size = %d, want %d", got, MaxMessageSize)
	}
	_, err := p.Enqueue(context.Background(), blobArgs{Data: strings.Repeat("x", fill+1)}, attr, WithID("id"))
	mustContain(t, err, "message is 1040385 bytes (body 1040356 + attributes 29), above the limit of 1040384 bytes")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v does not wrap ErrTooLarge", err)
	}
}

func decodeBody(t *testing.T, body string) jobs.Envelope {
	t.Helper()
	env, err := jobs.DecodeEnvelope([]byte(body))
	if err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return env
}

func TestEnqueueBuildsMessage(t *testing.T) {
	t.Parallel()
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name     string
		url      string
		ctx      context.Context
		args     jobs.Args
		opts     []Option
		wantBody string // exact body; "" to skip
		want     sentEntry
		meta     map[string]string
		key      string
	}{
		{
			name: "defaults", args: emailArgs{To: "a@b.c"}, opts: []Option{WithID("01JD000000000000000000000A")},
			wantBody: `{"v":1,"id":"01JD000000000000000000000A","kind":"email.send","args":{"to":"a@b.c"},"enqueued_at":"2026-11-29T10:00:00.123Z"}`,
			key:      "01JD000000000000000000000A",
		},
		{
			name: "every option", ctx: jobs.WithTraceParent(context.Background(), tp),
			args: emailArgs{To: "a@b.c", Subject: "<hi> & bye"},
			opts: []Option{WithID("id-1"), WithKey("order-42-welcome"), WithMaxAttempts(7), WithMeta("tenant", "acme"), WithDelay(1500 * time.Millisecond)},
			wantBody: `{"v":1,"id":"id-1","kind":"email.send","args":{"to":"a@b.c","subject":"<hi> & bye"},"key":"order-42-welcome",` +
				`"enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":7,"meta":{"tenant":"acme","traceparent":"` + tp + `"}}`,
			want: sentEntry{Delay: 2},
			key:  "order-42-welcome",
		},
		{
			name: "traceparent from ctx", ctx: jobs.WithTraceParent(context.Background(), tp), args: emailArgs{},
			meta: map[string]string{"traceparent": tp},
		},
		{
			name: "traceparent of the running job", ctx: jobs.WithInfo(context.Background(), &jobs.Info{TraceParent: tp}), args: emailArgs{},
			meta: map[string]string{"traceparent": tp},
		},
		{
			name: "meta traceparent overrides ctx", ctx: jobs.WithTraceParent(context.Background(), tp), args: emailArgs{},
			opts: []Option{WithMeta("traceparent", "mine")},
			meta: map[string]string{"traceparent": "mine"},
		},
		{name: "delay 900s", args: emailArgs{}, opts: []Option{WithDelay(MaxDelay)}, want: sentEntry{Delay: 900}},
		{name: "delay 1ns rounds up", args: emailArgs{}, opts: []Option{WithDelay(1)}, want: sentEntry{Delay: 1}},
		{name: "delay 0 on fifo", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("g"), WithKey("k"), WithDelay(0)},
			want: sentEntry{Group: "g", Dedup: "email.send:k"}},
		{name: "group on standard queue (fair queue)", args: emailArgs{}, opts: []Option{WithGroupID("tenant-7")}, want: sentEntry{Group: "tenant-7"}},
		{name: "fifo explicit dedup", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("g"), WithDeduplicationID("d-1")}, want: sentEntry{Group: "g", Dedup: "d-1"}},
		{name: "fifo dedup from id", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("g"), WithID("id-9")}, want: sentEntry{Group: "g", Dedup: "email.send:id-9"}},
		{name: "fifo dedup hashes spaces", url: fifoURL, args: emailArgs{}, opts: []Option{WithGroupID("g"), WithKey("order 42")},
			want: sentEntry{Group: "g", Dedup: sha256Hex("email.send:order 42")}},
		{name: "attributes merge", args: emailArgs{}, opts: []Option{
			WithAttributes(map[string]types.MessageAttributeValue{"a": strAttr("1"), "b": strAttr("2")}),
			WithAttributes(map[string]types.MessageAttributeValue{"b": strAttr("3")}),
		}, want: sentEntry{Attrs: map[string]types.MessageAttributeValue{"a": strAttr("1"), "b": strAttr("3")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{}
			url := stdURL
			if tt.url != "" {
				url = tt.url
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			p := newTestProducer(t, api, url)
			res, err := p.Enqueue(ctx, tt.args, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := api.sendCalls()[0]
			if res.MessageID != "msg-1" || res.Kind != tt.args.Kind() || res.ID == "" {
				t.Errorf("result = %+v", res)
			}
			if tt.key != "" && res.Key != tt.key {
				t.Errorf("Result.Key = %q, want %q", res.Key, tt.key)
			}
			if tt.wantBody != "" && got.Body != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", got.Body, tt.wantBody)
			}
			env := decodeBody(t, got.Body)
			if env.ID != res.ID || env.EffectiveKey() != res.Key || !env.EnqueuedAt.Equal(fixedNow) {
				t.Errorf("envelope %+v does not match result %+v", env, res)
			}
			if tt.meta != nil && !equalMeta(env.Meta, tt.meta) {
				t.Errorf("meta = %v, want %v", env.Meta, tt.meta)
			}
			if got.Delay != tt.want.Delay || got.Group != tt.want.Group || got.Dedup != tt.want.Dedup {
				t.Errorf("delay/group/dedup = %d/%q/%q, want %d/%q/%q", got.Delay, got.Group, got.Dedup, tt.want.Delay, tt.want.Group, tt.want.Dedup)
			}
			if tt.want.Attrs != nil && !equalAttrs(got.Attrs, tt.want.Attrs) {
				t.Errorf("attributes = %v, want %v", got.Attrs, tt.want.Attrs)
			}
		})
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func equalMeta(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalAttrs(a, b map[string]types.MessageAttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || aws.ToString(v.DataType) != aws.ToString(w.DataType) || aws.ToString(v.StringValue) != aws.ToString(w.StringValue) || string(v.BinaryValue) != string(w.BinaryValue) {
			return false
		}
	}
	return true
}

func TestDeduplicationID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind, key string
		hashed    bool
	}{
		{"email.send", "order-42", false},
		{"email.send", "01JD000000000000000000000A", false},
		{"email.send", "with space", true},
		{"email.send", "naïve", true},
		{"email.send", strings.Repeat("k", 128-len("email.send:")), false},
		{"email.send", strings.Repeat("k", 128-len("email.send:")+1), true},
	}
	for _, tt := range tests {
		got := deduplicationID(tt.kind, tt.key)
		if !validSQSToken(got) {
			t.Errorf("deduplicationID(%q, %q) = %q, not a valid SQS token", tt.kind, tt.key, got)
		}
		if tt.hashed {
			if len(got) != 64 || strings.Contains(got, ":") {
				t.Errorf("deduplicationID(%q, %.20q) = %q, want a SHA-256 hex", tt.kind, tt.key, got)
			}
		} else if got != tt.kind+":"+tt.key {
			t.Errorf("deduplicationID(%q, %q) = %q, want kind:key", tt.kind, tt.key, got)
		}
	}
	if deduplicationID("a", "x y") == deduplicationID("a", "x  y") {
		t.Error("distinct keys hash alike")
	}
}

func TestEnqueueSendError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	api := &fakeSQS{onSend: func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error) { return nil, boom }}
	p := newTestProducer(t, api, stdURL)
	res, err := p.Enqueue(context.Background(), emailArgs{}, WithID("id-1"))
	mustContain(t, err, "producer: enqueue email.send (id id-1): SQS SendMessage: boom")
	if !errors.Is(err, boom) || errors.Is(err, ErrInvalid) || res.ID != "id-1" || res.MessageID != "" {
		t.Errorf("res = %+v, err = %v", res, err)
	}
}

func TestOptionsReusable(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	shared := []Option{
		WithMeta("tenant", "acme"),
		WithAttributes(map[string]types.MessageAttributeValue{"a": strAttr("1")}),
		WithAttributes(map[string]types.MessageAttributeValue{"b": strAttr("2")}),
	}
	ctx := jobs.WithTraceParent(context.Background(), "tp")
	for range 3 {
		if _, err := p.Enqueue(ctx, emailArgs{}, shared...); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range api.sendCalls() {
		env := decodeBody(t, s.Body)
		if !equalMeta(env.Meta, map[string]string{"tenant": "acme", "traceparent": "tp"}) || len(s.Attrs) != 2 {
			t.Errorf("send %d: meta %v, attrs %v", i, env.Meta, s.Attrs)
		}
	}
}

func TestEnvelopeArgsAreJSONObject(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	if _, err := p.Enqueue(context.Background(), mapArgs{"n": 1, "s": "x"}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal([]byte(api.sendCalls()[0].Body), &body); err != nil || body.Args["s"] != "x" {
		t.Fatalf("args = %v, %v", body.Args, err)
	}
}
