package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQueueName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"arn:aws:sqs:eu-west-1:123456789012:jobs", "jobs"},
		{"arn:aws:sqs:eu-west-1:123456789012:orders.fifo", "orders.fifo"},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/jobs", "jobs"},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/jobs/", "jobs"},
		{"http://localhost:4566/000000000000/orders.fifo?x=1", "orders.fifo"},
		{"https://sqs.eu-west-1.amazonaws.com", ""},
		{"jobs", "jobs"},
		{" jobs ", "jobs"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := QueueName(tt.in); got != tt.want {
			t.Errorf("QueueName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero value", Config{}, true},
		{"custom namespace", Config{Namespace: "MyApp/Jobs #1: prod_eu-west.1"}, true},
		{"reserved namespace", Config{Namespace: "AWS/SQS"}, false},
		{"namespace character", Config{Namespace: "jobs!"}, false},
		{"blank namespace", Config{Namespace: "   "}, false},
		{"long namespace", Config{Namespace: strings.Repeat("n", 256)}, false},
		{"service with quote", Config{Service: `a"b`}, true},
		{"blank service", Config{Service: "  "}, false},
		{"non-ASCII queue", Config{Queue: "jöbs"}, false},
		{"control character", Config{Queue: "a\tb"}, false},
		{"long queue", Config{Queue: strings.Repeat("q", 1025)}, false},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v does not wrap ErrConfig", tt.name, err)
		}
	}
}

// TestDefaults is not parallel: it sets the environment.
func TestDefaults(t *testing.T) {
	for _, tt := range []struct{ env, want string }{{"my-function", "my-function"}, {"", DefaultService}} {
		t.Setenv("AWS_LAMBDA_FUNCTION_NAME", tt.env)
		var buf bytes.Buffer
		r, err := New(Config{Writer: &buf})
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().UnixMilli()
		r.FinishError(context.Background(), nil, nil)
		var m struct {
			AWS struct {
				Timestamp         int64
				CloudWatchMetrics []struct{ Namespace string }
			} `json:"_aws"`
			Service, Queue, Kind string
		}
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m.Service != tt.want || m.Queue != DefaultQueue || m.Kind != UnknownKind ||
			m.AWS.CloudWatchMetrics[0].Namespace != DefaultNamespace || m.AWS.Timestamp < before {
			t.Errorf("AWS_LAMBDA_FUNCTION_NAME=%q: got %+v", tt.env, m)
		}
	}
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r\x00\x1f", "héllo ✓", "bad\xffutf8", "ls\u2028ps\u2029",
		strings.Repeat("é", 3)} {
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("appendString(%q) = %s: %v", s, b, err)
			continue
		}
		want, _ := json.Marshal(s) // encoding/json also replaces invalid UTF-8 with U+FFFD
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("appendString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
}

func TestAppendMillis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{-time.Second, "0"},
		{time.Millisecond, "1"},
		{1500 * time.Microsecond, "1.5"},
		{12345 * time.Microsecond, "12.345"},
		{1020 * time.Microsecond, "1.02"},
		{999, "0"}, // below a microsecond
		{time.Hour, "3600000"},
	}
	for _, tt := range tests {
		if got := string(appendMillis(nil, tt.d)); got != tt.want {
			t.Errorf("appendMillis(%v) = %s, want %s", tt.d, got, tt.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate kept %q", got)
	}
	got := truncate(strings.Repeat("é", 10), 9) // 20 bytes; the cut must not split a rune
	if len(got) > 9 || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "é") {
		t.Errorf("truncate = %q", got)
	}
	for _, r := range got {
		if r == '\uFFFD' {
			t.Errorf("truncate split a rune: %q", got)
		}
	}
}
