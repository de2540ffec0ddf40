package producer

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// nopSQS answers without recording or allocating more than the response needs, so the
// benchmarks measure the producer's own work (validation, envelope, request building).
type nopSQS struct {
	send  sqs.SendMessageOutput
	batch sqs.SendMessageBatchOutput
}

func newNopSQS() *nopSQS {
	n := &nopSQS{send: sqs.SendMessageOutput{MessageId: aws.String("m")}}
	for _, id := range entryIDs {
		n.batch.Successful = append(n.batch.Successful, types.SendMessageBatchResultEntry{Id: aws.String(id), MessageId: aws.String("m" + id)})
	}
	return n
}

func (n *nopSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return &n.send, nil
}

func (n *nopSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := n.batch
	out.Successful = out.Successful[:len(in.Entries)]
	return &out, nil
}

type benchArgs struct {
	To       string `json:"to"`
	Template string `json:"template"`
	OrderID  int    `json:"order_id"`
}

func (benchArgs) Kind() string { return "email.send" }

func benchProducer(b *testing.B, url string) *Producer {
	p, err := New(Config{SQS: newNopSQS(), QueueURL: url, Clock: func() time.Time { return fixedNow }})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkEnqueue measures one job through Enqueue (SendMessage to a no-op client).
func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	args := benchArgs{To: "a@b.c", Template: "welcome", OrderID: 42}
	b.Run("plain", func(b *testing.B) {
		p := benchProducer(b, stdURL)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Enqueue(ctx, args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("key+traceparent", func(b *testing.B) {
		p := benchProducer(b, stdURL)
		tctx := jobs.WithTraceParent(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		opts := []Option{WithKey("order-42-welcome")}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Enqueue(tctx, args, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fifo", func(b *testing.B) {
		p := benchProducer(b, fifoURL)
		opts := []Option{WithKey("order-42-welcome"), WithGroupID("customer-42")}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Enqueue(ctx, args, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEnqueueBatch measures 100 jobs per EnqueueBatch (10 SendMessageBatch requests to a
// no-op client); ns/job and allocs/job are reported per job.
func BenchmarkEnqueueBatch(b *testing.B) {
	ctx := context.Background()
	const n = 100
	for _, bc := range []struct {
		name string
		ctx  context.Context
		opts []Option
	}{
		{"plain", ctx, nil},
		{"key+traceparent", jobs.WithTraceParent(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), []Option{WithKey("order-42-welcome")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := benchProducer(b, stdURL)
			reqs := make([]Request, n)
			for i := range reqs {
				reqs[i] = Request{Args: benchArgs{To: "a@b.c", Template: "welcome", OrderID: i}, Options: bc.opts}
			}
			b.ReportAllocs()
			for b.Loop() {
				results, err := p.EnqueueBatch(bc.ctx, reqs)
				if err != nil || results[n-1].Err != nil {
					b.Fatal(err, results[n-1].Err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
			b.ReportMetric(testing.AllocsPerRun(10, func() { _, _ = p.EnqueueBatch(bc.ctx, reqs) })/n, "allocs/job")
		})
	}
}
