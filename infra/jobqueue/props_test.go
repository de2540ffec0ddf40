package jobqueue

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
)

func TestValidate(t *testing.T) {
	ok := Props{Name: "t"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	tests := []struct {
		name string
		p    Props
		want string
	}{
		{"no name", Props{}, "Name is required"},
		{"redrive below 3x attempts", Props{Name: "t", MaxAttempts: 5, MaxReceiveCount: 14}, "MaxReceiveCount=14 must be at least 3 × MaxAttempts = 15"},
		{"visibility below 6x timeout", Props{Name: "t", Timeout: time.Minute, VisibilityTimeout: 5 * time.Minute}, "queue VisibilityTimeout=5m0s must be at least 6 × function Timeout + BatchingWindow = 6m0s"},
		{"visibility below 6x timeout + window", Props{Name: "t", Timeout: 10 * time.Second, BatchingWindow: 5 * time.Second, VisibilityTimeout: 60 * time.Second}, "must be at least 6 × function Timeout + BatchingWindow = 1m5s"},
		{"reserved below max concurrency", Props{Name: "t", MaxConcurrency: 20, ReservedConcurrency: 10}, "ReservedConcurrency=10 is below MaxConcurrency=20"},
		{"max concurrency too low", Props{Name: "t", MaxConcurrency: 1}, "MaxConcurrency=1 must be between 2 and 1000"},
		{"max concurrency too high", Props{Name: "t", MaxConcurrency: 1001}, "MaxConcurrency=1001 must be between 2 and 1000"},
		{"fifo batch too big", Props{Name: "t", FIFO: true, BatchSize: 11}, "BatchSize=11: a FIFO queue's event source takes 1–10"},
		{"fifo window", Props{Name: "t", FIFO: true, BatchingWindow: time.Second}, "a FIFO queue's event source takes no batching window"},
		{"standard big batch without window", Props{Name: "t", BatchSize: 100}, "BatchSize=100 above 10 needs a BatchingWindow of at least 1s"},
		{"standard batch too big", Props{Name: "t", BatchSize: 10001, BatchingWindow: time.Second}, "BatchSize=10001: a standard queue's event source takes 1–10000"},
		{"timeout too long", Props{Name: "t", Timeout: 16 * time.Minute}, "Timeout=16m0s must be whole seconds between 1s and 15m"},
		{"provisioned and max concurrency", Props{Name: "t", MaxConcurrency: 10, MinPollers: 2}, "MaxConcurrency=10 and provisioned mode (MinPollers=2, MaxPollers=0) are mutually exclusive"},
		{"min pollers too low", Props{Name: "t", MinPollers: 1}, "MinPollers=1 must be between 2 and 200"},
		{"max pollers too high", Props{Name: "t", MaxPollers: 2001}, "MaxPollers=2001 must be between 2 and 2000"},
		{"min above max pollers", Props{Name: "t", MinPollers: 50, MaxPollers: 10}, "MinPollers=50 is above MaxPollers=10"},
		{"memory too small", Props{Name: "t", MemoryMB: 64}, "MemoryMB=64 must be between 128 and 10240"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	p := Props{Name: "t", Timeout: 20 * time.Second, BatchingWindow: 3 * time.Second}.withDefaults()
	if p.MaxReceiveCount != 15 || p.VisibilityTimeout != 123*time.Second || p.MaxConcurrency != 10 || p.BatchSize != 10 {
		t.Fatalf("defaults = %+v", p)
	}
}

// TestValidateNameBoundaries checks Name against the strictest name derived from it, at the
// boundary: the schedule group <Name>-jobs (EventBridge Scheduler: 64) while scheduling is
// enabled, otherwise the DLQ <Name>-jobs-dlq (SQS: 80, including ".fifo"); with an outbox the
// relays' schedule group <Name>-outbox (64).
func TestValidateNameBoundaries(t *testing.T) {
	n := func(k int) string { return strings.Repeat("a", k) }
	for _, tc := range []struct {
		name string
		p    Props
		want string // "" when valid
	}{
		{"scheduling 59", Props{Name: n(59)}, ""},
		{"scheduling 60", Props{Name: n(60)}, `Name is 60 characters, at most 59 fit: the schedule group name "` + n(60) + `-jobs" would be 65 characters, above EventBridge Scheduler's limit of 64`},
		{"scheduling fifo 59", Props{Name: n(59), FIFO: true}, ""},
		{"scheduling fifo 60", Props{Name: n(60), FIFO: true}, "the schedule group name"},
		{"standard 71", Props{Name: n(71), DisableScheduling: true}, ""},
		{"standard 72", Props{Name: n(72), DisableScheduling: true}, `Name is 72 characters, at most 71 fit: the DLQ name "` + n(72) + `-jobs-dlq" would be 81 characters, above SQS's limit of 80`},
		{"fifo 66", Props{Name: n(66), FIFO: true, DisableScheduling: true}, ""},
		{"fifo 67", Props{Name: n(67), FIFO: true, DisableScheduling: true}, `Name is 67 characters, at most 66 fit: the DLQ name "` + n(67) + `-jobs-dlq.fifo" would be 81 characters, above SQS's limit of 80`},
		// The DynamoDB outbox: its failures queue <Name>-outbox-relay-failures (SQS: 80) and, with
		// either outbox, the relays' schedule group <Name>-outbox (Scheduler: 64), the stricter.
		{"outbox 57", Props{Name: n(57), Outbox: &OutboxProps{}}, ""},
		{"outbox 58", Props{Name: n(58), Outbox: &OutboxProps{}}, `Name is 58 characters, at most 57 fit: the outbox schedule group name "` + n(58) + `-outbox" would be 65 characters, above EventBridge Scheduler's limit of 64`},
		{"outbox no scheduling 57", Props{Name: n(57), Outbox: &OutboxProps{}, DisableScheduling: true}, ""},
		{"outbox no scheduling 58", Props{Name: n(58), Outbox: &OutboxProps{}, DisableScheduling: true}, "the outbox schedule group name"},
		{"outbox 59 (the reviewer's)", Props{Name: n(59), Outbox: &OutboxProps{}}, "at most 57 fit"},
		{"postgres outbox 57", Props{Name: n(57), PostgresOutbox: &PostgresOutboxProps{DSN: "postgres://db/app"}}, ""},
		{"postgres outbox 58", Props{Name: n(58), PostgresOutbox: &PostgresOutboxProps{DSN: "postgres://db/app"}}, "the outbox schedule group name"},
		{"postgres outbox no scheduling 58", Props{Name: n(58), DisableScheduling: true, PostgresOutbox: &PostgresOutboxProps{DSN: "postgres://db/app"}}, "at most 57 fit"},
		// The API and the payload bucket add no name that binds: alarms (CloudWatch: 255) and a
		// bucket name CloudFormation generates.
		{"api 59", Props{Name: n(59), Api: &ApiProps{Kinds: []ApiKind{{Kind: "k"}}}}, ""},
		{"api 60", Props{Name: n(60), Api: &ApiProps{Kinds: []ApiKind{{Kind: "k"}}}}, "the schedule group name"},
		{"payload 71 without scheduling", Props{Name: n(71), PayloadBucket: true, DisableScheduling: true}, ""},
		{"payload 72 without scheduling", Props{Name: n(72), PayloadBucket: true, DisableScheduling: true}, "the DLQ name"},
		{"underscore", Props{Name: "my_app"}, ""},
		{"hyphen and digits", Props{Name: "My-App-2"}, ""},
		{"dot", Props{Name: "my.app"}, `Name "my.app" has '.': use only letters, digits, '-' and '_'`},
		{"space", Props{Name: "my app"}, `Name "my app" has ' ': use only letters, digits, '-' and '_'`},
		{"slash", Props{Name: "team/app"}, `has '/'`},
		{"non-ASCII", Props{Name: "café"}, `has 'é'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateName(tc.p.withDefaults()) // Validate's name check alone (the parts' assets are not here)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validateName() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validateName() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateRecursiveLoop(t *testing.T) {
	if err := (Props{Name: "t", RecursiveLoop: "Sometimes"}).Validate(); err == nil || !strings.Contains(err.Error(), `RecursiveLoop="Sometimes" must be`) {
		t.Fatalf("Validate() = %v", err)
	}
	if p := (Props{Name: "t"}).withDefaults(); p.RecursiveLoop != awslambda.RecursiveLoop_TERMINATE {
		t.Fatalf("default RecursiveLoop %q", p.RecursiveLoop)
	}
}

// TestMaxNameLength: the longest Name each combination of parts allows, as the boundaries above.
func TestMaxNameLength(t *testing.T) {
	for _, tc := range []struct {
		what string
		p    Props
		want int
	}{
		{"defaults", Props{}, 59},
		{"no scheduling", Props{DisableScheduling: true}, 71},
		{"no scheduling, FIFO", Props{DisableScheduling: true, FIFO: true}, 66},
		{"outbox", Props{Outbox: &OutboxProps{}}, 57},
		{"outbox, FIFO, no scheduling", Props{Outbox: &OutboxProps{}, DisableScheduling: true, FIFO: true}, 57},
		{"postgres outbox, no scheduling", Props{PostgresOutbox: &PostgresOutboxProps{}, DisableScheduling: true}, 57},
		{"api and payload bucket", Props{Api: &ApiProps{}, PayloadBucket: true}, 59},
		{"Name ignored", Props{Name: "ignored", DisableScheduling: true}, 71},
	} {
		if got := MaxNameLength(tc.p); got != tc.want {
			t.Errorf("MaxNameLength(%s) = %d, want %d", tc.what, got, tc.want)
		}
	}
}
