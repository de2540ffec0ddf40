package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// bulkFlood is how many bulk jobs are waiting when the critical job of the queues row is sent.
const bulkFlood = 20

// queuesLabel is the row of the several-queues part: its claim is checked before it is shown.
var queuesLabel = fmt.Sprintf("queue critical, sent during a %d-job flood on bulk: ran next (strict)", bulkFlood)

// bulkArgs is the flood's job: 30 ms of work.
type bulkArgs struct {
	N int `json:"n"`
}

func (bulkArgs) Kind() string { return "demo.bulk" }

// Routes returns the queues of the demo's kinds that do not go to its default queue, as the
// worker and the producer route them (and `sqsworker ui --routes` takes them).
func Routes() queues.Routes {
	return queues.Routes{examplejobs.EmailArgs{}.Kind(): "critical", bulkArgs{}.Kind(): "bulk"}
}

// demoQueues adds two named queues to the demo's stack, critical and bulk, and one poller serving
// both with strict priority (one handler slot). It floods bulk, holds the first bulk job until
// the critical job has been received, and checks that the critical job runs next, before the 19
// bulk jobs still waiting: the row queuesLabel. It returns a function that stops the poller and
// reports an error if the claim did not hold.
func demoQueues(ctx context.Context, w io.Writer, b *awslocal.Backend, stackName string, client *sqs.Client,
	mw []worker.Middleware, effects *examplejobs.SideEffects, track *tracker, logger *slog.Logger) (func() error, error) {
	set, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: stackName, MaxReceiveCount: 3 * examplejobs.MaxAttempts},
		queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		return nil, err
	}
	crit, _ := set.Get("critical")
	bulk, _ := set.Get("bulk")
	fmt.Fprintf(w, "queues    critical %s, bulk %s (strict priority, one slot)\n", b.QueueURL(crit.URL), b.QueueURL(bulk.URL))

	received := make(chan struct{})     // closed once the critical job is received
	firstStarted := make(chan struct{}) // closed when the flood's first job starts
	var mu sync.Mutex
	var order []string // kinds in the order their jobs were settled
	reg := jobs.NewRegistry()
	if err := Register(reg, jobs.Exponential{Base: time.Second, Cap: 2 * time.Second}, effects); err != nil {
		return nil, err
	}
	var once sync.Once
	jobs.MustRegister(reg, jobs.WorkFunc[bulkArgs](func(ctx context.Context, _ *jobs.Job[bulkArgs]) error {
		held := false
		once.Do(func() { held = true; close(firstStarted) })
		if held { // the flood's first job runs until the critical job is received
			select {
			case <-received:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		time.Sleep(30 * time.Millisecond)
		return nil
	}), jobs.WithQueue("bulk"))
	routes := queues.Chain{Routes(), reg}
	h, err := worker.New(worker.Config{Registry: reg, SQS: client, Middleware: mw, Logger: logger, Routing: set.Routing(routes),
		OnBatch: func(ctx context.Context, outcomes []worker.Outcome) {
			mu.Lock()
			for _, o := range outcomes {
				if !o.Failed {
					order = append(order, o.Kind)
				}
			}
			mu.Unlock()
			track.observe(ctx, outcomes)
		}})
	if err != nil {
		return nil, err
	}
	prod, err := producer.New(producer.Config{SQS: client, Queues: set, Routes: routes})
	if err != nil {
		return nil, err
	}
	reqs := make([]producer.Request, bulkFlood)
	for i := range reqs {
		reqs[i] = producer.Request{Args: bulkArgs{N: i}}
	}
	results, err := prod.EnqueueBatch(ctx, reqs)
	if err == nil {
		err = producer.JoinErrors(results)
	}
	if err != nil {
		return nil, err
	}
	critReady := make(chan struct{}, 1) // the critical job is held for the next hand-off
	p, err := poller.New(poller.Config{SQS: client, Handler: h, Priority: poller.Strict, BatchSize: 1, Concurrency: 1,
		WaitTime: time.Second, Logger: logger,
		Queues: []poller.Queue{{URL: crit.URL}, {URL: bulk.URL}},
		OnBatchReady: func(url string, _ int) {
			if url == crit.URL {
				select {
				case critReady <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		return nil, err
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	fail := func(err error) (func() error, error) {
		stop()
		<-done
		return nil, err
	}
	// Once the flood's first job runs, send the critical job; once the critical queue's receiver
	// holds it for the next hand-off, let the flood go on.
	select {
	case <-firstStarted:
	case <-time.After(30 * time.Second):
		return fail(errors.New("demo: the bulk flood did not start within 30 s"))
	}
	res, err := prod.Enqueue(ctx, examplejobs.EmailArgs{To: "ops@example.com", Subject: "Password reset"})
	if err != nil {
		close(received)
		return fail(err)
	}
	track.expect(res.MessageID, queuesLabel, res.ID, res.Kind, res.Key)
	select {
	case <-critReady:
	case <-time.After(30 * time.Second):
		close(received)
		return fail(errors.New("demo: the critical job was not received within 30 s"))
	}
	close(received)
	return func() error {
		stop()
		if err := <-done; err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, k := range order {
			if k == (examplejobs.EmailArgs{}).Kind() {
				if i != 1 {
					return fmt.Errorf("demo: the critical job ran after %d bulk jobs, want 1 (the one running when it arrived)", i)
				}
				return nil
			}
		}
		return errors.New("demo: the critical job never ran")
	}, nil
}
