package producer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Test args.

type emailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

func (emailArgs) Kind() string { return "email.send" }

type blobArgs struct {
	Data string `json:"data"`
}

func (blobArgs) Kind() string { return "blob.store" }

type sliceArgs []string

func (sliceArgs) Kind() string { return "bad.slice" }

type stringArgs string

func (stringArgs) Kind() string { return "bad.string" }

type mapArgs map[string]any

func (mapArgs) Kind() string { return "map.args" }

type badKindArgs struct{}

func (badKindArgs) Kind() string { return "Bad Kind" }

type chanArgs struct{ C chan int }

func (chanArgs) Kind() string { return "bad.chan" }

type ptrArgs struct{ N int }

func (ptrArgs) Kind() string { return "ptr.args" }

const (
	stdURL  = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	fifoURL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo"
)

var fixedNow = time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC)

// seqRand returns a Rand for jobs.IDSource that counts, so ids are distinct and reproducible.
func seqRand() func() uint64 {
	var n atomic.Uint64
	return func() uint64 { return n.Add(1) }
}

// sentEntry is a copy of what a fake call received (the producer reuses its buffers).
type sentEntry struct {
	ID, Body, Group, Dedup string
	Delay                  int32
	Attrs                  map[string]types.MessageAttributeValue
}

// size is the entry's size the way SQS counts it.
func (e sentEntry) size() int {
	n := len(e.Body)
	for k, v := range e.Attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// fakeSQS records calls and answers them with onSend/onBatch, or with success.
type fakeSQS struct {
	onSend  func(in *sqs.SendMessageInput) (*sqs.SendMessageOutput, error)
	onBatch func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)

	mu      sync.Mutex
	sends   []sentEntry
	batches [][]sentEntry
}

func (f *fakeSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	f.sends = append(f.sends, sentEntry{
		Body: aws.ToString(in.MessageBody), Group: aws.ToString(in.MessageGroupId),
		Dedup: aws.ToString(in.MessageDeduplicationId), Delay: in.DelaySeconds, Attrs: in.MessageAttributes,
	})
	n := len(f.sends)
	f.mu.Unlock()
	if f.onSend != nil {
		return f.onSend(in)
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("msg-%d", n))}, nil
}

func (f *fakeSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	entries := make([]sentEntry, len(in.Entries))
	for i, e := range in.Entries {
		entries[i] = sentEntry{
			ID: aws.ToString(e.Id), Body: aws.ToString(e.MessageBody), Group: aws.ToString(e.MessageGroupId),
			Dedup: aws.ToString(e.MessageDeduplicationId), Delay: e.DelaySeconds, Attrs: e.MessageAttributes,
		}
	}
	f.mu.Lock()
	f.batches = append(f.batches, entries)
	call := len(f.batches)
	f.mu.Unlock()
	if f.onBatch != nil {
		return f.onBatch(call, in)
	}
	return succeedAll(call, in), nil
}

func (f *fakeSQS) batchCalls() [][]sentEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches
}

func (f *fakeSQS) sendCalls() []sentEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends
}

// succeedAll answers every entry with success, message ids "m<call>-<entry id>".
func succeedAll(call int, in *sqs.SendMessageBatchInput) *sqs.SendMessageBatchOutput {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{
			Id: e.Id, MessageId: aws.String(fmt.Sprintf("m%d-%s", call, aws.ToString(e.Id))),
		})
	}
	return out
}

// sleepRecorder is a Config.Sleep that returns at once and remembers the waits.
type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
	err   error
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return s.err
}

func newTestProducer(t *testing.T, api SQSAPI, queueURL string, mod ...func(*Config)) *Producer {
	t.Helper()
	cfg := Config{
		SQS:      api,
		QueueURL: queueURL,
		IDs:      jobs.IDSource{Rand: seqRand()},
		Clock:    func() time.Time { return fixedNow },
		Sleep:    (&sleepRecorder{}).sleep,
		Rand:     func() float64 { return 0.5 },
	}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func mustContain(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error is nil, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}
