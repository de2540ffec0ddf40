package poller_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

func TestQueuesConfigErrors(t *testing.T) {
	t.Parallel()
	h := poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	const u = "https://sqs.eu-west-3.amazonaws.com/123456789012/"
	for _, tc := range []struct {
		name     string
		cfg      poller.Config
		mentions []string
	}{
		{"both", poller.Config{QueueURL: u + "a", Queues: []poller.Queue{{URL: u + "b"}}}, []string{"QueueURL and Queues are both set"}},
		{"bad URL", poller.Config{Queues: []poller.Queue{{URL: u + "a"}, {URL: "b"}}}, []string{`Queues[1]: URL "b" is not a queue URL`}},
		{"empty URL", poller.Config{Queues: []poller.Queue{{URL: u + "a"}, {}}}, []string{"Queues[1]: URL is required"}},
		{"same queue twice", poller.Config{Queues: []poller.Queue{{URL: u + "a"}, {URL: u + "a"}}}, []string{"Queues[0] and Queues[1] are the same queue"}},
		{"weight", poller.Config{Queues: []poller.Queue{{URL: u + "a", Weight: 1001}, {URL: u + "b", Weight: -1}}}, []string{"Queues[0]: Weight 1001", "Queues[1]: Weight -1"}},
		{"FIFO batch", poller.Config{Queues: []poller.Queue{{URL: u + "a"}, {URL: u + "b.fifo"}}, BatchSize: 20, BatchWindow: time.Second}, []string{"for a FIFO queue", "not supported on a FIFO queue"}},
		{"priority", poller.Config{Queues: []poller.Queue{{URL: u + "a"}, {URL: u + "b"}}, Priority: 7}, []string{"Priority 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.SQS, tc.cfg.Handler = newFake(), h
			_, err := poller.New(tc.cfg)
			if !errors.Is(err, poller.ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	for in, want := range map[string]poller.Priority{"weighted": poller.Weighted, "": poller.Weighted, "STRICT": poller.Strict} {
		if got, err := poller.ParsePriority(in); err != nil || got != want {
			t.Errorf("ParsePriority(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := poller.ParsePriority("fair"); !errors.Is(err, poller.ErrInvalidConfig) {
		t.Errorf("ParsePriority(fair) = %v", err)
	}
}

// stackQueues provisions a stack with the given queues on the shared emulator and fills each with
// its number of messages (bodies "<queue> <n>").
func stackQueues(t *testing.T, fill map[string]int, specs ...queues.Spec) (*sqs.Client, *queues.Set) {
	t.Helper()
	client := sqs.NewFromConfig(awslocaltest.Backend(t).Config)
	set, _, err := awslocal.ProvisionQueues(t.Context(), client, awslocal.StackOptions{Name: awslocal.UniqueName("prio"), VisibilityTimeout: 60}, specs...)
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range fill {
		q, err := set.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = fmt.Sprintf("%s %d", name, i)
		}
		send(t, client, q.URL, nil, bodies...)
	}
	return client, set
}

// pollerQueues returns the poller's queues for the named queues of set, in that order.
func pollerQueues(t *testing.T, set *queues.Set, names ...string) []poller.Queue {
	t.Helper()
	var out []poller.Queue
	for _, n := range names {
		q, err := set.Get(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, poller.Queue{URL: q.URL, Weight: q.Weight})
	}
	return out
}

// startLog records the queue of every batch a handler starts, in order.
type startLog struct {
	mu      sync.Mutex
	queues  []string
	count   map[string]int
	n       int
	limit   int // after this many starts, reached is closed
	reached chan struct{}
}

func newStartLog(limit int) *startLog {
	return &startLog{count: map[string]int{}, limit: limit, reached: make(chan struct{})}
}

// start records a batch of msgs from the queue whose name is the first word of their bodies;
// it reports whether the start is within the limit.
func (l *startLog) start(msgs []sqstypes.Message) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.limit {
		return false
	}
	q, _, _ := strings.Cut(aws.ToString(msgs[0].Body), " ")
	l.queues = append(l.queues, q)
	l.count[q] += len(msgs)
	l.n += len(msgs)
	if l.n >= l.limit {
		close(l.reached)
	}
	return true
}

// batchFunc is a MessageHandler from a function.
type batchFunc func(ctx context.Context, msgs []sqstypes.Message) ([]string, error)

func (f batchFunc) HandleSQS(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	panic("the poller gives a MessageHandler the messages")
}

func (f batchFunc) HandleMessages(ctx context.Context, _, _ string, msgs []sqstypes.Message) ([]string, error) {
	return f(ctx, msgs)
}

// TestEmulatorWeightedPriorityServesTheWeights fills three queues weighted 5:3:2 with more
// messages than the test takes, so that every queue has messages throughout (saturation), and
// lets a poller of one slot take 2,000 jobs one at a time: each queue's share is within 10 % of
// its weight's share (1,000, 600 and 400 jobs).
func TestEmulatorWeightedPriorityServesTheWeights(t *testing.T) {
	t.Parallel()
	const jobs = 2000
	client, set := stackQueues(t, map[string]int{"critical": 1500, "default": 1500, "bulk": 1500},
		queues.Spec{Name: "critical", Weight: 5}, queues.Spec{Name: "bulk", Weight: 2}, queues.Spec{Name: queues.DefaultName, Weight: 3})
	log := newStartLog(jobs)
	r := rand.New(rand.NewPCG(28, 2000))
	p, err := poller.New(poller.Config{
		SQS: client, Queues: pollerQueues(t, set, "critical", "default", "bulk"), Priority: poller.Weighted, Rand: r.Float64,
		BatchSize: 1, Concurrency: 1, WaitTime: time.Second, Logger: testLogger(t),
		Handler: batchFunc(func(_ context.Context, msgs []sqstypes.Message) ([]string, error) {
			log.start(msgs)
			return nil, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	recvWithin(t, log.reached, "2,000 jobs", 5*time.Minute) // 2,000 receives one at a time
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for name, weight := range map[string]float64{"critical": 5, "default": 3, "bulk": 2} {
		want := jobs * weight / 10
		got := float64(log.count[name])
		t.Logf("%s (weight %.0f): %.0f jobs, want %.0f (%+.1f %%)", name, weight, got, want, 100*(got-want)/want)
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("%s served %.0f of %d jobs, want %.0f ± 10 %%", name, got, jobs, want)
		}
	}
}

// TestEmulatorStrictPriorityEmptiesTheHigherQueueFirst: with both queues full, a strict poller
// of two slots starts every batch of the higher queue before the first of the lower one; so too
// when the queues have a default long-poll wait (ReceiveMessageWaitTimeSeconds 20), where the
// probes cannot be short polls.
func TestEmulatorStrictPriorityEmptiesTheHigherQueueFirst(t *testing.T) {
	t.Parallel()
	for _, wait := range []string{"0", "20"} {
		t.Run("ReceiveMessageWaitTimeSeconds="+wait, func(t *testing.T) {
			t.Parallel()
			strictOrder(t, wait)
		})
	}
}

func strictOrder(t *testing.T, receiveWait string) {
	client, set := stackQueues(t, map[string]int{"high": 60, "low": 60}, queues.Spec{Name: "high"}, queues.Spec{Name: "low"})
	for _, q := range set.All() {
		if _, err := client.SetQueueAttributes(t.Context(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(q.URL),
			Attributes: map[string]string{"ReceiveMessageWaitTimeSeconds": receiveWait}}); err != nil {
			t.Fatal(err)
		}
	}
	log := newStartLog(120)
	p, err := poller.New(poller.Config{
		SQS: client, Queues: pollerQueues(t, set, "high", "low"), Priority: poller.Strict,
		BatchSize: 5, Concurrency: 2, WaitTime: time.Second, Logger: testLogger(t),
		Handler: batchFunc(func(_ context.Context, msgs []sqstypes.Message) ([]string, error) {
			log.start(msgs)
			return nil, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	recv(t, log.reached, "all 120 jobs")
	log.mu.Lock()
	defer log.mu.Unlock()
	firstLow := slices.Index(log.queues, "low")
	lastHigh := -1
	for i, q := range log.queues {
		if q == "high" {
			lastHigh = i
		}
	}
	if firstLow < 0 || lastHigh > firstLow {
		t.Errorf("batches started in the order %v: a low batch started before the last high one", log.queues)
	}
	if log.count["high"] != 60 || log.count["low"] != 60 {
		t.Errorf("handled %v, want 60 of each", log.count)
	}
}

// inFlight returns the number of messages of a queue that are received and not deleted.
func inFlight(t *testing.T, client *sqs.Client, queueURL string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], &n)
	return n
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}

// TestEmulatorFloodOnBulkDoesNotHoldBackCritical: with 200 jobs waiting on bulk and a bulk job
// running in the only handler slot, a critical job that arrives is received at once (its queue
// is long-polled on its own) and, under Strict, takes the slot the moment the running bulk job
// ends: no further bulk job starts before it. Under Weighted (critical 9, bulk 1, a fixed seed)
// it starts within the next few hand-offs, not after the flood.
func TestEmulatorFloodOnBulkDoesNotHoldBackCritical(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		priority  poller.Priority
		maxBefore int // bulk jobs that may start between the critical job's receive and its start
	}{{poller.Strict, 0}, {poller.Weighted, 3}} {
		t.Run(tc.priority.String(), func(t *testing.T) {
			t.Parallel()
			client, set := stackQueues(t, map[string]int{"bulk": 200}, queues.Spec{Name: "critical", Weight: 9}, queues.Spec{Name: "bulk", Weight: 1})
			crit, _ := set.Get("critical")
			gate := make(chan struct{})
			firstBulk := make(chan struct{}, 1)
			critDone := make(chan struct{})
			var mu sync.Mutex
			var order []string
			r := rand.New(rand.NewPCG(9, 1))
			critReady := make(chan struct{}, 1)
			p, err := poller.New(poller.Config{
				OnBatchReady: func(url string, _ int) {
					if url == crit.URL {
						critReady <- struct{}{}
					}
				},
				SQS: client, Queues: pollerQueues(t, set, "critical", "bulk"), Priority: tc.priority, Rand: r.Float64,
				BatchSize: 1, Concurrency: 1, WaitTime: 20 * time.Second, Logger: testLogger(t),
				Handler: batchFunc(func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
					body := aws.ToString(msgs[0].Body)
					mu.Lock()
					order = append(order, body)
					mu.Unlock()
					if strings.HasPrefix(body, "critical") {
						close(critDone)
						return nil, nil
					}
					select {
					case firstBulk <- struct{}{}:
					default:
					}
					<-gate
					return nil, nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			start(t, p)
			recv(t, firstBulk, "the first bulk job")
			send(t, client, crit.URL, nil, "critical 0")
			recv(t, critReady, "the critical job held for a slot")
			mu.Lock()
			running := len(order)
			mu.Unlock()
			close(gate) // the flood runs freely from now on
			recv(t, critDone, "the critical job")
			mu.Lock()
			defer mu.Unlock()
			at := slices.Index(order, "critical 0")
			if before := at - running; before > tc.maxBefore {
				t.Errorf("%d bulk jobs started after the critical job was received and before it, want at most %d (order %v)", before, tc.maxBefore, order[:at+1])
			}
			t.Logf("%s: the critical job started after %d bulk job(s) (the one running, then %d)", tc.priority, at, at-running)
		})
	}
}

// TestEmulatorQueuesShutdownHandlesTheHeldBatches: batches received and waiting for a slot when
// the poller stops are handled and deleted before Run returns, never left invisible.
func TestEmulatorQueuesShutdownHandlesTheHeldBatches(t *testing.T) {
	t.Parallel()
	client, set := stackQueues(t, map[string]int{"a": 3, "b": 3}, queues.Spec{Name: "a"}, queues.Spec{Name: "b"})
	qa, _ := set.Get("a")
	qb, _ := set.Get("b")
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	var handled sync.Map
	p, err := poller.New(poller.Config{
		SQS: client, Queues: pollerQueues(t, set, "a", "b"), BatchSize: 1, Concurrency: 1, WaitTime: time.Second, Logger: testLogger(t),
		Handler: batchFunc(func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
			handled.Store(aws.ToString(msgs[0].Body), true)
			started <- struct{}{}
			<-release
			return nil, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	recv(t, started, "the first job")
	// One job running, one batch held for each queue.
	eventually(t, "both queues' batches to be held", func() bool { return inFlight(t, client, qa.URL)+inFlight(t, client, qb.URL) == 3 })
	cancel()
	close(release)
	if err := recv(t, done, "Run to return"); err != nil {
		t.Fatal(err)
	}
	n := 0
	handled.Range(func(any, any) bool { n++; return true })
	if n != 3 {
		t.Errorf("handled %d jobs, want the running one and the two held", n)
	}
	if a, b := inFlight(t, client, qa.URL), inFlight(t, client, qb.URL); a+b != 0 {
		t.Errorf("%d and %d messages left in flight after Run returned, want none", a, b)
	}
}
