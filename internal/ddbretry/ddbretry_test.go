package ddbretry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
)

func cancelled(codes ...string) error {
	var reasons []types.CancellationReason
	for _, c := range codes {
		reasons = append(reasons, types.CancellationReason{Code: aws.String(c)})
	}
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"single write, transaction conflict", &types.TransactionConflictException{Message: aws.String("in a transaction")}, true},
		{"wrapped conflict", fmt.Errorf("idempotency: claim x: %w", &types.TransactionConflictException{}), true},
		{"conflict on one action", cancelled("None", "TransactionConflict"), true},
		{"throttled actions", cancelled("ThrottlingError", "None", "ProvisionedThroughputExceeded"), true},
		{"conflict and throttling", cancelled("TransactionConflict", "ThrottlingError"), true},
		{"a refused condition is an answer", cancelled("ConditionalCheckFailed", "None"), false},
		{"a refused condition beside a conflict", cancelled("TransactionConflict", "ConditionalCheckFailed"), false},
		{"validation error", cancelled("None", "ValidationError"), false},
		{"item collection too large", cancelled("ItemCollectionSizeLimitExceeded"), false},
		{"an unknown reason", cancelled("TransactionConflict", "SomethingNew"), false},
		{"only None", cancelled("None", "None"), false},
		{"no reasons", cancelled(), false},
		{"conditional check failed", &types.ConditionalCheckFailedException{}, false},
		{"throttling (the SDK retries it)", &types.ProvisionedThroughputExceededException{}, false},
		{"another error", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ddbretry.Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// policy returns a policy that records its waits instead of sleeping, with the largest jitter.
func policy(attempts int, waits *[]time.Duration) ddbretry.Policy {
	return ddbretry.Policy{
		Attempts: attempts, Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error { *waits = append(*waits, d); return nil },
		Rand:  func(n int64) int64 { return n - 1 },
	}
}

func TestDoRetriesConflictsWithBackoffUntilSuccess(t *testing.T) {
	var waits []time.Duration
	calls := 0
	out, err := ddbretry.Call(context.Background(), policy(6, &waits), func(context.Context) (string, error) {
		calls++
		if calls < 4 {
			return "", cancelled("None", "TransactionConflict")
		}
		return "done", nil
	})
	if err != nil || out != "done" {
		t.Fatalf("Call = %q, %v; want done, nil", out, err)
	}
	if calls != 4 {
		t.Errorf("%d calls, want 4", calls)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v (full jitter at its top, doubling from Base)", waits, want)
	}
}

func TestDoGivesUpAfterItsAttempts(t *testing.T) {
	var waits []time.Duration
	calls := 0
	conflict := &types.TransactionConflictException{Message: aws.String("held by a transaction")}
	err := policy(4, &waits).Do(context.Background(), func(context.Context) error { calls++; return conflict })
	var gave *ddbretry.GaveUpError
	if !errors.As(err, &gave) || gave.Attempts != 4 {
		t.Fatalf("err = %v, want a GaveUpError after 4 attempts", err)
	}
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Errorf("the SDK's exception is not reachable through %v", err)
	}
	if calls != 4 || len(waits) != 3 {
		t.Errorf("%d calls and %d waits, want 4 and 3", calls, len(waits))
	}
	if waits[2] != 40*time.Millisecond {
		t.Errorf("third wait %v, want 40ms", waits[2])
	}
}

func TestDoNeverRetriesAnAnswer(t *testing.T) {
	for _, answer := range []error{
		cancelled("ConditionalCheckFailed", "TransactionConflict"),
		&types.ConditionalCheckFailedException{},
		errors.New("network down"),
	} {
		var waits []time.Duration
		calls := 0
		err := policy(6, &waits).Do(context.Background(), func(context.Context) error { calls++; return answer })
		if err != answer || calls != 1 || len(waits) != 0 {
			t.Errorf("%v: err %v after %d calls and %d waits; want the error itself after 1 call", answer, err, calls, len(waits))
		}
	}
}

func TestDoStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	p := ddbretry.Policy{Sleep: func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }}
	err := p.Do(ctx, func(context.Context) error { calls++; return &types.TransactionConflictException{} })
	if calls != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v after %d calls; want context.Canceled after 1", err, calls)
	}
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Errorf("the last attempt's error is not in %v", err)
	}
}

func TestBackoffStaysWithinItsBounds(t *testing.T) {
	p := ddbretry.Policy{Rand: func(n int64) int64 { return n - 1 }}
	want := []time.Duration{25, 50, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Backoff(i + 1); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := p.Backoff(200); got != time.Second {
		t.Errorf("Backoff(200) = %v, want the cap", got)
	}
	low := ddbretry.Policy{Rand: func(int64) int64 { return 0 }}
	if got := low.Backoff(3); got != 0 {
		t.Errorf("Backoff with no jitter drawn = %v, want 0", got)
	}
}
