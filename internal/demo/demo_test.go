package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// TestDemoEndToEnd runs the whole demo on the embedded emulator and checks every outcome.
func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	rep, err := Run(context.Background(), &out, Options{})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	want := map[string]struct {
		outcome, reason string
		attempts        int
	}{
		"succeeds":                           {worker.OutcomeSucceeded, "", 1},
		"fails twice, then succeeds":         {worker.OutcomeSucceeded, "", 3},
		"poison: fails every attempt":        {worker.OutcomeDeadLettered, jobs.ReasonExhausted, MaxAttempts},
		"cancels itself":                     {worker.OutcomeDeadLettered, jobs.ReasonCancelled, 1},
		"malformed body (plain SendMessage)": {worker.OutcomeDeadLettered, jobs.ReasonMalformed, 1},
		"unknown kind (plain SendMessage)":   {worker.OutcomeDeadLettered, jobs.ReasonUnknownKind, 1},
	}
	if len(rep.Rows) != 8 {
		t.Fatalf("rows = %d, want 8", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		w, ok := want[r.Label]
		if !ok {
			t.Errorf("unexpected row %+v", r)
			continue
		}
		if r.Outcome != w.outcome || r.Reason != w.reason || r.Attempts != w.attempts {
			t.Errorf("%s: got %s/%s after %d attempts, want %s/%s after %d", r.Label, r.Outcome, r.Reason, r.Attempts, w.outcome, w.reason, w.attempts)
		}
	}
	if len(rep.DLQ) != 4 {
		t.Fatalf("DLQ = %d messages, want 4", len(rep.DLQ))
	}
	reasons := map[string]bool{}
	for _, d := range rep.DLQ {
		reasons[d.Failure.Reason] = true
		if d.Failure.SourceQueue != rep.Stack.QueueARN || d.Body == "" || d.Failure.FailedAt == "" {
			t.Errorf("dead letter lacks context: %+v", d)
		}
	}
	for _, r := range []string{jobs.ReasonExhausted, jobs.ReasonCancelled, jobs.ReasonMalformed, jobs.ReasonUnknownKind} {
		if !reasons[r] {
			t.Errorf("no dead letter with reason %s", r)
		}
	}
	for _, s := range []string{"JOB", "KIND", "ATTEMPTS", "OUTCOME", "REASON", "all 8 messages settled"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}
