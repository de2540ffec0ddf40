package idempotency_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// A job is claimed, fails, is claimed again and succeeds; a duplicate delivery is then refused.
func ExampleMemoryStore() {
	ctx := context.Background()
	s := idempotency.NewMemoryStore()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	claim := func(token string, at time.Time) idempotency.ClaimResult {
		res, err := s.Claim(ctx, idempotency.ClaimRequest{
			Kind: "email.send", Key: "order-42-welcome", JobID: "job-" + token, PayloadHash: "h1",
			Token: token, Now: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(14 * 24 * time.Hour),
		})
		if err != nil {
			panic(err)
		}
		return res
	}
	finish := func(token string, state idempotency.State, errText string, at time.Time) {
		err := s.Finish(ctx, idempotency.Finish{Kind: "email.send", Key: "order-42-welcome", Token: token,
			State: state, Error: errText, Now: at, ExpiresAt: at.Add(24 * time.Hour)})
		if err != nil {
			panic(err)
		}
	}

	res := claim("a", now)
	fmt.Println("first delivery:", res.Claimed, "attempt", res.Record.Runs)
	finish("a", idempotency.StateRetrying, "smtp: timeout", now.Add(time.Second))

	res = claim("b", now.Add(time.Minute))
	fmt.Println("retry:", res.Claimed, "attempt", res.Record.Runs, "last error:", res.Record.LastError)
	finish("b", idempotency.StateSucceeded, "", now.Add(time.Minute+time.Second))

	res = claim("c", now.Add(time.Hour))
	fmt.Println("duplicate:", res.Claimed, "state", res.Record.State)
	// Output:
	// first delivery: true attempt 1
	// retry: true attempt 2 last error: smtp: timeout
	// duplicate: false state succeeded
}
