package poller_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/heartbeat"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

const fakeURL = "https://sqs.eu-west-3.amazonaws.com/123456789012/fake"

// fake is an SQS client whose calls the test scripts. Unscripted receives block until their
// context is done, like a long poll on an empty queue.
type fake struct {
	mu         sync.Mutex
	attrs      map[string]string
	attrsErr   error
	receives   []func() (*sqs.ReceiveMessageOutput, error) // one per call, in order
	received   chan int                                    // the number of each receive call, when it starts
	deletes    []func(in *sqs.DeleteMessageBatchInput) *sqs.DeleteMessageBatchOutput
	deleteLog  [][]string // receipt handles of each DeleteMessageBatch call
	deleteCall chan struct{}
	// extended, when set, is called with the receipt handles of each ChangeMessageVisibilityBatch
	// (the heartbeat's extensions) before it answers; it may block.
	extended func(handles []string)
}

func newFake() *fake {
	return &fake{
		attrs:      map[string]string{"QueueArn": "arn:aws:sqs:eu-west-3:123456789012:fake", "VisibilityTimeout": "30"},
		received:   make(chan int, 100),
		deleteCall: make(chan struct{}, 100),
	}
}

func (f *fake) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attrsErr != nil {
		return nil, f.attrsErr
	}
	return &sqs.GetQueueAttributesOutput{Attributes: f.attrs}, nil
}

func (f *fake) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	var next func() (*sqs.ReceiveMessageOutput, error)
	if len(f.receives) > 0 {
		next, f.receives = f.receives[0], f.receives[1:]
	}
	f.mu.Unlock()
	f.received <- 1
	if next != nil {
		return next()
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *fake) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer func() { f.mu.Unlock(); f.deleteCall <- struct{}{} }()
	var handles []string
	for _, e := range in.Entries {
		handles = append(handles, aws.ToString(e.ReceiptHandle))
	}
	f.deleteLog = append(f.deleteLog, handles)
	if len(f.deletes) > 0 {
		next := f.deletes[0]
		f.deletes = f.deletes[1:]
		return next(in), nil
	}
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fake) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if f.extended != nil {
		var handles []string
		for _, e := range in.Entries {
			handles = append(handles, aws.ToString(e.ReceiptHandle))
		}
		f.extended(handles)
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func message(id string) sqstypes.Message {
	return sqstypes.Message{
		MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("body-" + id),
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
	}
}

func messages(ids ...string) func() (*sqs.ReceiveMessageOutput, error) {
	return func() (*sqs.ReceiveMessageOutput, error) {
		out := &sqs.ReceiveMessageOutput{}
		for _, id := range ids {
			out.Messages = append(out.Messages, message(id))
		}
		return out, nil
	}
}

func failure(err error) func() (*sqs.ReceiveMessageOutput, error) {
	return func() (*sqs.ReceiveMessageOutput, error) { return nil, err }
}

// TestReceiveErrorsBackOff: every failed receive is followed by a backoff pause whose attempt
// number grows with consecutive failures and restarts after a success; the handler gets the
// InvocationTimeout deadline and the region from the queue ARN.
func TestReceiveErrorsBackOff(t *testing.T) {
	t.Parallel()
	f := newFake()
	boom := errors.New("throttled")
	f.receives = append(f.receives, failure(boom), failure(boom), failure(boom), messages("a"), failure(boom))
	var mu sync.Mutex
	var attempts []int
	got := make(chan events.SQSEvent, 1)
	deadlines := make(chan time.Time, 1)
	p, err := poller.New(poller.Config{
		SQS: f, QueueURL: fakeURL, Logger: testLogger(t), InvocationTimeout: time.Hour,
		Backoff: func(attempt int) time.Duration {
			mu.Lock()
			attempts = append(attempts, attempt)
			mu.Unlock()
			return time.Millisecond
		},
		Handler: poller.HandlerFunc(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			d, _ := ctx.Deadline()
			deadlines <- d
			got <- ev
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	stop := start(t, p)
	for range 6 { // five scripted receives, then one that blocks
		recv(t, f.received, "a receive")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ev := recv(t, got, "the event")
	if r := ev.Records[0]; r.AWSRegion != "eu-west-3" || r.EventSourceARN != f.attrs["QueueArn"] || r.EventSource != "aws:sqs" {
		t.Errorf("record region %q, ARN %q, source %q", r.AWSRegion, r.EventSourceARN, r.EventSource)
	}
	if d := recv(t, deadlines, "the deadline"); d.Before(begin.Add(time.Hour)) || d.After(time.Now().Add(time.Hour)) {
		t.Errorf("handler deadline %v, want an hour after the invocation", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 3, 1}; !slices.Equal(attempts, want) {
		t.Errorf("backoff attempts %v, want %v", attempts, want)
	}
	if want := [][]string{{"rh-a"}}; !slices.EqualFunc(f.deleteLog, want, slices.Equal) {
		t.Errorf("deletes %v, want %v", f.deleteLog, want)
	}
}

// TestDeleteRetriesServerSideFailures: an entry SQS failed on its side is retried; one it
// rejected as the sender's fault (an expired receipt handle) is not.
func TestDeleteRetriesServerSideFailures(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.receives = append(f.receives, messages("a", "b", "c"))
	f.deletes = append(f.deletes, func(in *sqs.DeleteMessageBatchInput) *sqs.DeleteMessageBatchOutput {
		out := &sqs.DeleteMessageBatchOutput{}
		for _, e := range in.Entries {
			switch aws.ToString(e.ReceiptHandle) {
			case "rh-a":
				out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			case "rh-b":
				out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			default:
				out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
			}
		}
		return out
	})
	p, err := poller.New(poller.Config{
		SQS: f, QueueURL: fakeURL, Logger: testLogger(t),
		Backoff: func(int) time.Duration { return time.Millisecond },
		Handler: poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	recv(t, f.deleteCall, "the first delete")
	recv(t, f.deleteCall, "the retry")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := [][]string{{"rh-a", "rh-b", "rh-c"}, {"rh-a"}}; !slices.EqualFunc(f.deleteLog, want, slices.Equal) {
		t.Errorf("deletes %v, want %v", f.deleteLog, want)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	handler := poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	t.Run("queue attributes unreadable", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		f.attrsErr = errors.New("AWS.SimpleQueueService.NonExistentQueue")
		p, err := poller.New(poller.Config{SQS: f, QueueURL: fakeURL, Handler: handler, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); err == nil || !errors.Is(err, f.attrsErr) {
			t.Errorf("Run = %v, want the GetQueueAttributes error", err)
		}
	})
	t.Run("queue visibility timeout 0", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		f.attrs["VisibilityTimeout"] = "0"
		p, err := poller.New(poller.Config{SQS: f, QueueURL: fakeURL, Handler: handler, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); err == nil {
			t.Error("Run = nil, want an error for a queue visibility timeout of 0")
		}
	})
	t.Run("already running", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		p, err := poller.New(poller.Config{SQS: f, QueueURL: fakeURL, Handler: handler, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, p)
		recv(t, f.received, "a receive")
		if err := p.Run(t.Context()); !errors.Is(err, poller.ErrAlreadyRunning) {
			t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHeartbeatStop: a handler that sets a message's visibility itself (the worker scheduling a
// retry) first calls heartbeat.Stop. Stop waits for the extension in flight, and the heartbeat
// never extends that message again, so that its retry delay is the last word; the batch's other
// messages are still extended.
func TestHeartbeatStop(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.attrs["VisibilityTimeout"] = "3" // a heartbeat every second
	f.receives = append(f.receives, messages("a", "b"))
	extensions := make(chan []string, 100)
	release := make(chan struct{})
	f.extended = func(handles []string) {
		extensions <- handles
		<-release // the first extension stays in flight until the test releases it
	}
	started := make(chan context.Context, 1)
	finish := make(chan struct{})
	p, err := poller.New(poller.Config{
		SQS: f, QueueURL: fakeURL, Logger: testLogger(t),
		Handler: poller.HandlerFunc(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			started <- ctx
			<-finish
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	ctx := recv(t, started, "the handler to start")
	if first := recv(t, extensions, "the first extension"); !slices.Equal(first, []string{"rh-a", "rh-b"}) {
		t.Fatalf("first extension of %v, want both messages", first)
	}

	stopped := make(chan struct{})
	go func() { heartbeat.Stop(ctx, []string{"rh-a"}); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while an extension of the message was in flight")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	recv(t, stopped, "Stop to return once the extension finished")

	if next := recv(t, extensions, "the next extension"); !slices.Equal(next, []string{"rh-b"}) {
		t.Errorf("extension after Stop of %v, want only rh-b", next)
	}
	close(finish)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for len(extensions) > 0 {
		if h := <-extensions; slices.Contains(h, "rh-a") {
			t.Errorf("rh-a extended after Stop: %v", h)
		}
	}
}
