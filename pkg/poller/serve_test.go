package poller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/testenv/kumoserve"
	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

// TestNoMessageLeftInFlightOnAServer is issue 11's stalled poller: against the emulator as its
// own process (`kumo serve`, a real TCP connection), 1,000 job envelopes, a no-op handler and a
// 60 s visibility timeout. Before the fix a batch now and then stayed in flight for the whole
// visibility timeout: net/http closed the connection under a ReceiveMessage response being read
// (smithy-go's closed request body made its writeLoop fail), the SDK retried the receive, and the
// messages of the lost response were neither handed over nor made visible again.
//
// That interleaving is a race, met by some runs only (about 7 in 10 with Concurrency 1, 1 to 3
// in 10 with 4, before the fix); the "every request" case makes every request meet it (see
// interleaver), so that it fails every time without the fix.
//
// The check does not wait for any timeout: once the queue has nothing visible left, every receive
// started before that has returned and the poller holds no message it has not deleted, any message
// still in flight on the server was received but never handed over. There must be none, and every
// message must have reached the handler.
func TestNoMessageLeftInFlightOnAServer(t *testing.T) {
	t.Parallel()
	srv := kumoserve.Start(t)

	tests := []struct {
		name        string
		concurrency int
		n           int
		interleave  bool
	}{
		{name: "1000 jobs, concurrency 1", concurrency: 1, n: 1000},
		{name: "1000 jobs, concurrency 4", concurrency: 4, n: 1000},
		{name: "every request meets the race", concurrency: 1, n: 50, interleave: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.n
			cfg, err := awslocal.NewConfig(t.Context(), srv.URL, awslocal.DefaultRegion, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			setup := sqs.NewFromConfig(cfg)
			client := setup
			var il *interleaver
			if tt.interleave {
				il = newInterleaver()
				cfg.HTTPClient = il
				client = sqs.NewFromConfig(cfg)
			}
			// The stack is made with the plain client: the interleaver makes every request meet
			// the race, and Provision's calls (not the poller's) go without sdkhttp's workaround.
			st, err := awslocal.Provision(t.Context(), setup, awslocal.StackOptions{
				Name: awslocal.UniqueName("inflight"), VisibilityTimeout: 60,
			})
			if err != nil {
				t.Fatal(err)
			}
			send(t, setup, st.QueueURL, nil, envelopes(t, n)...)

			tally := newTally(client)
			var (
				mu      sync.Mutex
				handled = map[string]int{}
			)
			p, err := poller.New(poller.Config{
				SQS: tally, QueueURL: st.QueueURL, Concurrency: tt.concurrency,
				WaitTime: time.Second, VisibilityTimeout: 60 * time.Second, Logger: testLogger(t),
				Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					mu.Lock()
					defer mu.Unlock()
					for _, r := range ev.Records {
						handled[r.Body]++
					}
					return events.SQSEventResponse{}, nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, p)

			waitFor(t, "the queue to have no visible message", func() bool {
				a := attributes(t, setup, st.QueueURL)
				return a[sqstypes.QueueAttributeNameApproximateNumberOfMessages] == 0 &&
					a[sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed] == 0
			})
			// Nothing is visible: a receive started from now on gets nothing (no handler fails,
			// and nothing returns before the 60 s visibility timeout).
			last := tally.started()
			waitFor(t, "the receives started before to return", func() bool { return tally.inProgressUpTo(last) == 0 })
			waitFor(t, "the poller to delete every message it was handed", func() bool { return tally.held() == 0 })

			a := attributes(t, setup, st.QueueURL)
			if inFlight := a[sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible]; inFlight != 0 {
				t.Errorf("%d messages are in flight on the server although the poller holds none: received but never handed to the handler nor made visible again (they wait out the 60 s visibility timeout)", inFlight)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			missing := 0
			for i := range n {
				if handled[body(i)] == 0 {
					missing++
				}
			}
			if missing != 0 || len(handled) != n {
				t.Errorf("the handler got %d distinct messages of %d (%d missing)", len(handled), n, missing)
			}
			if got := tally.deletedCount(); got < n {
				t.Errorf("deleted %d messages, want %d", got, n)
			}
			if il != nil && il.stuckHolds() > 0 {
				t.Errorf("%d requests did not go as the interleaver plans (a hold timed out)", il.stuckHolds())
			}
		})
	}
}

// envelopes returns n job envelopes whose args identify them. Each is about 300 bytes, as a
// real job is, so that a response of ten messages with their attributes is larger than the
// HTTP transport's 4 KB read buffer and is still being read from the connection after the
// response headers arrived (the situation the bug needed).
func envelopes(t *testing.T, n int) []string {
	t.Helper()
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = body(i)
	}
	return bodies
}

var bodyTime = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// body is the envelope of job i.
func body(i int) string {
	args, _ := json.Marshal(map[string]any{"n": i, "to": "user-" + strconv.Itoa(i) + "@example.com", "note": strings.Repeat("x", 120)})
	env := jobs.Envelope{V: 1, ID: fmt.Sprintf("job-%06d", i), Kind: "noop", Args: args, EnqueuedAt: bodyTime}
	b, err := env.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return string(b)
}

// tally counts, at the poller's SQS client, the receives in progress, the messages the poller
// was handed and those it deleted.
type tally struct {
	poller.SQSAPI

	mu         sync.Mutex
	seq        int
	inProgress map[int]bool // receive calls not returned yet, by sequence number
	returned   int
	deleted    int
}

func newTally(client poller.SQSAPI) *tally {
	return &tally{SQSAPI: client, inProgress: map[int]bool{}}
}

func (c *tally) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.mu.Lock()
	c.seq++
	id := c.seq
	c.inProgress[id] = true
	c.mu.Unlock()
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, opts...)
	c.mu.Lock()
	delete(c.inProgress, id)
	if err == nil {
		c.returned += len(out.Messages)
	}
	c.mu.Unlock()
	return out, err
}

func (c *tally) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out, err := c.SQSAPI.DeleteMessageBatch(ctx, in, opts...)
	if err == nil {
		c.mu.Lock()
		c.deleted += len(out.Successful)
		c.mu.Unlock()
	}
	return out, err
}

// started returns the sequence number of the last receive started.
func (c *tally) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// inProgressUpTo returns how many receives numbered up to last have not returned.
func (c *tally) inProgressUpTo(last int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id := range c.inProgress {
		if id <= last {
			n++
		}
	}
	return n
}

// held returns how many messages the poller was handed and has not deleted.
func (c *tally) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.returned - c.deleted
}

func (c *tally) deletedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleted
}

// attributes reads the queue's message counts.
func attributes(t *testing.T, client *sqs.Client, queueURL string) map[sqstypes.QueueAttributeName]int {
	t.Helper()
	names := []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: names})
	if err != nil {
		t.Fatal(err)
	}
	counts := make(map[sqstypes.QueueAttributeName]int, len(names))
	for _, name := range names {
		v, err := strconv.Atoi(out.Attributes[string(name)])
		if err != nil {
			t.Fatalf("attribute %s = %q: %v", name, out.Attributes[string(name)], err)
		}
		counts[name] = v
	}
	return counts
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}
