package poller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestEventShape checks that a message reaches the handler with every field Lambda's SQS event
// source mapping fills, compared with a golden event once the per-delivery values (ids, receipt
// handle, timestamps, ARN) have been checked and replaced by placeholders.
func TestEventShape(t *testing.T) {
	t.Parallel()
	client, st := newQueue(t, awslocal.StackOptions{})
	attrs := map[string]sqstypes.MessageAttributeValue{
		"greeting": {DataType: aws.String("String"), StringValue: aws.String("hello")},
		"count":    {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"blob":     {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 0xff}},
		"kind":     {DataType: aws.String("String.custom"), StringValue: aws.String("email.send")},
	}
	before := time.Now().Add(-time.Second)
	send(t, client, st.QueueURL, attrs, `{"hello":"world"}`)

	got := make(chan events.SQSEvent, 1)
	rec := newRecorder(client)
	p, err := poller.New(poller.Config{
		SQS: rec, QueueURL: st.QueueURL, WaitTime: time.Second, Logger: testLogger(t),
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			got <- ev
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	ev := recv(t, got, "the event")
	after := time.Now().Add(time.Second)
	if h := rec.waitDeleted(t, 1)[0]; h != ev.Records[0].ReceiptHandle {
		t.Errorf("deleted receipt handle %q, want the event's %q", h, ev.Records[0].ReceiptHandle)
	}

	if len(ev.Records) != 1 {
		t.Fatalf("event has %d records, want 1", len(ev.Records))
	}
	r := &ev.Records[0]
	for name, v := range map[string]*string{"messageId": &r.MessageId, "receiptHandle": &r.ReceiptHandle} {
		if *v == "" {
			t.Errorf("%s is empty", name)
		}
		*v = "<" + name + ">"
	}
	if r.EventSourceARN != st.QueueARN {
		t.Errorf("eventSourceARN = %q, want %q", r.EventSourceARN, st.QueueARN)
	}
	r.EventSourceARN = "<queue-arn>"
	if want := strings.Split(st.QueueARN, ":")[3]; r.AWSRegion != want {
		t.Errorf("awsRegion = %q, want %q (from the queue ARN)", r.AWSRegion, want)
	}
	r.AWSRegion = "<region>"
	for _, name := range []string{"SentTimestamp", "ApproximateFirstReceiveTimestamp"} {
		ms, err := strconv.ParseInt(r.Attributes[name], 10, 64)
		if err != nil || ms < before.UnixMilli() || ms > after.UnixMilli() {
			t.Errorf("attribute %s = %q, want epoch milliseconds between %d and %d", name, r.Attributes[name], before.UnixMilli(), after.UnixMilli())
		}
		r.Attributes[name] = "<epoch-millis>"
	}
	// SQS also sends SenderId, which the embedded emulator does not: check it when present and
	// leave it out of the comparison.
	if v, ok := r.Attributes["SenderId"]; ok && v == "" {
		t.Error("attribute SenderId is empty")
	}
	delete(r.Attributes, "SenderId")

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	gotJSON := buf.Bytes()
	golden := filepath.Join("testdata", "event.golden.json")
	if *update {
		if err := os.WriteFile(golden, gotJSON, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(gotJSON) != string(want) {
		t.Errorf("event differs from %s (run with -update to accept):\ngot:\n%s\nwant:\n%s", golden, gotJSON, want)
	}
}

// delivery is one message as a handler saw it.
type delivery struct {
	body, handle string
	receiveCount int
}

func deliveries(ev events.SQSEvent) []delivery {
	var ds []delivery
	for _, r := range ev.Records {
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		ds = append(ds, delivery{body: r.Body, handle: r.ReceiptHandle, receiveCount: n})
	}
	return ds
}

// collect returns what a channel of delivery lists holds once its senders have finished.
func collect(ch chan []delivery) []delivery {
	close(ch)
	var all []delivery
	for ds := range ch {
		all = append(all, ds...)
	}
	return all
}

func TestPartialBatchFailure(t *testing.T) {
	t.Parallel()
	client, st := newQueue(t, awslocal.StackOptions{VisibilityTimeout: 1})
	send(t, client, st.QueueURL, nil, "m0", "m1", "m2", "m3", "m4")
	failing := map[string]bool{"m1": true, "m3": true}

	seen := make(chan []delivery, 100)
	rec := newRecorder(client)
	p, err := poller.New(poller.Config{
		SQS: rec, QueueURL: st.QueueURL, WaitTime: time.Second, Logger: testLogger(t),
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			seen <- deliveries(ev)
			var resp events.SQSEventResponse
			for _, r := range ev.Records {
				// Fail m1 and m3 on their first delivery only.
				if failing[r.Body] && r.Attributes["ApproximateReceiveCount"] == "1" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				}
			}
			return resp, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	deleted := rec.waitDeleted(t, 5)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	all := collect(seen)

	byHandle := map[string]delivery{}
	count := map[string]int{}
	for _, d := range all {
		byHandle[d.handle] = d
		count[d.body]++
	}
	for _, body := range []string{"m0", "m1", "m2", "m3", "m4"} {
		want := 1
		if failing[body] {
			want = 2 // reported failed, then back after its visibility timeout
		}
		if count[body] != want {
			t.Errorf("%s delivered %d times, want %d", body, count[body], want)
		}
	}
	for _, h := range deleted {
		d, ok := byHandle[h]
		switch {
		case !ok:
			t.Errorf("deleted an unknown receipt handle %q", h)
		case failing[d.body] && d.receiveCount == 1:
			t.Errorf("%s was deleted on the delivery that reported it failed", d.body)
		}
	}
	if !queueEmpty(t, client, st.QueueURL) {
		t.Error("queue is not empty")
	}
}

func TestWholeBatchFailureDeletesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		misbehave func(events.SQSEvent) (events.SQSEventResponse, error)
	}{
		{"handler error", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("database down")
		}},
		{"handler panic", func(events.SQSEvent) (events.SQSEventResponse, error) {
			panic("nil map write")
		}},
		{"unknown itemIdentifier", func(ev events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{
				{ItemIdentifier: ev.Records[0].MessageId}, {ItemIdentifier: "not-a-message-of-this-batch"},
			}}, nil
		}},
		{"empty itemIdentifier", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ""}}}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, st := newQueue(t, awslocal.StackOptions{VisibilityTimeout: 1})
			send(t, client, st.QueueURL, nil, "a", "b", "c")

			var mu sync.Mutex
			first := true
			firstHandles := map[string]bool{}
			seen := make(chan []delivery, 100)
			rec := newRecorder(client)
			p, err := poller.New(poller.Config{
				SQS: rec, QueueURL: st.QueueURL, WaitTime: time.Second, Logger: testLogger(t),
				Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					seen <- deliveries(ev)
					mu.Lock()
					misbehave := first
					first = false
					if misbehave {
						for _, r := range ev.Records {
							firstHandles[r.ReceiptHandle] = true
						}
					}
					mu.Unlock()
					if misbehave {
						return tc.misbehave(ev)
					}
					return events.SQSEventResponse{}, nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, p)
			deleted := rec.waitDeleted(t, 3)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			all := collect(seen)
			for _, h := range deleted {
				if firstHandles[h] {
					t.Errorf("a message of the failed batch was deleted (handle %q)", h)
				}
			}
			redelivered := 0
			for _, d := range all {
				if d.receiveCount >= 2 {
					redelivered++
				}
			}
			if want := len(firstHandles); redelivered != want {
				t.Errorf("%d messages redelivered, want all %d of the failed batch", redelivered, want)
			}
		})
	}
}

func TestBatchWindowGathersBeyondOneReceive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		sent      int
		wantFirst int
	}{
		{"full batch of 25 from three receives", 25, 25},
		{"window expires with 3", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, st := newQueue(t, awslocal.StackOptions{})
			var bodies []string
			for i := range tc.sent {
				bodies = append(bodies, "job-"+strconv.Itoa(i))
			}
			send(t, client, st.QueueURL, nil, bodies...)

			sizes := make(chan int, 100)
			rec := newRecorder(client)
			p, err := poller.New(poller.Config{
				SQS: rec, QueueURL: st.QueueURL, Logger: testLogger(t),
				BatchSize: 25, BatchWindow: time.Second, WaitTime: time.Second,
				Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					sizes <- len(ev.Records)
					return events.SQSEventResponse{}, nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			stop := start(t, p)
			if got := recv(t, sizes, "the first batch"); got != tc.wantFirst {
				t.Errorf("first batch has %d messages, want %d", got, tc.wantFirst)
			}
			if elapsed := time.Since(began); tc.sent < 25 && elapsed < 900*time.Millisecond {
				t.Errorf("a batch short of BatchSize was handed over after %v, before its 1s window ended", elapsed)
			}
			rec.waitDeleted(t, tc.sent)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if rec.largestBatch > 10 {
				t.Errorf("a DeleteMessageBatch call had %d entries, want at most 10", rec.largestBatch)
			}
			if !queueEmpty(t, client, st.QueueURL) {
				t.Error("queue is not empty")
			}
		})
	}
}

// TestHeartbeat runs a handler for more than two visibility timeouts while another consumer polls
// the queue: with the heartbeat the message stays hidden; without it, it is redelivered.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	const visibility = 2 * time.Second
	for _, tc := range []struct {
		name            string
		disable         bool
		wantRedelivered bool
	}{
		{"heartbeat keeps a long job's message hidden", false, false},
		{"without heartbeat the message is redelivered", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, st := newQueue(t, awslocal.StackOptions{VisibilityTimeout: int(visibility / time.Second)})
			send(t, client, st.QueueURL, nil, "long job")

			started := make(chan time.Time, 10)
			release := make(chan struct{})
			rec := newRecorder(client)
			p, err := poller.New(poller.Config{
				SQS: rec, QueueURL: st.QueueURL, WaitTime: time.Second, Logger: testLogger(t),
				DisableHeartbeat: tc.disable,
				Handler: poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
					started <- time.Now()
					<-release
					return events.SQSEventResponse{}, nil
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, p)
			var releaseOnce sync.Once
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // runs before stop
			t0 := recv(t, started, "the handler to start")

			var stolen []sqstypes.Message
			for time.Since(t0) < 3*visibility && len(stolen) == 0 {
				out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
					QueueUrl: aws.String(st.QueueURL), WaitTimeSeconds: 1, MaxNumberOfMessages: 10,
				})
				if err != nil {
					t.Fatal(err)
				}
				stolen = out.Messages
			}
			if got := len(stolen) > 0; got != tc.wantRedelivered {
				t.Fatalf("another consumer received the message while the handler ran: %v, want %v", got, tc.wantRedelivered)
			}
			for _, m := range stolen {
				if _, err := client.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(st.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
			}
			releaseOnce.Do(func() { close(release) })
			if !tc.wantRedelivered {
				rec.waitDeleted(t, 1)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := len(started); n != 0 {
				t.Errorf("handler started %d more times, want once in all", n)
			}
		})
	}
}

// TestGracefulShutdown cancels Run while a handler runs (and another slot is in a 20 s long
// poll): Run waits for the handler, whose context is not cancelled, deletes its successes and
// returns nil promptly.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	client, st := newQueue(t, awslocal.StackOptions{})
	send(t, client, st.QueueURL, nil, "ok", "fail")

	started := make(chan []delivery, 10)
	release := make(chan struct{})
	ctxErrs := make(chan error, 10)
	rec := newRecorder(client)
	p, err := poller.New(poller.Config{
		SQS: rec, QueueURL: st.QueueURL, Concurrency: 2, Logger: testLogger(t),
		Handler: poller.HandlerFunc(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			started <- deliveries(ev)
			<-release
			ctxErrs <- ctx.Err()
			var resp events.SQSEventResponse
			for _, r := range ev.Records {
				if r.Body == "fail" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				}
			}
			return resp, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() { runErr = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	var got []delivery
	for len(got) < 2 {
		got = append(got, recv(t, started, "the handler to start")...)
	}
	okHandle := ""
	for _, d := range got {
		if d.body == "ok" {
			okHandle = d.handle
		}
	}

	cancel()
	cancelled := time.Now()
	select {
	case <-done:
		t.Fatalf("Run returned (%v) while a handler was running", runErr)
	default:
	}
	close(release)
	recv(t, done, "Run to return")
	if runErr != nil {
		t.Fatalf("Run = %v, want nil", runErr)
	}
	if d := time.Since(cancelled); d > 10*time.Second {
		t.Errorf("Run took %v to return after cancel: the long poll was not abandoned", d)
	}
	for len(ctxErrs) > 0 {
		if err := <-ctxErrs; err != nil {
			t.Errorf("handler context was cancelled by shutdown: %v", err)
		}
	}
	var deleted []string
	for len(rec.deleted) > 0 {
		deleted = append(deleted, <-rec.deleted)
	}
	if !slices.Equal(deleted, []string{okHandle}) {
		t.Errorf("deleted %q before Run returned, want only the successful message %q", deleted, okHandle)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	client := newFake()
	handler := poller.HandlerFunc(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	const std = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	const fifo = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo"
	valid := func(c poller.Config) poller.Config {
		if c.QueueURL == "" {
			c.QueueURL = std
		}
		c.SQS, c.Handler = client, handler
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  poller.Config
		want []string // substrings of the error
	}{
		{"empty", poller.Config{}, []string{"SQS is required", "Handler is required", "QueueURL is required"}},
		{"no SQS", poller.Config{QueueURL: std, Handler: handler}, []string{"SQS is required"}},
		{"no handler", poller.Config{QueueURL: std, SQS: client}, []string{"Handler is required"}},
		{"queue name, not URL", valid(poller.Config{QueueURL: "jobs"}), []string{`QueueURL "jobs" is not a queue URL`}},
		{"negative batch size", valid(poller.Config{BatchSize: -1}), []string{"BatchSize -1 is out of range 1–10000"}},
		{"batch size too large", valid(poller.Config{BatchSize: 10001, BatchWindow: time.Second}), []string{"BatchSize 10001 is out of range"}},
		{"FIFO batch size above 10", valid(poller.Config{QueueURL: fifo, BatchSize: 11}), []string{"BatchSize 11 is out of range 1–10 for a FIFO queue"}},
		{"FIFO batch window", valid(poller.Config{QueueURL: fifo, BatchWindow: time.Second}), []string{"BatchWindow is not supported on a FIFO queue"}},
		{"batch above 10 without window", valid(poller.Config{BatchSize: 11}), []string{"BatchWindow must be at least 1s when BatchSize (11) is above 10"}},
		{"batch above 10 with short window", valid(poller.Config{BatchSize: 100, BatchWindow: 500 * time.Millisecond}), []string{"BatchWindow must be at least 1s"}},
		{"negative window", valid(poller.Config{BatchWindow: -time.Second}), []string{"BatchWindow -1s is out of range 0–5m0s"}},
		{"window too long", valid(poller.Config{BatchWindow: 301 * time.Second}), []string{"BatchWindow 5m1s is out of range"}},
		{"negative concurrency", valid(poller.Config{Concurrency: -1}), []string{"Concurrency -1 is out of range 1–1000"}},
		{"concurrency too high", valid(poller.Config{Concurrency: 1001}), []string{"Concurrency 1001 is out of range"}},
		{"wait time too long", valid(poller.Config{WaitTime: 21 * time.Second}), []string{"WaitTime 21s must be whole seconds in 1s–20s"}},
		{"wait time not whole seconds", valid(poller.Config{WaitTime: 1500 * time.Millisecond}), []string{"WaitTime 1.5s must be whole seconds"}},
		{"negative wait time", valid(poller.Config{WaitTime: -time.Second}), []string{"WaitTime -1s"}},
		{"visibility too short", valid(poller.Config{VisibilityTimeout: 500 * time.Millisecond}), []string{"VisibilityTimeout 500ms must be whole seconds in 1s–12h"}},
		{"visibility too long", valid(poller.Config{VisibilityTimeout: 13 * time.Hour}), []string{"VisibilityTimeout 13h0m0s"}},
		{"negative invocation timeout", valid(poller.Config{InvocationTimeout: -time.Second}), []string{"InvocationTimeout -1s must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := poller.New(tc.cfg)
			if err == nil {
				t.Fatalf("New(%+v) = %v, nil; want an error", tc.cfg, p)
			}
			if !errors.Is(err, poller.ErrInvalidConfig) {
				t.Errorf("error %q does not wrap ErrInvalidConfig", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
	for _, cfg := range []poller.Config{
		valid(poller.Config{}),
		valid(poller.Config{QueueURL: fifo, BatchSize: 10}),
		valid(poller.Config{BatchSize: 10000, BatchWindow: 300 * time.Second, Concurrency: 1000, WaitTime: time.Second,
			VisibilityTimeout: 12 * time.Hour, InvocationTimeout: time.Hour, DisableHeartbeat: true}),
		valid(poller.Config{BatchSize: 5, BatchWindow: 200 * time.Millisecond}),
	} {
		if _, err := poller.New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}
