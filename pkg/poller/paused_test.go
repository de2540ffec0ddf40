package poller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/poller"
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
