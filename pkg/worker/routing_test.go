package worker

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// routingFunc is a Routing from a function.
type routingFunc func(kind, queueARN string) bool

func (f routingFunc) Misrouted(kind, queueARN string) bool { return f(kind, queueARN) }

// TestMisroutedJobsRunAndAreCounted: a job of a kind routed to another queue runs all the same
// (a routing change must not strand the jobs already sent), its outcome says Misrouted, and the
// first one of each kind and queue is logged once.
func TestMisroutedJobsRunAndAreCounted(t *testing.T) {
	t.Parallel()
	var got []Outcome
	asked := map[string]int{}
	s := newTestHandler(t, func(c *Config) {
		c.OnBatch = func(_ context.Context, o []Outcome) { got = o }
		c.Routing = routingFunc(func(kind, arn string) bool {
			asked[kind+" "+arn]++
			return kind == "test.job" && strings.HasSuffix(arn, "-bulk")
		})
	})
	bulk := func(_ *jobs.Envelope, m *events.SQSMessage) { m.EventSourceARN = testARN + "-bulk" }
	unknown := func(e *jobs.Envelope, _ *events.SQSMessage) { e.Kind = "not.registered" }
	for range 2 {
		failed := handle(t, s, context.Background(),
			msg("1", testArgs{Do: "ok"}, bulk),
			msg("2", testArgs{Do: "ok"}, bulk, unknown),
		)
		if len(failed) != 0 {
			t.Fatalf("failed = %v", failed)
		}
		if len(got) != 2 || !got[0].Misrouted || got[0].Outcome != OutcomeSucceeded || !got[0].Ran {
			t.Errorf("outcome of the misrouted job = %+v, want it run, succeeded and Misrouted", got[0])
		}
		if got[1].Misrouted {
			t.Errorf("an unknown kind's outcome is Misrouted: %+v", got[1])
		}
	}
	handle(t, s, context.Background(), msg("3", testArgs{Do: "ok"}))
	if got[0].Misrouted {
		t.Errorf("a job on its own queue is Misrouted: %+v", got[0])
	}
	if n := strings.Count(s.logs.String(), "a job arrived on a queue its kind is not routed to"); n != 1 {
		t.Errorf("logged %d times, want once for the kind and queue", n)
	}
	if asked["not.registered "+testARN+"-bulk"] != 0 {
		t.Error("Routing was asked about a kind no worker is registered for")
	}
}
