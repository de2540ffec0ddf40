// Package ddbretry retries the DynamoDB writes that a transaction conflict refused, which the
// AWS SDK does not retry: a single write (PutItem, UpdateItem, DeleteItem) answered
// TransactionConflictException because a transaction held its item, and a TransactWriteItems
// cancelled (TransactionCanceledException) only because of conflicts or throttling. Such a
// request wrote nothing, so sending the same request again is safe, and after a short wait it
// usually goes through. A transaction cancelled for any other reason, a refused condition
// (ConditionalCheckFailed) above all, is an answer and is never retried.
//
// The job table's writers (pkg/idempotency, pkg/status) and the DynamoDB outbox all retry through
// this one package, so that they classify these errors the same way.
package ddbretry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Cancellation reason codes of a TransactionCanceledException (DynamoDB API reference,
// TransactWriteItems) that a resubmission may get past.
const (
	CodeNone                          = "None"
	CodeTransactionConflict           = "TransactionConflict"
	CodeThrottlingError               = "ThrottlingError"
	CodeProvisionedThroughputExceeded = "ProvisionedThroughputExceeded"
)

// Retryable reports whether err is a refusal that the same request, sent again, may get past: a
// TransactionConflictException, or a TransactionCanceledException whose every cancellation reason
// is "None", TransactionConflict, ThrottlingError or ProvisionedThroughputExceeded, with at least
// one that is not "None". A cancellation with any other reason (ConditionalCheckFailed,
// ValidationError, ItemCollectionSizeLimitExceeded, …), or with no reasons at all, is not.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return true
	}
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		return RetryableReasons(cancelled.CancellationReasons)
	}
	return false
}

// RetryableReasons reports whether a transaction cancelled with these reasons (one per action, in
// order) may go through when sent again: every reason is "None" (or empty), TransactionConflict,
// ThrottlingError or ProvisionedThroughputExceeded, and at least one is one of the last three.
func RetryableReasons(reasons []types.CancellationReason) bool {
	found := false
	for _, r := range reasons {
		switch aws.ToString(r.Code) {
		case "", CodeNone:
		case CodeTransactionConflict, CodeThrottlingError, CodeProvisionedThroughputExceeded:
			found = true
		default:
			return false
		}
	}
	return found
}

// Defaults of [Policy].
const (
	DefaultAttempts = 6
	DefaultBase     = 25 * time.Millisecond
	DefaultCap      = time.Second
)

// Policy says how often and how long to retry. The zero value is the default: 6 attempts in all,
// full-jitter exponential backoff from 25 ms, capped at 1 s (at most 775 ms of waits in all,
// about half that on average).
type Policy struct {
	// Attempts is the most requests sent, the first included. Defaults to DefaultAttempts; 1
	// never retries.
	Attempts int
	// Base is the cap of the first wait; each next wait's cap doubles, up to Cap. Defaults to
	// DefaultBase.
	Base time.Duration
	// Cap bounds every wait. Defaults to DefaultCap.
	Cap time.Duration
	// Sleep waits d or until ctx is done (then it returns ctx's error). Defaults to a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a uniform int64 in [0, n), the jitter. Defaults to math/rand/v2's Int64N.
	Rand func(n int64) int64
}

// GaveUpError is the error of a write still refused (Retryable) after the policy's last attempt.
// It unwraps to the last attempt's error, so errors.As still finds the SDK's exception.
type GaveUpError struct {
	// Attempts is how many requests were sent.
	Attempts int
	// Err is the last attempt's error.
	Err error
}

// Error implements error.
func (e *GaveUpError) Error() string {
	return fmt.Sprintf("%v (still refused by transaction conflicts or throttling after %d attempts)", e.Err, e.Attempts)
}

// Unwrap returns the last attempt's error.
func (e *GaveUpError) Unwrap() error { return e.Err }

// Do calls op until it returns nil or an error that is not Retryable, or the policy's attempts are
// used up (then the error is a *GaveUpError), waiting a full-jitter exponential backoff between
// attempts. When ctx ends during a wait, it returns the last attempt's error joined with ctx's.
func (p Policy) Do(ctx context.Context, op func(ctx context.Context) error) error {
	_, err := Call(ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

// Call is Do for an operation with a result: it returns the result of the attempt that succeeded
// (or of the last one).
func Call[T any](ctx context.Context, p Policy, op func(ctx context.Context) (T, error)) (T, error) {
	p = p.withDefaults()
	for attempt := 1; ; attempt++ {
		out, err := op(ctx)
		if !Retryable(err) {
			return out, err
		}
		if attempt >= p.Attempts {
			return out, &GaveUpError{Attempts: attempt, Err: err}
		}
		if serr := p.Sleep(ctx, p.Backoff(attempt)); serr != nil {
			return out, errors.Join(err, serr)
		}
	}
}

// Backoff returns the wait after the attempt-th refused attempt (1 for the first): uniform in
// [0, min(Cap, Base·2^(attempt-1))].
func (p Policy) Backoff(attempt int) time.Duration {
	p = p.withDefaults()
	ceil := p.Cap
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 32 {
		if d := p.Base << (attempt - 1); d > 0 && d < ceil {
			ceil = d
		}
	}
	return time.Duration(p.Rand(int64(ceil) + 1))
}

func (p Policy) withDefaults() Policy {
	if p.Attempts <= 0 {
		p.Attempts = DefaultAttempts
	}
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.Rand == nil {
		p.Rand = rand.Int64N
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
