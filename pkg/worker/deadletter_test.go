package worker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// deadLog is a middleware that records the dead letters it is handed, and dead-letters the jobs
// whose args contain refuse itself, without calling next.
type deadLog struct {
	refuse string
	mu     sync.Mutex
	calls  []string // "jobID reason [next]"
}

func (d *deadLog) Work(ctx context.Context, job *jobs.Info, next func(context.Context) error) error {
	if strings.Contains(string(job.RawArgs), d.refuse) {
		return jobs.DeadLetter(jobs.ReasonPayloadMismatch, errors.New("refused by the middleware"))
	}
	return next(ctx)
}

func (d *deadLog) RecordDeadLetter(_ context.Context, job *jobs.Info, reason string, err error, calledNext bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := job.ID + " " + reason
	if calledNext {
		s += " next"
	}
	if err == nil {
		s += " no-error"
	}
	d.calls = append(d.calls, s)
}

// get returns the calls so far, sorted.
func (d *deadLog) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.calls)
	slices.Sort(out)
	return out
}

// plain is a middleware that only calls next.
type plain struct{}

func (plain) Work(ctx context.Context, _ *jobs.Info, next func(context.Context) error) error {
	return next(ctx)
}

// TestDeadLetterRecorder: after the DLQ sends, every middleware that records dead letters gets each
// of the batch's dead-lettered jobs once, with whether it called next for it: an unknown kind
// and a job a middleware refused did not pass it; malformed bodies (no job), dead letters whose
// send failed, and jobs not dead-lettered are left out.
func TestDeadLetterRecorder(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			outer, inner := &deadLog{refuse: "refuse-outer"}, &deadLog{refuse: "refuse-inner"}
			s := newTestHandler(t, func(c *Config) { c.Middleware = []Middleware{outer, plain{}, inner} })
			g := func(id string) func(*jobs.Envelope, *events.SQSMessage) {
				if fifo {
					return group("g-" + id) // one group each: a dead letter does not stop the others
				}
				return func(*jobs.Envelope, *events.SQSMessage) {}
			}
			s.sqs.failBodies = map[string]bool{}
			sendFails := msg("6", testArgs{Do: "cancel", N: 6}, g("6"))
			s.sqs.failBodies[sendFails.Body] = true
			failed := handle(t, s, context.Background(),
				msg("1", testArgs{Do: "ok"}, g("1")),
				msg("2", testArgs{Do: "cancel"}, g("2")),
				msg("3", testArgs{Do: "fail"}, g("3"), receives(3)), // exhausted
				msg("4", testArgs{}, g("4"), func(e *jobs.Envelope, _ *events.SQSMessage) { e.Kind = "nobody.handles" }),
				msg("5", testArgs{Do: "refuse-outer"}, g("5")),
				msg("10", testArgs{Do: "refuse-inner"}, g("10")),
				sendFails,
				msg("7", testArgs{}, g("7"), func(_ *jobs.Envelope, m *events.SQSMessage) { m.Body = "not an envelope" }),
				msg("8", testArgs{Do: "fail"}, g("8")), // retried
			)
			if !equal(failed, []string{"6", "8"}) {
				t.Errorf("failed items %v, want [6 8]", failed)
			}
			// Each recorder called next for every registered job not refused by itself or by a
			// middleware outside it.
			wantOuter := []string{"job-10 payload_mismatch next", "job-2 cancelled next", "job-3 exhausted next", "job-4 unknown_kind", "job-5 payload_mismatch"}
			wantInner := []string{"job-10 payload_mismatch", "job-2 cancelled next", "job-3 exhausted next", "job-4 unknown_kind", "job-5 payload_mismatch"}
			if got := outer.get(); !slices.Equal(got, wantOuter) {
				t.Errorf("outer recorder calls %q, want %q", got, wantOuter)
			}
			if got := inner.get(); !slices.Equal(got, wantInner) {
				t.Errorf("inner recorder calls %q, want %q", got, wantInner)
			}
			// A batch without dead letters calls no recorder.
			handle(t, s, context.Background(), msg("9", testArgs{Do: "ok"}, g("9")))
			if got := outer.get(); len(got) != len(wantOuter) {
				t.Errorf("outer recorder has %d calls after a batch without dead letters, want %d", len(got), len(wantOuter))
			}
		})
	}
}
