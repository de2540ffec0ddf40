package examplejobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/jobstest"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// The demo's kinds behave as the demo says, run through the real worker path without AWS
// (pkg/jobstest): the clock steps through the backoffs.
func TestDemoKinds(t *testing.T) {
	t.Parallel()
	effects := examplejobs.NewSideEffects()
	reg := jobs.NewRegistry()
	if err := examplejobs.Register(reg, jobs.Exponential{}, effects); err != nil {
		t.Fatal(err)
	}
	env := jobstest.New(t, jobstest.Config{Registry: reg})
	ctx := context.Background()

	for _, tt := range []struct {
		args     jobs.Args
		outcome  string
		reason   string
		state    idempotency.State
		attempts int
	}{
		{examplejobs.EmailArgs{To: "ada@example.com"}, worker.OutcomeSucceeded, "", idempotency.StateSucceeded, 1},
		{examplejobs.ReportArgs{Name: "monthly"}, worker.OutcomeSucceeded, "", idempotency.StateSucceeded, 3},
		{examplejobs.ResizeArgs{URL: "s3://photos/broken.jpg"}, worker.OutcomeDeadLettered, jobs.ReasonExhausted, idempotency.StateDead, examplejobs.MaxAttempts},
		{examplejobs.RefundArgs{Order: "order-42", Refunded: true}, worker.OutcomeDeadLettered, jobs.ReasonCancelled, idempotency.StateDead, 1},
	} {
		t.Run(tt.args.Kind(), func(t *testing.T) {
			res := env.Work(ctx, tt.args)
			if res.Final.Outcome != tt.outcome || res.Final.Reason != tt.reason || res.Record.State != tt.state || len(res.Outcomes) != tt.attempts {
				t.Errorf("outcome %s (%s), record %s, %d deliveries; want %s (%s), %s, %d", res.Final.Outcome, res.Final.Reason,
					res.Record.State, len(res.Outcomes), tt.outcome, tt.reason, tt.state, tt.attempts)
			}
			if (tt.reason != "") != (res.DeadLetter != nil) {
				t.Errorf("dead letter %+v", res.DeadLetter)
			}
		})
	}

	// The same key twice: the side effect runs once.
	for range 2 {
		if _, err := env.Producer.Enqueue(ctx, examplejobs.EmailArgs{To: "bob@example.com"}, producer.WithKey("welcome-bob")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.RunUntilIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := effects.Runs("email.send", "welcome-bob"); n != 1 {
		t.Errorf("welcome-bob ran %d times, want once", n)
	}
	if took := env.Clock.Now().Sub(time.Now()); took <= 0 {
		t.Errorf("the clock did not step through the backoffs (%s ahead of real time)", took)
	}
}
