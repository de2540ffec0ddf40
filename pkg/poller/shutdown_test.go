package poller_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

// TestShutdownReadsAnAnswerThatHasStarted cancels Run after SQS has started to answer a receive
// (the first bytes of the response have arrived, the rest is still to come): the messages in that
// answer are already off the queue, so the poller reads it to the end, hands them to the handler
// and deletes them before Run returns, instead of leaving them invisible for a visibility timeout.
// When the rest never comes, Run still returns (after a grace of 5 s), with nothing handled.
//
// The server is an HTTP server speaking SQS's JSON protocol to the real SDK client, so that the
// answer can be cut in two exactly where the test needs it.
func TestShutdownReadsAnAnswerThatHasStarted(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		rest bool // the server sends the rest of the answer after the cancel
	}{
		{name: "the rest arrives", rest: true},
		{name: "the rest never arrives", rest: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			shutdownDuringAnswer(t, tt.rest)
		})
	}
}

func shutdownDuringAnswer(t *testing.T, rest bool) {
	const body = "started before shutdown"
	sum := md5.Sum([]byte(body))
	answer, err := json.Marshal(map[string]any{"Messages": []map[string]any{{
		"MessageId": "m-1", "ReceiptHandle": "rh-1", "Body": body, "MD5OfBody": hex.EncodeToString(sum[:]),
		"Attributes": map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764590400000"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	half := len(answer) / 2

	var (
		answering atomic.Bool // the first half of the answer is being sent
		resume    = make(chan struct{})
		mu        sync.Mutex
		receives  int
		deleted   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch target := r.Header.Get("X-Amz-Target"); target {
		case "AmazonSQS.GetQueueAttributes":
			io.WriteString(w, `{"Attributes":{"QueueArn":"arn:aws:sqs:us-east-1:123456789012:q","VisibilityTimeout":"30"}}`)
		case "AmazonSQS.ReceiveMessage":
			mu.Lock()
			receives++
			first := receives == 1
			mu.Unlock()
			if !first {
				<-r.Context().Done() // an empty long poll, until the client gives up
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			answering.Store(true) // before the bytes leave, so that the client's trace sees it
			w.Write(answer[:half])
			w.(http.Flusher).Flush()
			if !rest {
				<-r.Context().Done() // until the client gives up
				return
			}
			select {
			case <-resume:
			case <-r.Context().Done():
				return
			}
			w.Write(answer[half:])
		case "AmazonSQS.DeleteMessageBatch":
			var req struct {
				Entries []struct{ Id, ReceiptHandle string }
			}
			json.Unmarshal(in, &req)
			var ok []map[string]string
			mu.Lock()
			for _, e := range req.Entries {
				deleted = append(deleted, e.ReceiptHandle)
				ok = append(ok, map[string]string{"Id": e.Id})
			}
			mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"Successful": ok, "Failed": []any{}})
		default:
			http.Error(w, "unexpected "+target, http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)

	cfg, err := awslocal.NewConfig(t.Context(), srv.URL, "us-east-1", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan string, 10)
	p, err := poller.New(poller.Config{
		SQS: sqs.NewFromConfig(cfg), QueueURL: srv.URL + "/123456789012/q", Logger: testLogger(t),
		Handler: poller.HandlerFunc(func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			for _, r := range ev.Records {
				handled <- r.Body
			}
			return events.SQSEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}

	// The test learns that the client has the first bytes of the answer from a trace of its own
	// in Run's context (the poller's calls keep its values).
	firstBytes := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() {
			if answering.Load() {
				once.Do(func() { close(firstBytes) })
			}
		},
	}))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	recv(t, firstBytes, "the first bytes of the answer to reach the client")
	cancel()
	close(resume)
	if err := recv(t, done, "Run to return"); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !rest {
		if len(handled) != 0 || len(deleted) != 0 {
			t.Errorf("handled %d and deleted %q from an answer that never completed, want nothing", len(handled), deleted)
		}
		return
	}
	select {
	case got := <-handled:
		if got != body {
			t.Errorf("handler got %q, want %q", got, body)
		}
	default:
		t.Fatal("the message of an answer that had started before shutdown never reached the handler")
	}
	if strings.Join(deleted, ",") != "rh-1" {
		t.Errorf("deleted %q, want [rh-1]", deleted)
	}
}
