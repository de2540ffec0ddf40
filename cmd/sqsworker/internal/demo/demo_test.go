package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	_ "github.com/sqsworker/sqsworker/pkg/awslocal/localstack" // SQSWORKER_BACKEND=localstack
	"github.com/sqsworker/sqsworker/pkg/idempotency"
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
	// The queue URLs printed are reachable: at the backend's URL, not at the host the emulator
	// writes into the URLs it returns (http://localhost:4566, whatever its port).
	head := regexp.MustCompile(`(?m)^backend +(\S+) .*\nqueue +(\S+)\ndlq +(\S+)$`).FindStringSubmatch(out.String())
	if head == nil {
		t.Fatalf("no backend, queue and dlq lines in:\n%s", out.String())
	}
	for _, u := range head[2:] {
		if !strings.HasPrefix(u, head[1]+"/") {
			t.Errorf("printed queue URL %s is not at the backend %s", u, head[1])
		}
	}
	want := map[string]struct {
		outcome, reason string
		attempts        int
	}{
		"succeeds":                        {worker.OutcomeSucceeded, "", 1},
		"delayed 20 s (SQS DelaySeconds)": {worker.OutcomeSucceeded, "", 1},
		"delayed 16 min (one-time EventBridge schedule)":              {worker.OutcomeSucceeded, "", 1},
		"fired by the recurring schedule demo-rollup, rate(1 minute)": {worker.OutcomeSucceeded, "", 1},
		"redelivered after a worker crashed holding it":               {worker.OutcomeSucceeded, "", 2},
		"fails twice, then succeeds":                                  {worker.OutcomeSucceeded, "", 3},
		"poison: fails every attempt":                                 {worker.OutcomeDeadLettered, jobs.ReasonExhausted, examplejobs.MaxAttempts},
		"cancels itself":                                              {worker.OutcomeDeadLettered, jobs.ReasonCancelled, 1},
		"malformed body (plain SendMessage)":                          {worker.OutcomeDeadLettered, jobs.ReasonMalformed, 1},
		"unknown kind (plain SendMessage)":                            {worker.OutcomeDeadLettered, jobs.ReasonUnknownKind, 1},
		committedLabel:                                                {worker.OutcomeSucceeded, "", 1},
		queuesLabel:                                                   {worker.OutcomeSucceeded, "", 1},
		uniqueLabel:                                                   {worker.OutcomeSucceeded, "", 1},
		debounceLabel:                                                 {worker.OutcomeSucceeded, "", 1},
		batchChildLabel:                                               {worker.OutcomeSucceeded, "", 1},
		batchCancelLabel:                                              {worker.OutcomeDeadLettered, jobs.ReasonCancelled, 1},
		batchCallbackLabel:                                            {worker.OutcomeSucceeded, "", 1},
		webhookLabel:                                                  {worker.OutcomeSucceeded, "", 1},
		longJobLabel:                                                  {worker.OutcomeSucceeded, "", 1},
	}
	// The PostgreSQL outbox row needs the server's binaries; CI has them, so there it must be.
	// 16, the several-queues row (queues.go), the two dedup rows (dedup.go), the batch's 3
	// children and its callback (batch.go), the long job (longjob.go) and the limited webhooks
	// (flow.go).
	wantRows := 24 + webhooks
	if rep.OutboxSkipped != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the demo skipped the outbox: %s", rep.OutboxSkipped)
		}
		t.Logf("no outbox row: %s", rep.OutboxSkipped)
		wantRows = 23 + webhooks
	} else {
		want[outboxLabel] = struct {
			outcome, reason string
			attempts        int
		}{worker.OutcomeSucceeded, "", 1}
	}
	if len(rep.Rows) != wantRows {
		t.Fatalf("rows = %d, want %d", len(rep.Rows), wantRows)
	}
	var twins []string
	for _, r := range rep.Rows {
		if r.Label == twinLabel {
			twins = append(twins, r.Outcome)
			if r.Runs != 1 || r.Status == nil || r.Status.State != idempotency.StateSucceeded || r.Status.Runs != 1 {
				t.Errorf("%s: ran %d times, status %+v; want one run and a succeeded record", r.Label, r.Runs, r.Status)
			}
			continue
		}
		if r.Label == refusedLabel {
			// The order whose transaction failed: its job was never anywhere.
			if r.Outcome != neverEnqueued || r.Runs != 0 || r.Status != nil || r.JobID != rep.Outbox.Refused {
				t.Errorf("%s: %+v", r.Label, r)
			}
			continue
		}
		w, ok := want[r.Label]
		if !ok {
			t.Errorf("unexpected row %+v", r)
			continue
		}
		if r.Outcome != w.outcome || r.Reason != w.reason || (r.Attempts != w.attempts && r.Outcome != worker.OutcomeSkipped) {
			t.Errorf("%s: got %s/%s after %d attempts, want %s/%s after %d", r.Label, r.Outcome, r.Reason, r.Attempts, w.outcome, w.reason, w.attempts)
		}
		// Every job's side effect ran exactly as often as it was attempted — duplicates and the
		// crashed worker's redelivery included — and its record in the table says how it ended.
		switch {
		case r.Kind == "invoice.print": // unknown kind: never runs; recorded dead once in the DLQ
			if r.Status == nil || r.Status.State != idempotency.StateDead || r.Status.Reason != jobs.ReasonUnknownKind ||
				r.Status.Runs != 0 || r.Runs != 0 {
				t.Errorf("%s: status %+v, runs %d; want a dead record (unknown_kind), never run", r.Label, r.Status, r.Runs)
			}
		case r.Kind == "":
		case r.Status == nil:
			t.Errorf("%s: no record in the table", r.Label)
		default:
			wantRuns := w.attempts
			if r.Kind == "invoice.render" {
				wantRuns = 1 // the crashed worker's run did not happen
			}
			if r.Runs != wantRuns {
				t.Errorf("%s: ran %d times, want %d", r.Label, r.Runs, wantRuns)
			}
			wantState := idempotency.StateSucceeded
			if w.outcome == worker.OutcomeDeadLettered {
				wantState = idempotency.StateDead
			}
			if r.Status.State != wantState {
				t.Errorf("%s: state %s, want %s", r.Label, r.Status.State, wantState)
			}
			if r.Kind == longJobKind && r.Status.Continuations < 1 {
				t.Errorf("%s: %d continuations, want the job continued from its cursor", r.Label, r.Status.Continuations)
			}
		}
	}
	if len(twins) != 2 || !((twins[0] == worker.OutcomeSucceeded && twins[1] == worker.OutcomeSkipped) ||
		(twins[0] == worker.OutcomeSkipped && twins[1] == worker.OutcomeSucceeded)) {
		t.Errorf("the twins ended %v, want one succeeded and one skipped", twins)
	}
	// The limited kind: the jobs saw one webhook of the tenant at a time, and each ran once with
	// attempt 1 (checked with the rows above: its waits spent no attempt).
	if rep.FlowPeak != 1 {
		t.Errorf("%d webhooks of one tenant ran at once, limit 1", rep.FlowPeak)
	}
	if len(rep.DLQ) != 5 {
		t.Fatalf("DLQ = %d messages, want 5 (4, and the batch's child that cancels itself)", len(rep.DLQ))
	}
	// The batch counted its children once each, and its callback (a row above: it ran once)
	// was enqueued once they had all finished.
	if b := rep.Batch.Info; b.State != "done" || b.Total != 3 || b.Succeeded != 2 || b.Dead != 1 || b.Remaining != 0 {
		t.Errorf("the demo's batch: %+v, want done with 2 succeeded and 1 dead of 3", b)
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
	if o := rep.Outbox; o == nil || len(o.RefusedFound) != 0 || o.Committed == "" || !strings.Contains(o.RefusedErr, "ConditionalCheckFailed") {
		t.Errorf("outbox report %+v: want the refused order's job found nowhere", o)
	}
	for _, s := range []string{"JOB", "KIND", "ATTEMPTS", "OUTCOME", "REASON", fmt.Sprintf("all %d jobs settled", wantRows-1), "transaction cancelled, the widget is sold out",
		"is found nowhere: not in the outbox, no status record, never delivered", "its status in the table: scheduled", "moving the local dispatcher's clock",
		"webhooks of tenant acme ran at most 1 at a time (limit 1)"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}
