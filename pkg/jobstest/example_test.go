package jobstest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/jobstest"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// WelcomeEmail is the job of the examples.
type WelcomeEmail struct {
	To string `json:"to"`
}

func (WelcomeEmail) Kind() string { return "email.welcome" }

// signUp is code under test: it enqueues a welcome e-mail, once per address.
func signUp(ctx context.Context, prod *producer.Producer, email string) error {
	_, err := prod.Enqueue(ctx, WelcomeEmail{To: email}, producer.WithKey("welcome-"+email), producer.WithDelay(10*time.Minute))
	return err
}

// Assert what a piece of code enqueued: the kind, the typed args and the options.
func ExampleRequireEnqueued() {
	t := &testing.T{} // in a test, the test's *testing.T
	prod, q := jobstest.NewProducer(t)
	if err := signUp(context.Background(), prod, "ada@example.com"); err != nil {
		panic(err)
	}
	job := jobstest.RequireEnqueued(t, q, WelcomeEmail{To: "ada@example.com"},
		&jobstest.Want{Key: "welcome-ada@example.com", Delay: 10 * time.Minute})
	fmt.Println(job.Envelope.Kind, job.Args.To, job.Delay)
	// Output: email.welcome ada@example.com 10m0s
}

// Run a job through the real worker path: it fails twice, and the clock steps through its
// backoffs (30 s, then 60 s) without waiting.
func ExampleEnv_Work() {
	t := &testing.T{} // in a test, the test's *testing.T
	calls := 0
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[WelcomeEmail](func(ctx context.Context, job *jobs.Job[WelcomeEmail]) error {
		if calls++; calls < 3 {
			return errors.New("smtp: 421 try again later")
		}
		return nil
	}), jobs.WithPolicy(jobs.PolicyFunc(func(attempt int) time.Duration { return time.Duration(attempt) * 30 * time.Second })))

	env := jobstest.New(t, jobstest.Config{Registry: reg})
	res := env.Work(context.Background(), WelcomeEmail{To: "ada@example.com"})
	for _, o := range res.Outcomes {
		fmt.Println("attempt", o.Attempt, o.Outcome)
	}
	fmt.Println("record:", res.Record.State, "after", res.Record.Runs, "runs; the clock moved", res.Took)
	// Output:
	// attempt 1 retry
	// attempt 2 retry
	// attempt 3 succeeded
	// record: succeeded after 3 runs; the clock moved 1m30s
}
