package poller_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// receiveCounter counts ReceiveMessage calls.
type receiveCounter struct {
	poller.SQSAPI
	receives atomic.Int64
}

func (r *receiveCounter) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	r.receives.Add(1)
	return r.SQSAPI.ReceiveMessage(ctx, in, opts...)
}

// TestPausedQueueIsNotReceived: while Config.Paused answers true, no slot calls ReceiveMessage
// (a paused queue's messages stay in it); once it answers false, they are received and handled.
func TestPausedQueueIsNotReceived(t *testing.T) {
	t.Parallel()
	client, st := newQueue(t, awslocal.StackOptions{})
	send(t, client, st.QueueURL, nil, `{"n":1}`)
	var paused atomic.Bool
	paused.Store(true)
	var asked atomic.Int64
	got := make(chan events.SQSEvent, 1)
	rc := &receiveCounter{SQSAPI: client}
	p, err := poller.New(poller.Config{
		SQS: rc, QueueURL: st.QueueURL, WaitTime: time.Second, Concurrency: 3, Logger: testLogger(t),
		PausedPoll: 5 * time.Millisecond,
		Paused: func(context.Context) bool {
			asked.Add(1)
			return paused.Load()
		},
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			got <- ev
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	deadline := time.Now().Add(timeout)
	for asked.Load() < 30 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	if asked.Load() < 30 {
		t.Fatalf("Paused was asked %d times", asked.Load())
	}
	if n := rc.receives.Load(); n != 0 {
		t.Fatalf("%d receives while paused, want none", n)
	}
	paused.Store(false)
	if ev := recv(t, got, "the message after the resume"); len(ev.Records) != 1 {
		t.Errorf("event %+v", ev)
	}
}

func TestPausedPollMustNotBeNegative(t *testing.T) {
	t.Parallel()
	_, err := poller.New(poller.Config{SQS: &receiveCounter{}, QueueURL: "https://sqs.us-east-1.amazonaws.com/1/q",
		Handler: poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		}), PausedPoll: -time.Second})
	if err == nil {
		t.Fatal("a negative PausedPoll was accepted")
	}
}

// receivesByQueue counts ReceiveMessage calls per queue URL.
type receivesByQueue struct {
	poller.SQSAPI
	mu sync.Mutex
	n  map[string]int
}

func (r *receivesByQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	r.mu.Lock()
	r.n[aws.ToString(in.QueueUrl)]++
	r.mu.Unlock()
	return r.SQSAPI.ReceiveMessage(ctx, in, opts...)
}

func (r *receivesByQueue) count(url string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[url]
}

// TestEmulatorPausedQueueOfSeveral: in a poller of several queues, each queue's own gate
// (Queue.Paused, as sqsworker run gives each queue of a stack) stops that queue alone: while bulk
// is paused nothing is received from it and its messages stay visible in it, critical's jobs run;
// once bulk is resumed, its jobs run too.
func TestEmulatorPausedQueueOfSeveral(t *testing.T) {
	t.Parallel()
	client, set := stackQueues(t, map[string]int{"critical": 3, "bulk": 3}, queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	crit, _ := set.Get("critical")
	bulk, _ := set.Get("bulk")
	var bulkPaused atomic.Bool
	bulkPaused.Store(true)
	var asked atomic.Int64
	rc := &receivesByQueue{SQSAPI: client, n: map[string]int{}}
	var mu sync.Mutex
	handled := map[string]int{} // queue name → jobs handled
	p, err := poller.New(poller.Config{
		SQS: rc, BatchSize: 1, Concurrency: 2, WaitTime: time.Second, PausedPoll: 5 * time.Millisecond, Logger: testLogger(t),
		Queues: []poller.Queue{{URL: crit.URL}, {URL: bulk.URL, Paused: func(context.Context) bool {
			asked.Add(1)
			return bulkPaused.Load()
		}}},
		Handler: batchFunc(func(_ context.Context, msgs []sqstypes.Message) ([]string, error) {
			q, _, _ := strings.Cut(aws.ToString(msgs[0].Body), " ")
			mu.Lock()
			handled[q] += len(msgs)
			mu.Unlock()
			return nil, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	jobsOf := func(q string) int { mu.Lock(); defer mu.Unlock(); return handled[q] }
	eventually(t, "critical's jobs, and bulk's gate asked often", func() bool { return jobsOf("critical") == 3 && asked.Load() >= 30 })
	if n := rc.count(bulk.URL); n != 0 || jobsOf("bulk") != 0 {
		t.Fatalf("bulk paused: %d receives, %d jobs handled; want none", n, jobsOf("bulk"))
	}
	if v := visible(t, client, bulk.URL); v != 3 {
		t.Errorf("bulk paused holds %d visible messages, want its 3", v)
	}
	bulkPaused.Store(false)
	eventually(t, "bulk's jobs after the resume", func() bool { return jobsOf("bulk") == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// visible returns a queue's ApproximateNumberOfMessages.
func visible(t *testing.T, client *sqs.Client, queueURL string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}
