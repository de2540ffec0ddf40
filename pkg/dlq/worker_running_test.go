package dlq_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

// runCounter counts the runs of each job.
type runCounter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *runCounter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[id]++
}

func (c *runCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// TestRedriveAllEndsWhileAWorkerRuns redrives the whole DLQ while a worker (poller + worker)
// consumes the job queue and dead-letters every job again at once (its kind always cancels). The
// redrive must move the n dead letters that were there when it started, each once, and end: the
// copies the worker dead-letters again are new messages, left for the next redrive. Each job
// runs exactly once more, and its new dead letter is visible in the DLQ afterwards.
func TestRedriveAllEndsWhileAWorkerRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		withTable bool
		skew      time.Duration // of this host's clock (Config.Now) against the emulator's
	}{
		{"no table", false, 0},
		{"job table", true, 0},
		// SQS stamps SentTimestamp with its own clock: the redrive's start must be in that clock.
		{"host clock an hour behind", false, -time.Hour},
		{"host clock an hour ahead", true, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 23
			e := newEmu(t, false, tc.withTable)
			var runs runCounter
			h := e.handler(func(_ context.Context, job *jobs.Job[testArgs]) error {
				runs.add(job.ID)
				return jobs.Cancel(errors.New("always cancels"))
			})
			p, err := poller.New(poller.Config{SQS: e.client, QueueURL: e.stack.QueueURL, Handler: h,
				WaitTime: time.Second, Concurrency: 2, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			pctx, stopPoller := context.WithCancel(context.Background())
			polled := make(chan error, 1)
			go func() { polled <- p.Run(pctx) }()
			defer func() {
				stopPoller()
				if err := <-polled; err != nil {
					t.Errorf("poller: %v", err)
				}
			}()

			// n jobs run once each and land in the DLQ.
			for i := range n {
				env := envelope(i)
				env.AttemptsBefore = 0
				e.send(e.stack.QueueURL, body(env), nil)
			}
			waitUntil(t, 60*time.Second, "every job ran once", func() bool { return everyRan(runs.snapshot(), n, 1) })
			waitUntil(t, 60*time.Second, "every job dead-lettered", func() bool { return e.count(e.stack.DLQURL) == n })

			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			d := e.dlq(func(c *dlq.Config) { c.Now = func() time.Time { return time.Now().Add(tc.skew) } })
			res, err := d.RedriveAll(ctx, dlq.RedriveOptions{})
			if err != nil {
				t.Fatalf("RedriveAll = %+v, %v; want it to end by itself with %d moved", res, err, n)
			}
			if res.Moved != n || res.Total != n || res.LeftBehind > n {
				t.Fatalf("RedriveAll = %+v; want %d moved of %d, at most %d left behind", res, n, n, n)
			}
			// Every job runs once more and is dead-lettered again; nothing moves it a third time.
			waitUntil(t, 60*time.Second, "every job ran twice", func() bool { return everyRan(runs.snapshot(), n, 2) })
			waitUntil(t, 60*time.Second, "every job dead-lettered again", func() bool { return e.count(e.stack.DLQURL) == n })
			for id, c := range runs.snapshot() {
				if c != 2 {
					t.Errorf("job %s ran %d times, want 2", id, c)
				}
			}
			if len(runs.snapshot()) != n {
				t.Errorf("%d jobs ran, want %d", len(runs.snapshot()), n)
			}
		})
	}
}

// everyRan reports whether n jobs ran at least times times each.
func everyRan(runs map[string]int, n, times int) bool {
	if len(runs) < n {
		return false
	}
	for _, c := range runs {
		if c < times {
			return false
		}
	}
	return true
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// count returns the messages in a queue, visible or not (the emulator counts a message made
// visible again as not visible until the next receive).
func (e *emu) count(queueURL string) int {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}
