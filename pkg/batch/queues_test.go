package batch_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// BulkStep is a chain step of a kind routed to the "bulk" queue.
type BulkStep struct{}

func (BulkStep) Kind() string { return "test.bulk_step" }

// TestChainAcrossQueues: a chain whose steps are of kinds routed to different queues (a producer
// of a queue set with routes) enqueues each next step to its own kind's queue, through the relay
// of every queue (Producer.PerQueue), with the result: step 2 runs on the bulk queue's worker,
// whose registry alone knows its kind, and step 3 back on the default queue's.
func TestChainAcrossQueues(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	set, _, err := awslocal.ProvisionQueues(r.ctx, r.sqs, awslocal.StackOptions{Name: awslocal.UniqueName("chainq"), VisibilityTimeout: 2},
		queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	routes := queues.Routes{BulkStep{}.Kind(): "bulk"}
	prod, err := producer.New(producer.Config{SQS: r.sqs, Queues: set, Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string // "queue:kind:previous result"
	record := func(queue, kind string, ctx context.Context) {
		prev, _, _ := batch.PreviousResult(ctx, nil)
		mu.Lock()
		ran = append(ran, queue+":"+kind+":"+string(prev))
		mu.Unlock()
	}
	defReg, bulkReg := jobs.NewRegistry(), jobs.NewRegistry()
	jobs.MustRegister(defReg, jobs.WorkFunc[Step](func(ctx context.Context, j *jobs.Job[Step]) error {
		record("default", j.Kind, ctx)
		out, _ := json.Marshal(j.Args.Add)
		return batch.SetResult(ctx, nil, out)
	}))
	jobs.MustRegister(bulkReg, jobs.WorkFunc[BulkStep](func(ctx context.Context, j *jobs.Job[BulkStep]) error {
		record("bulk", j.Kind, ctx)
		return batch.SetResult(ctx, nil, []byte(`"from bulk"`))
	}))

	quiet := slog.New(slog.DiscardHandler)
	runner, err := dynamooutbox.NewRunner(dynamooutbox.RunnerConfig{Outbox: r.ob, Producers: prod.PerQueue(), ID: "chainq",
		Relay: outbox.RelayConfig{PollInterval: 200 * time.Millisecond, Wake: r.wake}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = runner.Run(ctx) })
	for _, q := range set.All() {
		reg := defReg
		if q.Name == "bulk" {
			reg = bulkReg
		}
		idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: r.store, Lease: 5 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		h, err := worker.New(worker.Config{Registry: reg, SQS: r.sqs, QueueURL: q.URL, DLQURL: q.DLQURL,
			Middleware: []worker.Middleware{idem}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		p, err := poller.New(poller.Config{SQS: r.sqs, QueueURL: q.URL, Handler: h, WaitTime: time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = p.Run(ctx) })
	}

	// The batch client's registry (Config.Registry) knows every kind of the stack.
	jobs.MustRegister(r.reg, jobs.WorkFunc[BulkStep](func(context.Context, *jobs.Job[BulkStep]) error { return nil }))
	var steps []producer.Message
	for _, a := range []jobs.Args{Step{Add: 1}, BulkStep{}, Step{Add: 3}} {
		m, err := prod.Prepare(r.ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, m)
	}
	bulk, _ := set.Get("bulk")
	if steps[1].QueueURL != bulk.URL {
		t.Fatalf("the routed step was prepared for %s, want the bulk queue %s", steps[1].QueueURL, bulk.URL)
	}
	id, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, steps...)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor("the chain", time.Minute, func() bool {
		d, err := r.client.GetChain(r.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == batch.ChainFailed || d.State == batch.ChainCancelled {
			t.Fatalf("chain %s: %+v", d.State, d.ChainInfo)
		}
		return d.State == batch.ChainSucceeded
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"default:test.step:", "bulk:test.bulk_step:1", `default:test.step:"from bulk"`}
	if len(ran) != len(want) {
		t.Fatalf("runs %q, want %q", ran, want)
	}
	for i := range want {
		if ran[i] != want[i] {
			t.Errorf("run %d: %q, want %q", i, ran[i], want[i])
		}
	}
}
