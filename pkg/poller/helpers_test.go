package poller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/poller"
)

func TestMain(m *testing.M) {
	// The shared emulator lives for the whole process: start it first so that its goroutines are
	// not counted as leaks. The SDK's HTTP client keeps idle connections to it.
	if _, err := awslocal.Shared(); err != nil {
		if errors.Is(err, awslocal.ErrNoDocker) {
			fmt.Printf("skipped: every test of this package: %s=localstack needs Docker: %v\n", awslocal.BackendEnv, err)
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "awslocal:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
	)
}

// timeout bounds every wait in these tests: generous, since they run in parallel under -race.
const timeout = 30 * time.Second

// testLogger writes the poller's logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newQueue provisions a fresh queue (and DLQ) on the shared backend.
func newQueue(t *testing.T, opts awslocal.StackOptions) (*sqs.Client, *awslocal.Stack) {
	t.Helper()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	opts.Name = awslocal.UniqueName("poller")
	st, err := awslocal.Provision(t.Context(), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return client, st
}

// send enqueues bodies (in batches of 10) with the given message attributes.
func send(t *testing.T, client *sqs.Client, queueURL string, attrs map[string]sqstypes.MessageAttributeValue, bodies ...string) {
	t.Helper()
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, body := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{
				Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body), MessageAttributes: attrs,
			})
		}
		out, err := client.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("send: %d entries failed: %+v", len(out.Failed), out.Failed)
		}
	}
}

// recorder wraps an SQS client and reports every receipt handle it deleted successfully.
type recorder struct {
	poller.SQSAPI
	deleted chan string

	mu           sync.Mutex
	largestBatch int
}

func newRecorder(client poller.SQSAPI) *recorder {
	return &recorder{SQSAPI: client, deleted: make(chan string, 1000)}
}

func (r *recorder) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	r.mu.Lock()
	r.largestBatch = max(r.largestBatch, len(in.Entries))
	r.mu.Unlock()
	out, err := r.SQSAPI.DeleteMessageBatch(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	handles := make(map[string]string, len(in.Entries))
	for _, e := range in.Entries {
		handles[aws.ToString(e.Id)] = aws.ToString(e.ReceiptHandle)
	}
	for _, s := range out.Successful {
		r.deleted <- handles[aws.ToString(s.Id)]
	}
	return out, err
}

// waitDeleted returns the next n receipt handles deleted.
func (r *recorder) waitDeleted(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(timeout)
	for len(got) < n {
		select {
		case h := <-r.deleted:
			got = append(got, h)
		case <-deadline:
			t.Fatalf("waited %v for %d deletions, got %d", timeout, n, len(got))
		}
	}
	return got
}

// start runs p until the test ends (or stop is called) and returns stop, which cancels Run and
// returns its error.
func start(t *testing.T, p *poller.Poller) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(timeout):
				err = errors.New("Run did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return stop
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return recvWithin(t, ch, what, timeout)
}

// recvWithin is recv with a deadline of its own, for a wait on a lot of work (thousands of jobs
// one at a time) that a loaded machine may take minutes over.
func recvWithin[T any](t *testing.T, ch <-chan T, what string, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("waited %v for %s", d, what)
		panic("unreachable")
	}
}

// queueEmpty reports whether the queue holds no message at all (visible, delayed or in flight).
func queueEmpty(t *testing.T, client *sqs.Client, queueURL string) bool {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range out.Attributes {
		if v != "0" {
			return false
		}
	}
	return true
}
