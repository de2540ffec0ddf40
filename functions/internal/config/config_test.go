package config

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadWorker(t *testing.T) {
	t.Parallel()
	defaults := Worker{LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second}
	tests := []struct {
		name    string
		env     map[string]string
		want    Worker
		wantErr []string // one substring per expected error line
	}{
		{name: "empty: defaults", env: nil, want: defaults},
		{
			name: "everything set",
			env: map[string]string{
				EnvQueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs", EnvDLQURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq",
				EnvTable: "jobs-table", EnvLogLevel: "DEBUG", EnvConcurrency: "25", EnvDeadlineMargin: "1500ms", EnvScheduleGroup: "sqsworker", EnvPayloadBucket: " jobs-payloads ",
				EnvPayloadCleanup: "mark",
			},
			want: Worker{
				QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs", DLQURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq",
				Table: "jobs-table", LogLevel: slog.LevelDebug, Concurrency: 25, DeadlineMargin: 1500 * time.Millisecond, ScheduleGroup: "sqsworker", PayloadBucket: "jobs-payloads",
				PayloadCleanup: worker.PayloadMarkDone,
			},
		},
		{name: "warn level", env: map[string]string{EnvLogLevel: "warn"}, want: Worker{LogLevel: slog.LevelWarn, Concurrency: 10, DeadlineMargin: 2 * time.Second}},
		{name: "error level", env: map[string]string{EnvLogLevel: " error "}, want: Worker{LogLevel: slog.LevelError, Concurrency: 10, DeadlineMargin: 2 * time.Second}},
		{name: "bad level", env: map[string]string{EnvLogLevel: "verbose"}, want: defaults, wantErr: []string{"SQSWORKER_LOG_LEVEL=\"verbose\" is not a log level"}},
		{name: "old table layout", env: map[string]string{EnvTableLayout: " Kind-Key "}, want: Worker{TableLayout: idempotency.LayoutKindKey, LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second}},
		{name: "default table layout", env: map[string]string{EnvTableLayout: "by-id"}, want: defaults},
		{name: "expect records", env: map[string]string{EnvExpectRecords: "true"}, want: Worker{ExpectRecords: true, LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second}},
		{name: "bad expect records", env: map[string]string{EnvExpectRecords: "yes please"}, want: defaults, wantErr: []string{"SQSWORKER_EXPECT_RECORDS=\"yes please\" is not a boolean"}},
		{name: "bad table layout", env: map[string]string{EnvTableLayout: "flat"}, want: defaults, wantErr: []string{"SQSWORKER_TABLE_LAYOUT=\"flat\" is not a table layout"}},
		{name: "concurrency not a number", env: map[string]string{EnvConcurrency: "ten"}, want: defaults, wantErr: []string{"SQSWORKER_CONCURRENCY=\"ten\" is not an integer"}},
		{name: "concurrency zero", env: map[string]string{EnvConcurrency: "0"}, want: defaults, wantErr: []string{"SQSWORKER_CONCURRENCY=0 is out of range"}},
		{name: "margin not a duration", env: map[string]string{EnvDeadlineMargin: "2"}, want: defaults, wantErr: []string{"SQSWORKER_DEADLINE_MARGIN=\"2\" is not a Go duration"}},
		{name: "margin negative", env: map[string]string{EnvDeadlineMargin: "-1s"}, want: defaults, wantErr: []string{"SQSWORKER_DEADLINE_MARGIN=-1s is out of range"}},
		{name: "margin too long", env: map[string]string{EnvDeadlineMargin: "11m"}, want: defaults, wantErr: []string{"SQSWORKER_DEADLINE_MARGIN=11m0s is out of range"}},
		{name: "queue URL without a queue", env: map[string]string{EnvQueueURL: "https://sqs.eu-west-1.amazonaws.com/"}, want: defaults, wantErr: []string{"SQSWORKER_QUEUE_URL=\"https://sqs.eu-west-1.amazonaws.com/\" is not a queue URL"}},
		{name: "dlq URL is a name", env: map[string]string{EnvDLQURL: "jobs-dlq"}, want: defaults, wantErr: []string{"SQSWORKER_DLQ_URL=\"jobs-dlq\" is not a queue URL"}},
		{name: "bad table", env: map[string]string{EnvTable: "a b"}, want: defaults, wantErr: []string{"SQSWORKER_TABLE=\"a b\" is not a DynamoDB table name"}},
		{name: "bad payload cleanup", env: map[string]string{EnvPayloadCleanup: "tag"}, want: defaults, wantErr: []string{"SQSWORKER_PAYLOAD_CLEANUP=\"tag\" is not a payload cleanup"}},
		{name: "batches", env: map[string]string{EnvTable: "jobs", EnvBatchesOutbox: " jobs-outbox "}, want: Worker{Table: "jobs", BatchesOutboxTable: "jobs-outbox", LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second}},
		{name: "batches without the job table", env: map[string]string{EnvBatchesOutbox: "jobs-outbox"}, want: defaults, wantErr: []string{"SQSWORKER_BATCHES_OUTBOX_TABLE is set but SQSWORKER_TABLE is not"}},
		{name: "batches outbox is the job table", env: map[string]string{EnvTable: "jobs", EnvBatchesOutbox: "jobs"}, want: Worker{Table: "jobs", LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second}, wantErr: []string{"is the job table"}},
		{name: "bad batches outbox", env: map[string]string{EnvTable: "jobs", EnvBatchesOutbox: "a b"}, want: Worker{Table: "jobs", LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second}, wantErr: []string{"SQSWORKER_BATCHES_OUTBOX_TABLE=\"a b\" is not a DynamoDB table name"}},
		{name: "bad schedule group", env: map[string]string{EnvScheduleGroup: "a/b"}, want: Worker{LogLevel: slog.LevelInfo, Concurrency: 10, DeadlineMargin: 2 * time.Second, ScheduleGroup: "a/b"}, wantErr: []string{"SQSWORKER_SCHEDULE_GROUP=\"a/b\""}},
		{
			name: "several errors: one line each",
			env:  map[string]string{EnvLogLevel: "loud", EnvConcurrency: "-3", EnvDeadlineMargin: "soon"},
			want: defaults,
			wantErr: []string{
				"SQSWORKER_LOG_LEVEL=\"loud\"", "SQSWORKER_CONCURRENCY=-3 is out of range", "SQSWORKER_DEADLINE_MARGIN=\"soon\"",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := LoadWorker(env(tt.env))
			checkErr(t, err, tt.wantErr)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadWorker = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLoadAPI(t *testing.T) {
	t.Parallel()
	const q = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	one := []AllowedKind{{Kind: "email.send", MaxArgsBytes: DefaultMaxArgsBytes}}
	withKinds := func(m map[string]string) map[string]string {
		m[EnvAPIKinds] = "email.send"
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    API
		wantErr []string
	}{
		{name: "queue and kinds", env: withKinds(map[string]string{EnvQueueURL: q}), want: API{QueueURL: q, LogLevel: slog.LevelInfo, Kinds: one}},
		{name: "queue and table", env: withKinds(map[string]string{EnvQueueURL: q, EnvTable: "jobs", EnvLogLevel: "debug"}), want: API{QueueURL: q, Table: "jobs", LogLevel: slog.LevelDebug, Kinds: one}},
		{name: "queue missing", env: withKinds(map[string]string{}), want: API{LogLevel: slog.LevelInfo, Kinds: one}, wantErr: []string{"SQSWORKER_QUEUE_URL is required"}},
		{name: "queue invalid", env: withKinds(map[string]string{EnvQueueURL: "ftp://x/y"}), want: API{LogLevel: slog.LevelInfo, Kinds: one}, wantErr: []string{"SQSWORKER_QUEUE_URL=\"ftp://x/y\" is not a queue URL"}},
		{
			name: "queue missing and bad table", env: withKinds(map[string]string{EnvTable: "x"}), want: API{LogLevel: slog.LevelInfo, Kinds: one},
			wantErr: []string{"SQSWORKER_QUEUE_URL is required", "SQSWORKER_TABLE=\"x\""},
		},
		{
			name: "no allow-list: nothing is enqueued", env: map[string]string{EnvQueueURL: q}, want: API{QueueURL: q, LogLevel: slog.LevelInfo},
			wantErr: []string{"SQSWORKER_API_KINDS is required"},
		},
		{
			name: "allow-list of blanks", env: map[string]string{EnvQueueURL: q, EnvAPIKinds: " , ,"}, want: API{QueueURL: q, LogLevel: slog.LevelInfo},
			wantErr: []string{"lists no kind"},
		},
		{
			name: "per-kind limits, default limit, schemas, details",
			env: map[string]string{
				EnvQueueURL: q, EnvAPIKinds: " email.send , report.build=256KiB,tiny=100,big=1MiB", EnvAPIMaxArgsBytes: "8KiB",
				EnvAPISchemas:     `{"email.send": {"type":"object","required":["to"]}, "report.build": "/opt/schemas/report.json", "tiny": true}`,
				EnvAPIShowDetails: "true",
			},
			want: API{
				QueueURL: q, LogLevel: slog.LevelInfo, ShowDetails: true,
				Kinds: []AllowedKind{{"email.send", 8 << 10}, {"report.build", 256 << 10}, {"tiny", 100}},
				Schemas: map[string]SchemaSource{
					"email.send":   {Inline: json.RawMessage(`{"type":"object","required":["to"]}`)},
					"report.build": {File: "/opt/schemas/report.json"},
					"tiny":         {Inline: json.RawMessage(`true`)},
				},
			},
			wantErr: []string{"entry \"big=1MiB\": size 1MiB is out of range"},
		},
		{
			name: "bad entries: one line each",
			env: map[string]string{
				EnvQueueURL: q, EnvAPIKinds: "Email,ok,ok,sized=lots,zero=0,zz", EnvAPIMaxArgsBytes: "big",
				EnvAPISchemas: `{"ok": 42, "other": {}, "zz": ""}`, EnvAPIShowDetails: "maybe",
			},
			want: API{QueueURL: q, LogLevel: slog.LevelInfo, Kinds: []AllowedKind{{"ok", DefaultMaxArgsBytes}, {"zz", DefaultMaxArgsBytes}}, Schemas: map[string]SchemaSource{}},
			wantErr: []string{
				"SQSWORKER_API_MAX_ARGS_BYTES=\"big\"", "entry \"Email\": kind \"Email\": character 'E'", "kind \"ok\" is listed twice",
				"entry \"sized=lots\": \"lots\" is not a size", "entry \"zero=0\": size 0 is out of range",
				"kind \"ok\": want a schema", "kind \"other\" has a schema but is not on SQSWORKER_API_KINDS", "kind \"zz\": the file name is empty",
				"SQSWORKER_API_SHOW_DETAILS=\"maybe\" is not a boolean",
			},
		},
		{
			name: "schemas not an object", env: withKinds(map[string]string{EnvQueueURL: q, EnvAPISchemas: `["email.send"]`}),
			want: API{QueueURL: q, LogLevel: slog.LevelInfo, Kinds: one}, wantErr: []string{"SQSWORKER_API_SCHEMAS is not a JSON object"},
		},
		{name: "details off", env: withKinds(map[string]string{EnvQueueURL: q, EnvAPIShowDetails: "false"}), want: API{QueueURL: q, LogLevel: slog.LevelInfo, Kinds: one}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := LoadAPI(env(tt.env))
			checkErr(t, err, tt.wantErr)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadAPI = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"65536", 65536, true}, {"64KiB", 65536, true}, {"64 KiB", 65536, true}, {"1000KiB", 1000 << 10, true},
		{"2", 2, true}, {"1", 0, false}, {"-5", 0, false}, {"1MiB", 0, false}, {"1012KiB", 1012 << 10, true},
		{"1013KiB", 0, false}, {"64kb", 0, false}, {"", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// checkErr checks that err has exactly one line per wanted substring, in order.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("error has %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("error line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}

func TestIsName(t *testing.T) {
	long := strings.Repeat("a", 255)
	for _, tc := range []struct {
		s        string
		min, max int
		want     bool
	}{
		{"jobs", 3, 255, true},
		{"my_app.jobs-2", 3, 255, true},
		{"ab", 3, 255, false},
		{long, 3, 255, true},
		{long + "a", 3, 255, false},
		{"a b", 3, 255, false},
		{"a/b", 1, 64, false},
		{"jöbs", 3, 255, false},
		{"", 1, 64, false},
		{"g", 1, 64, true},
	} {
		if got := isName(tc.s, tc.min, tc.max); got != tc.want {
			t.Errorf("isName(%q, %d, %d) = %v, want %v", tc.s, tc.min, tc.max, got, tc.want)
		}
	}
}
