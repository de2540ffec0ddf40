package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// WelcomeEmail is a job's arguments: its Kind names the job type.
type WelcomeEmail struct {
	To string `json:"to"`
}

func (WelcomeEmail) Kind() string { return "email.welcome" }

func ExampleRegister() {
	r := jobs.NewRegistry()
	err := jobs.Register(r, jobs.WorkFunc[WelcomeEmail](func(ctx context.Context, job *jobs.Job[WelcomeEmail]) error {
		fmt.Printf("job %s, attempt %d of %d: welcome %s\n", job.ID, job.Attempt, job.MaxAttempts, job.Args.To)
		return nil
	}), jobs.WithMaxAttempts(3), jobs.WithTimeout(time.Minute))
	if err != nil {
		panic(err)
	}

	// The worker looks the kind up from the envelope and runs it.
	k, _ := r.Lookup("email.welcome")
	fmt.Println(k.Name(), k.Options().MaxAttempts, k.Options().Timeout)
	err = k.Run(context.Background(), &jobs.Info{
		ID: "01JDQ3ZV5XG8K2M4N6P8R0T2V4", Kind: "email.welcome", Attempt: 1, MaxAttempts: 3,
		RawArgs: json.RawMessage(`{"to":"ada@example.com"}`),
	})
	fmt.Println("error:", err)
	// Output:
	// email.welcome 3 1m0s
	// job 01JDQ3ZV5XG8K2M4N6P8R0T2V4, attempt 1 of 3: welcome ada@example.com
	// error: <nil>
}

func ExampleEnvelope_MarshalJSON() {
	e := jobs.Envelope{
		V:          jobs.EnvelopeVersion,
		ID:         "01JDQ3ZV5XG8K2M4N6P8R0T2V4",
		Kind:       "email.welcome",
		Args:       json.RawMessage(`{"to":"ada@example.com"}`),
		Key:        "user-42-welcome",
		EnqueuedAt: time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC),
		Meta:       map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	body, err := e.MarshalJSON()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(body))

	back, err := jobs.DecodeEnvelope(body)
	fmt.Println(back.EffectiveKey(), err)
	// Output:
	// {"v":1,"id":"01JDQ3ZV5XG8K2M4N6P8R0T2V4","kind":"email.welcome","args":{"to":"ada@example.com"},"key":"user-42-welcome","enqueued_at":"2026-11-29T10:00:00.123Z","meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	// user-42-welcome <nil>
}

func ExampleExponential_Ceiling() {
	var p jobs.Exponential // the default: 5 s base, 15 min cap, full jitter
	for attempt := 1; attempt <= 9; attempt++ {
		fmt.Printf("after attempt %d: wait up to %s\n", attempt, p.Ceiling(attempt))
	}
	// Output:
	// after attempt 1: wait up to 5s
	// after attempt 2: wait up to 10s
	// after attempt 3: wait up to 20s
	// after attempt 4: wait up to 40s
	// after attempt 5: wait up to 1m20s
	// after attempt 6: wait up to 2m40s
	// after attempt 7: wait up to 5m20s
	// after attempt 8: wait up to 10m40s
	// after attempt 9: wait up to 15m0s
}

var errNoSuchUser = errors.New("no such user")

func ExampleCancel() {
	work := func(ctx context.Context, job *jobs.Job[WelcomeEmail]) error {
		if job.Args.To == "" {
			// Retrying cannot help: dead-letter the job now, with the reason "cancelled".
			return jobs.Cancel(errNoSuchUser)
		}
		return nil
	}
	err := work(context.Background(), &jobs.Job[WelcomeEmail]{Info: &jobs.Info{ID: "job-1"}})

	var cancel *jobs.CancelError
	fmt.Println(errors.As(err, &cancel), errors.Is(err, errNoSuchUser))
	fmt.Println(err)
	// Output:
	// true true
	// job cancelled: no such user
}

var errRateLimited = errors.New("rate limited")

func ExampleRetryAfter() {
	work := func(ctx context.Context, job *jobs.Job[WelcomeEmail]) error {
		// The mail provider said "try again in 2 minutes": use that instead of the backoff.
		return jobs.RetryAfter(2*time.Minute, errRateLimited)
	}
	err := work(context.Background(), &jobs.Job[WelcomeEmail]{Info: &jobs.Info{ID: "job-1"}})

	var retry *jobs.RetryAfterError
	if errors.As(err, &retry) {
		fmt.Println("retry in", retry.Delay, "because", retry.Err)
	}
	fmt.Println(err)
	// Output:
	// retry in 2m0s because rate limited
	// retry after 2m0s: rate limited
}
