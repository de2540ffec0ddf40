package poller_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

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
	// changes logs the entries of every ChangeMessageVisibilityBatch call.
	changes [][]sqstypes.ChangeMessageVisibilityBatchRequestEntry
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
	f.mu.Lock()
	f.changes = append(f.changes, in.Entries)
	f.mu.Unlock()
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

// optionsFake records what the per-call options of each SQS call do to the client's options: the
// retry budget, and the request body the HTTP client is finally handed.
type optionsFake struct {
	*fake
	mu    sync.Mutex
	calls map[string]sentWith
}

// sentWith is what one call's options did.
type sentWith struct {
	maxAttempts   int
	bodyIsWriteTo bool // the HTTP client got a body that still offers io.WriterTo
	sdkChecksum   bool // the SDK checks received bodies against their MD5
}

// bodyRecorder is the innermost HTTP client: it records the body it is handed.
type bodyRecorder struct{ got *io.ReadCloser }

func (r bodyRecorder) Do(req *http.Request) (*http.Response, error) {
	*r.got = req.Body
	return nil, errors.New("not sent")
}

func (f *optionsFake) record(op string, opts []func(*sqs.Options)) {
	var body io.ReadCloser
	o := sqs.Options{HTTPClient: bodyRecorder{&body}, RetryMaxAttempts: 3}
	for _, fn := range opts {
		fn(&o)
	}
	// A body like smithy-go's: it offers WriteTo.
	req, _ := http.NewRequest(http.MethodPost, "http://sqs.test/", nil)
	req.Body = io.NopCloser(strings.NewReader(`{"QueueUrl":"q"}`))
	o.HTTPClient.Do(req)
	_, isWriteTo := body.(io.WriterTo)
	f.mu.Lock()
	f.calls[op] = sentWith{maxAttempts: o.RetryMaxAttempts, bodyIsWriteTo: isWriteTo, sdkChecksum: !o.DisableMessageChecksumValidation}
	f.mu.Unlock()
}

func (f *optionsFake) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.record("GetQueueAttributes", opts)
	return f.fake.GetQueueAttributes(ctx, in, opts...)
}

func (f *optionsFake) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.record("ReceiveMessage", opts)
	return f.fake.ReceiveMessage(ctx, in, opts...)
}

func (f *optionsFake) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.record("DeleteMessageBatch", opts)
	return f.fake.DeleteMessageBatch(ctx, in, opts...)
}

// TestCallOptions: every SQS call hands net/http a request body without WriteTo (smithy-go's
// closed body would otherwise make net/http close the connection under the response), and
// ReceiveMessage is never retried by the SDK on its own (a retry hides messages a failed answer
// took off the queue) nor checked by the SDK against the bodies' MD5 (one bad body would drop
// the whole answer; the poller checks them itself); the other calls keep the client's settings.
func TestCallOptions(t *testing.T) {
	t.Parallel()
	f := &optionsFake{fake: newFake(), calls: map[string]sentWith{}}
	f.receives = append(f.receives, messages("a"))
	p, err := poller.New(poller.Config{
		SQS: f, QueueURL: fakeURL, Logger: testLogger(t),
		Handler: poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	recv(t, f.deleteCall, "the delete")
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]sentWith{
		"GetQueueAttributes": {maxAttempts: 3, sdkChecksum: true},
		"ReceiveMessage":     {maxAttempts: 1},
		"DeleteMessageBatch": {maxAttempts: 3, sdkChecksum: true},
	}
	if !maps.Equal(f.calls, want) {
		t.Errorf("calls sent with %+v, want %+v", f.calls, want)
	}
}

// TestUnreadableAnswerIsLoggedAsError: a receive SQS answered (status 200) whose answer could not
// be read is logged as an error that says its messages stay invisible until their visibility
// timeout; the poller backs off and goes on.
func TestUnreadableAnswerIsLoggedAsError(t *testing.T) {
	t.Parallel()
	f := newFake()
	cut := &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusOK}},
		Err:      errors.New("deserialization failed, read tcp: use of closed network connection"),
	}
	f.receives = append(f.receives, failure(cut), failure(errors.New("throttled")), messages("a"))
	var logs syncBuffer
	p, err := poller.New(poller.Config{
		SQS: f, QueueURL: fakeURL, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Backoff: func(int) time.Duration { return time.Millisecond },
		Handler: poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	recv(t, f.deleteCall, "the delete after the failures")
	out := logs.String()
	var errorLines, warnLines int
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, "level=ERROR") && strings.Contains(line, "stay invisible until their visibility timeout"):
			errorLines++
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "receive failed; backing off"):
			warnLines++
		}
	}
	if errorLines != 1 || warnLines != 1 {
		t.Errorf("logged %d errors about an unreadable answer and %d receive warnings, want 1 and 1:\n%s", errorLines, warnLines, out)
	}
}

// syncBuffer is a bytes.Buffer safe for the poller's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBodyNotMatchingItsMD5IsMadeVisibleAgain: of a receive's messages, those whose body matches
// its MD5 (or that carry none) are handed over and deleted; one that does not match is made
// visible again at once (visibility timeout 0), neither handed over nor left invisible.
func TestBodyNotMatchingItsMD5IsMadeVisibleAgain(t *testing.T) {
	t.Parallel()
	f := newFake()
	withMD5 := func(id, md5hex string) sqstypes.Message {
		m := message(id)
		m.MD5OfBody = aws.String(md5hex)
		return m
	}
	good := md5.Sum([]byte("body-good"))
	f.receives = append(f.receives, func() (*sqs.ReceiveMessageOutput, error) {
		return &sqs.ReceiveMessageOutput{Messages: []sqstypes.Message{
			withMD5("good", strings.ToUpper(hex.EncodeToString(good[:]))),
			withMD5("damaged", hex.EncodeToString(good[:])),
			message("unchecked"),
		}}, nil
	})
	got := make(chan []string, 1)
	p, err := poller.New(poller.Config{
		SQS: f, QueueURL: fakeURL, Logger: testLogger(t), DisableHeartbeat: true,
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var ids []string
			for _, r := range ev.Records {
				ids = append(ids, r.MessageId)
			}
			got <- ids
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	if ids := recv(t, got, "the batch"); !slices.Equal(ids, []string{"good", "unchecked"}) {
		t.Errorf("handler got %v, want [good unchecked]", ids)
	}
	recv(t, f.deleteCall, "the delete")
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := [][]string{{"rh-good", "rh-unchecked"}}; !slices.EqualFunc(f.deleteLog, want, slices.Equal) {
		t.Errorf("deletes %v, want %v", f.deleteLog, want)
	}
	if len(f.changes) != 1 || len(f.changes[0]) != 1 ||
		aws.ToString(f.changes[0][0].ReceiptHandle) != "rh-damaged" || f.changes[0][0].VisibilityTimeout != 0 {
		t.Errorf("visibility changes %+v, want one setting rh-damaged's visibility timeout to 0", f.changes)
	}
}

// messageHandler is a poller.MessageHandler whose HandleSQS must not be called.
type messageHandler struct {
	t     *testing.T
	calls chan []string // the message ids of each HandleMessages call
	arn   chan string
	fail  []string // the ids it reports failed
}

func (h *messageHandler) HandleSQS(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	h.t.Error("HandleSQS called on a MessageHandler")
	return events.SQSEventResponse{}, nil
}

func (h *messageHandler) HandleMessages(_ context.Context, queueARN, region string, msgs []sqstypes.Message) ([]string, error) {
	var ids []string
	for _, m := range msgs {
		ids = append(ids, aws.ToString(m.MessageId))
	}
	h.arn <- queueARN + " " + region
	h.calls <- ids
	return h.fail, nil
}

// TestMessageHandler: a MessageHandler gets the messages without a Lambda event, with the queue's
// ARN and region; what it reports failed is kept, and a failure that names no message of the
// batch fails the whole batch, as with HandleSQS.
func TestMessageHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fail    []string
		deleted [][]string
	}{
		{"all succeeded", nil, [][]string{{"rh-a", "rh-b", "rh-c"}}},
		{"one failed", []string{"b"}, [][]string{{"rh-a", "rh-c"}}},
		{"an unknown id fails the batch", []string{"b", "zz"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			f.receives = append(f.receives, messages("a", "b", "c"))
			h := &messageHandler{t: t, calls: make(chan []string, 1), arn: make(chan string, 1), fail: tc.fail}
			p, err := poller.New(poller.Config{SQS: f, QueueURL: fakeURL, Logger: testLogger(t), Handler: h})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, p)
			if ids := recv(t, h.calls, "the handler"); !slices.Equal(ids, []string{"a", "b", "c"}) {
				t.Errorf("handled %v", ids)
			}
			if got, want := recv(t, h.arn, "the queue"), "arn:aws:sqs:eu-west-3:123456789012:fake eu-west-3"; got != want {
				t.Errorf("queue %q, want %q", got, want)
			}
			if tc.deleted != nil {
				recv(t, f.deleteCall, "the delete")
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !slices.EqualFunc(f.deleteLog, tc.deleted, slices.Equal) {
				t.Errorf("deletes %v, want %v", f.deleteLog, tc.deleted)
			}
		})
	}
}
