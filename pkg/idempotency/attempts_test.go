package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// resent is the SQS record of a job a producer re-sent with attempts_before and max_attempts,
// delivered for the receives-th time.
func resent(msgID, jobID string, before, max, receives int) events.SQSMessage {
	env := jobs.Envelope{V: 1, ID: jobID, Kind: "payment.charge", Args: []byte(`{"order":"o-1","amount":5}`),
		AttemptsBefore: before, MaxAttempts: max}
	b, err := env.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return events.SQSMessage{
		MessageId: msgID, ReceiptHandle: "rh-" + msgID + "-" + strconv.Itoa(receives), Body: string(b), EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q", AWSRegion: "us-east-1",
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives), "SentTimestamp": "1764410400000"},
	}
}

// TestAttemptsBeforeCountsTheSameWithAStore re-sends a job that always fails with attempts_before
// and max_attempts, as a producer in another language may, and checks that the worker gives it the
// same attempts with the idempotency store (memory, DynamoDB) as without one: the first attempt is
// attempts_before + 1, and a job whose attempt would exceed max_attempts is dead-lettered without
// running.
func TestAttemptsBeforeCountsTheSameWithAStore(t *testing.T) {
	t.Parallel()
	client := emulatorDynamoDB(t)
	backends := []struct {
		name  string
		store func() idempotency.Store // nil: no store
	}{
		{"no store", nil},
		{"memory", func() idempotency.Store { return idempotency.NewMemoryStore() }},
		{"dynamodb", func() idempotency.Store { return newDynamoStore(t, client) }},
	}
	for _, tc := range []struct {
		name         string
		before, max  int
		wantAttempts []int // the attempt numbers the job ran with
		wantDeadAt   int   // the attempt of the dead letter
		wantRuns     int   // the record's runs: real runs, counted from attempts_before
	}{
		{"one spent of three", 1, 3, []int{2, 3}, 3, 3},
		{"none spent", 0, 2, []int{1, 2}, 2, 2},
		// Dead-lettered without running: the record counts the attempts spent, not the refusal.
		{"all spent", 3, 3, nil, 4, 3},
		{"more than all spent", 5, 3, nil, 6, 5},
	} {
		for _, b := range backends {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				var (
					mu       sync.Mutex
					attempts []int
					outcomes []worker.Outcome
				)
				reg := jobs.NewRegistry()
				jobs.MustRegister(reg, jobs.WorkFunc[chargeArgs](func(_ context.Context, job *jobs.Job[chargeArgs]) error {
					mu.Lock()
					attempts = append(attempts, job.Attempt)
					mu.Unlock()
					return errors.New("declined")
				}))
				cfg := worker.Config{Registry: reg, SQS: noopSQS{}, QueueURL: "https://sqs.test/q", DLQURL: "https://sqs.test/dlq",
					Logger: slog.New(slog.DiscardHandler),
					OnBatch: func(_ context.Context, o []worker.Outcome) {
						mu.Lock()
						outcomes = append(outcomes, o...)
						mu.Unlock()
					}}
				var store idempotency.Store
				if b.store != nil {
					store = b.store()
					mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						t.Fatal(err)
					}
					cfg.Middleware = []worker.Middleware{mw}
				}
				h, err := worker.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				jobID := "job-" + strconv.Itoa(tc.before) + "-" + strconv.Itoa(tc.max)
				for receive := 1; receive <= 10; receive++ {
					if _, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{resent("m1", jobID, tc.before, tc.max, receive)}}); err != nil {
						t.Fatal(err)
					}
					if last := outcomes[len(outcomes)-1]; last.Outcome == worker.OutcomeDeadLettered {
						break
					}
				}
				last := outcomes[len(outcomes)-1]
				if last.Outcome != worker.OutcomeDeadLettered || last.Reason != jobs.ReasonExhausted || last.Attempt != tc.wantDeadAt {
					t.Errorf("last outcome %+v; want dead-lettered (exhausted) at attempt %d", last, tc.wantDeadAt)
				}
				if !slices.Equal(attempts, tc.wantAttempts) {
					t.Errorf("the job ran with attempts %v, want %v", attempts, tc.wantAttempts)
				}
				if store == nil {
					return
				}
				rec, err := store.Get(ctx, "payment.charge", jobID)
				if err != nil || rec.State != idempotency.StateDead || rec.Reason != jobs.ReasonExhausted || rec.Runs != tc.wantRuns {
					t.Errorf("record = %+v, %v; want dead (exhausted) with runs %d", rec, err, tc.wantRuns)
				}
			})
		}
	}
}
