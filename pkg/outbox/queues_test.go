package outbox_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// queueRecorder is an SQS client that records the queue of every message it accepts.
type queueRecorder struct {
	mu  sync.Mutex
	got []string // "<queue name> <body's order>"
}

func (q *queueRecorder) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	panic("not used")
}

func (q *queueRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	for _, e := range in.Entries {
		_, rest, _ := strings.Cut(*e.MessageBody, `"order":"`)
		order, _, _ := strings.Cut(rest, `"`)
		q.got = append(q.got, queues.NameOf(aws.ToString(in.QueueUrl))+" "+order)
	}
	q.mu.Unlock()
	return (&fakeSQS{}).SendMessageBatch(ctx, in, opts...)
}

// TestRelayRoutesThroughAProducerOfSeveralQueues: jobs prepared by a producer of a stack's
// queues (each for its kind's queue, or the one WithQueue named) are sent by the relay to the
// queue each was prepared for, through the producer's PerQueue; an entry written before the
// stack had several queues (no queue) goes to the default queue.
func TestRelayRoutesThroughAProducerOfSeveralQueues(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	set, err := queues.New(queues.Queue{Name: "default", URL: stdURL}, queues.Queue{Name: "bulk", URL: stdURL + "-bulk"})
	if err != nil {
		t.Fatal(err)
	}
	api := &queueRecorder{}
	p, err := producer.New(producer.Config{SQS: api, Queues: set, Routes: queues.Routes{"order.confirm": "bulk"}, Clock: clk.Now, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := outbox.NewMemoryStore()
	routed := prepare(t, p, clk, "routed")
	moved := prepare(t, p, clk, "moved", producer.WithQueue("default"))
	old := prepare(t, p, clk, "old")
	old.Message.QueueURL = ""
	if routed.Message.QueueURL != stdURL+"-bulk" || moved.Message.QueueURL != stdURL {
		t.Fatalf("prepared for %s and %s", routed.Message.QueueURL, moved.Message.QueueURL)
	}
	if err := s.Add(routed, moved, old); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Producers: p.PerQueue(), Now: clk.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Drain(context.Background())
	if err != nil || st.Sent != 3 || s.Len() != 0 {
		t.Fatalf("Drain = %+v, %v; store holds %d", st, err, s.Len())
	}
	sort.Strings(api.got)
	if got := strings.Join(api.got, ","); got != "jobs moved,jobs old,jobs-bulk routed" {
		t.Errorf("sent %s, want each job on the queue it was prepared for, the old one on the default", got)
	}
}
