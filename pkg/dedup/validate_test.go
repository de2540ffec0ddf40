package dedup_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// noCalls fails the test on any AWS call: a refused rule writes and sends nothing.
type noCalls struct{ t *testing.T }

func (n noCalls) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	n.t.Error("SendMessage called")
	return nil, errors.New("no calls")
}

func (n noCalls) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	n.t.Error("SendMessageBatch called")
	return nil, errors.New("no calls")
}

func (n noCalls) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	n.t.Error("GetItem called")
	return nil, errors.New("no calls")
}

func (n noCalls) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	n.t.Error("PutItem called")
	return nil, errors.New("no calls")
}

func (n noCalls) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	n.t.Error("UpdateItem called")
	return nil, errors.New("no calls")
}

func (n noCalls) GetJob(context.Context, string, string, string) (status.Job, error) {
	n.t.Error("GetJob called")
	return status.Job{}, errors.New("no calls")
}

func (n noCalls) RecordEnqueued(context.Context, string, string, string, string, time.Time) error {
	n.t.Error("RecordEnqueued called")
	return errors.New("no calls")
}

func (n noCalls) RecordScheduledJob(context.Context, string, string, string, string, time.Time, time.Time) error {
	n.t.Error("RecordScheduledJob called")
	return errors.New("no calls")
}

func (n noCalls) ScheduleJob(context.Context, jobs.Envelope, time.Time, string) (string, error) {
	n.t.Error("ScheduleJob called")
	return "", errors.New("no calls")
}

func (n noCalls) RescheduleJob(context.Context, jobs.Envelope, time.Time, string) (string, error) {
	n.t.Error("RescheduleJob called")
	return "", errors.New("no calls")
}

func refusingEnqueuer(t *testing.T, fifo, local, scheduler bool) *dedup.Enqueuer {
	t.Helper()
	url := "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	if fifo {
		url += ".fifo"
	}
	p, err := producer.New(producer.Config{SQS: noCalls{t}, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	cfg := dedup.Config{Producer: p, DynamoDB: noCalls{t}, Table: "jobs", Jobs: noCalls{t}, LocalScheduler: local}
	if scheduler {
		cfg.Scheduler = noCalls{t}
	}
	e, err := dedup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRulesRefusedBeforeAnyCall: a bad rule, or a rule with options it cannot keep, is refused
// with ErrInvalid (producer.ErrInvalid) and an error that names it, before any write or send.
func TestRulesRefusedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	group := producer.WithGroupID("g")
	tests := []struct {
		name  string
		fifo  bool
		local bool
		noSch bool
		rule  dedup.Rule
		opts  []producer.Option
		want  string
		also  error
	}{
		{name: "no window", rule: dedup.Unique{Key: "k"}, want: "Unique.Window 0s: a unique key needs a window"},
		{name: "negative window", rule: dedup.Unique{Key: "k", Window: -time.Second}, want: "Unique.Window -1s"},
		{name: "sub-second window", rule: dedup.Unique{Key: "k", Window: time.Millisecond}, want: "below 1 s"},
		{name: "window above the record's TTL", rule: dedup.Unique{Key: "k", Window: 48 * time.Hour}, want: "longer than Config.RecordTTL 24h0m0s"},
		{name: "active window above 14 days", rule: dedup.Unique{Key: "k", Window: 15 * 24 * time.Hour, States: dedup.WhileActive}, want: "longer than 336h0m0s"},
		{name: "unknown state", rule: dedup.Unique{Key: "k", Window: time.Hour, States: []idempotency.State{"done"}}, want: `"done" is not a job state`},
		{name: "state twice", rule: dedup.Unique{Key: "k", Window: time.Hour, States: []idempotency.State{"running", "running"}}, want: "lists \"running\" twice"},
		{name: "key and fields", rule: dedup.Unique{Key: "k", Fields: []string{"user"}, Window: time.Hour}, want: "both set"},
		{name: "empty field", rule: dedup.Unique{Fields: []string{""}, Window: time.Hour}, want: "empty field name"},
		{name: "key too long", rule: dedup.Unique{Key: strings.Repeat("k", 1025), Window: time.Hour}, want: "1025 bytes long"},
		{name: "key not UTF-8", rule: dedup.Unique{Key: "\xff", Window: time.Hour}, want: "not valid UTF-8"},
		{name: "unique with a key of its own on FIFO", fifo: true, rule: dedup.Unique{Key: "k", Window: time.Hour},
			opts: []producer.Option{group, producer.WithKey("order-1")}, want: "FIFO queue: the job has a key of its own"},
		{name: "unique with a dedup id on FIFO", fifo: true, rule: dedup.Unique{Key: "k", Window: time.Hour},
			opts: []producer.Option{group, producer.WithDeduplicationID("d-1")}, want: "FIFO queue: the job has a deduplication id of its own"},
		{name: "debounce without scheduler", noSch: true, rule: dedup.Debounce{Period: 2 * time.Minute}, want: "needs Config.Scheduler", also: dedup.ErrNeedsScheduler},
		{name: "no period", rule: dedup.Debounce{}, want: "Debounce.Period 0s"},
		{name: "period above max wait", rule: dedup.Debounce{Period: 10 * time.Minute, MaxWait: 5 * time.Minute}, want: "longer than Debounce.MaxWait 5m0s"},
		{name: "period within the scheduler's minute", rule: dedup.Debounce{Period: 30 * time.Second}, want: "fires within the minute"},
		{name: "period within the local margin", local: true, rule: dedup.Debounce{Period: time.Second}, want: "not above Config.FireMargin 1s"},
		{name: "debounce with a delay", rule: dedup.Debounce{Period: 2 * time.Minute}, opts: []producer.Option{producer.WithDelay(time.Minute)}, want: "the debounce decides when"},
		{name: "debounce with a key", rule: dedup.Debounce{Period: 2 * time.Minute}, opts: []producer.Option{producer.WithKey("x")}, want: "make the worker skip each after the first"},
		{name: "debounce with attributes", rule: dedup.Debounce{Period: 2 * time.Minute},
			opts: []producer.Option{producer.WithAttributes(map[string]sqstypes.MessageAttributeValue{"a": {DataType: ptr("String"), StringValue: ptr("b")}})},
			want: "target cannot set them"},
		{name: "debounce with a dedup id on FIFO", fifo: true, rule: dedup.Debounce{Period: 2 * time.Minute},
			opts: []producer.Option{group, producer.WithDeduplicationID("d-1")}, want: "deduplication id of its own"},
		{name: "throttle without a limit", rule: dedup.Throttle{Period: time.Minute}, want: "Throttle.Limit 0"},
		{name: "throttle without a period", rule: dedup.Throttle{Limit: 3}, want: "Throttle.Period 0s"},
		{name: "throttle period in microseconds", rule: dedup.Throttle{Limit: 3, Period: time.Second + time.Microsecond}, want: "whole milliseconds"},
		{name: "a job the producer refuses", rule: dedup.Unique{Key: "k", Window: time.Hour}, opts: []producer.Option{producer.WithMaxAttempts(0)}, want: "max attempts 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := refusingEnqueuer(t, tt.fifo, tt.local, !tt.noSch)
			res, err := e.Enqueue(context.Background(), exportArgs{User: "u"}, tt.rule, tt.opts...)
			if !errors.Is(err, dedup.ErrInvalid) || !errors.Is(err, producer.ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
			if tt.also != nil && !errors.Is(err, tt.also) {
				t.Fatalf("error %v, want %v too", err, tt.also)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to say %q", err, tt.want)
			}
			if res.Outcome != "" || res.Err == nil {
				t.Fatalf("result %+v: want no outcome and the error", res)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestNewValidates: New names the Config field at fault.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	p, err := producer.New(producer.Config{SQS: noCalls{t}, QueueURL: "https://sqs.us-east-1.amazonaws.com/1/q"})
	if err != nil {
		t.Fatal(err)
	}
	ok := dedup.Config{Producer: p, DynamoDB: noCalls{t}, Table: "jobs", Jobs: noCalls{t}}
	for _, tt := range []struct {
		name string
		mod  func(*dedup.Config)
		want string
	}{
		{"no producer", func(c *dedup.Config) { c.Producer = nil }, "Config.Producer"},
		{"nil producer pointer", func(c *dedup.Config) { c.Producer = (*producer.Producer)(nil) }, "Config.Producer"},
		{"no client", func(c *dedup.Config) { c.DynamoDB = nil }, "Config.DynamoDB"},
		{"no table", func(c *dedup.Config) { c.Table = "" }, "Config.Table"},
		{"no jobs", func(c *dedup.Config) { c.Jobs = nil }, "Config.Jobs"},
		{"short lease", func(c *dedup.Config) { c.ReserveLease = time.Second }, "Config.ReserveLease"},
		{"negative TTL", func(c *dedup.Config) { c.RecordTTL = -time.Hour }, "Config.RecordTTL"},
	} {
		cfg := ok
		tt.mod(&cfg)
		if _, err := dedup.New(cfg); !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", tt.name, err, tt.want)
		}
	}
	if _, err := dedup.New(ok); err != nil {
		t.Fatal(err)
	}
}

// TestEnqueueRawRefusesBadInput: EnqueueRaw checks the kind and the args as the producer does,
// and a nil rule is refused.
func TestEnqueueRawRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := refusingEnqueuer(t, false, false, true)
	ctx := context.Background()
	rule := dedup.Unique{Window: time.Hour}
	for _, tt := range []struct {
		kind string
		args string
		want string
	}{
		{"Bad Kind", `{}`, "kind"},
		{"report.export", `[1]`, "args is a JSON array"},
		{"report.export", `{`, "args is not valid JSON"},
	} {
		if _, err := e.EnqueueRaw(ctx, tt.kind, json.RawMessage(tt.args), rule); !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("EnqueueRaw(%q, %s): %v, want ErrInvalid saying %q", tt.kind, tt.args, err, tt.want)
		}
	}
	if _, err := e.Enqueue(ctx, exportArgs{}, nil); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("nil rule: %v", err)
	}
}
