package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// The demo's flow-controlled kind: webhooks, at most one at a time per tenant.

// webhookArgs delivers a webhook to a tenant's endpoint.
type webhookArgs struct {
	Event string `json:"event"`
}

// Kind implements jobs.Args.
func (webhookArgs) Kind() string { return "webhook.deliver" }

// webhookLabel names the demo's rows of the limited kind.
const webhookLabel = "webhook of tenant acme: flow limit 1 at a time per tenant"

// webhooks is how many webhooks of one tenant the demo sends at once.
const webhooks = 3

// flowDemo is the limited kind's part of the demo: the middleware, and what the jobs saw.
type flowDemo struct {
	mw *flow.Middleware

	mu            sync.Mutex
	running, peak int
	runs          map[string]int // job key → runs
}

// newFlowDemo registers webhook.deliver and returns the flow middleware that limits it to one job
// at a time per tenant (the envelope's meta tenant, set by producer.WithTenant).
func newFlowDemo(reg *jobs.Registry, ddb flow.DynamoDBAPI, table string, logger *slog.Logger) (*flowDemo, error) {
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		return nil, err
	}
	d := &flowDemo{runs: map[string]int{}}
	d.mw, err = flow.NewMiddleware(flow.Config{
		Store:       tbl,
		Concurrency: []flow.Concurrency{{Kind: webhookArgs{}.Kind(), Limit: 1, Key: flow.TenantKey}},
		Logger:      logger,
	})
	if err != nil {
		return nil, err
	}
	err = jobs.Register(reg, jobs.WorkFunc[webhookArgs](func(ctx context.Context, job *jobs.Job[webhookArgs]) error {
		d.mu.Lock()
		d.running++
		d.peak = max(d.peak, d.running)
		d.runs[job.Key]++
		d.mu.Unlock()
		time.Sleep(200 * time.Millisecond) // the POST to the tenant's endpoint
		d.mu.Lock()
		d.running--
		d.mu.Unlock()
		return nil
	}))
	return d, err
}

// enqueue sends the tenant's webhooks at once.
func (d *flowDemo) enqueue(ctx context.Context, prod *producer.Producer, track *tracker) error {
	reqs := make([]producer.Request, webhooks)
	for i := range reqs {
		reqs[i] = producer.Request{Args: webhookArgs{Event: fmt.Sprintf("order.paid-%d", i+1)}, Options: []producer.Option{producer.WithTenant("acme")}}
	}
	results, err := prod.EnqueueBatch(ctx, reqs)
	if err != nil {
		return err
	}
	if err := producer.JoinErrors(results); err != nil {
		return err
	}
	for _, r := range results {
		track.expect(r.MessageID, webhookLabel, r.ID, r.Kind, r.Key)
	}
	return nil
}

// print says what the limit did.
func (d *flowDemo) print(w io.Writer) {
	d.mu.Lock()
	peak := d.peak
	d.mu.Unlock()
	s := d.mw.Stats()
	fmt.Fprintf(w, "\nflow: %d webhooks of tenant acme ran at most %d at a time (limit 1): %d waited in the worker for the slot,"+
		" %d were deferred (no attempt spent); `sqsworker limits` lists the limit and its holders\n",
		webhooks, peak, s.Held, s.SlotDenied)
}

// peakRunning returns the most webhooks the jobs saw running at once.
func (d *flowDemo) peakRunning() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak
}

// fillRuns sets the runs of the demo's webhook rows (their side effect is counted here, not in
// examplejobs.SideEffects).
func (d *flowDemo) fillRuns(rows []Row) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range rows {
		if rows[i].Kind == (webhookArgs{}).Kind() {
			rows[i].Runs = d.runs[rows[i].Key]
		}
	}
}
