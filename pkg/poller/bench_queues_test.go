package poller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// BenchmarkCriticalLatency measures how long a critical job waits, from its send to the start of
// its handling, while 2,000 bulk jobs of 10 ms each flood the poller (4 slots, batches of 10: a
// bulk batch takes about 100 ms), against the same without the flood, and against one shared
// queue, where the critical jobs wait behind the flood. b.N critical jobs are sent one at a time,
// 50 ms apart, on the embedded emulator. It reports the p50, p99 and max of their waits.
//
//	go test -run '^$' -bench CriticalLatency -benchtime 100x ./pkg/poller
func BenchmarkCriticalLatency(b *testing.B) {
	for _, tc := range []struct {
		name     string
		flood    bool
		shared   bool // critical jobs on the bulk queue: one queue for both
		priority poller.Priority
	}{
		{"one-queue/no-flood", false, true, poller.Weighted},
		{"one-queue/flood", true, true, poller.Weighted},
		{"weighted-9:1/no-flood", false, false, poller.Weighted},
		{"weighted-9:1/flood", true, false, poller.Weighted},
		{"strict/no-flood", false, false, poller.Strict},
		{"strict/flood", true, false, poller.Strict},
	} {
		b.Run(tc.name, func(b *testing.B) { benchCritical(b, tc.flood, tc.shared, tc.priority) })
	}
}

func benchCritical(b *testing.B, flood, shared bool, priority poller.Priority) {
	client := sqs.NewFromConfig(awslocaltest.Backend(b).Config)
	ctx := context.Background()
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("bench-prio"), VisibilityTimeout: 60},
		queues.Spec{Name: "critical", Weight: 9}, queues.Spec{Name: "bulk", Weight: 1})
	if err != nil {
		b.Fatal(err)
	}
	crit, _ := set.Get("critical")
	bulk, _ := set.Get("bulk")
	critURL := crit.URL
	if shared {
		critURL = bulk.URL
	}
	if flood {
		bodies := make([]string, 2000)
		for i := range bodies {
			bodies[i] = "bulk " + strconv.Itoa(i)
		}
		sendBench(b, client, bulk.URL, bodies)
	}
	var mu sync.Mutex
	var waits []time.Duration
	got := make(chan struct{}, b.N)
	var bulkDone atomic.Int64
	cfg := poller.Config{
		SQS: client, BatchSize: 10, Concurrency: 4, WaitTime: 20 * time.Second, Priority: priority,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: batchFunc(func(_ context.Context, msgs []sqstypes.Message) ([]string, error) {
			start := time.Now()
			for _, m := range msgs {
				body := aws.ToString(m.Body)
				if ns, ok := strings.CutPrefix(body, "critical "); ok {
					sent, _ := strconv.ParseInt(ns, 10, 64)
					mu.Lock()
					waits = append(waits, start.Sub(time.Unix(0, sent)))
					mu.Unlock()
					got <- struct{}{}
					continue
				}
				time.Sleep(10 * time.Millisecond) // a bulk job's work
				bulkDone.Add(1)
			}
			return nil, nil
		}),
	}
	if shared {
		cfg.QueueURL = bulk.URL
	} else {
		cfg.Queues = []poller.Queue{{URL: crit.URL, Weight: 9}, {URL: bulk.URL, Weight: 1}}
	}
	p, err := poller.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	if flood { // the flood is under way before the first critical job
		for bulkDone.Load() < 40 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	b.ResetTimer()
	for range b.N {
		sendBench(b, client, critURL, []string{"critical " + strconv.FormatInt(time.Now().UnixNano(), 10)})
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.After(5 * time.Minute)
	for range b.N {
		select {
		case <-got:
		case <-deadline:
			b.Fatal("the critical jobs were not all handled within 5 minutes")
		}
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	slices.Sort(waits)
	q := func(f float64) float64 { return float64(waits[min(len(waits)-1, int(f*float64(len(waits))))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(waits[len(waits)-1])/1e6, "max-ms")
	b.ReportMetric(float64(bulkDone.Load()), "bulk-done")
	b.ReportMetric(0, "ns/op")
}

// sendBench sends bodies in batches of 10.
func sendBench(b *testing.B, client *sqs.Client, url string, bodies []string) {
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, body := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body)})
		}
		if _, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			b.Fatal(err)
		}
	}
}
