package flow_test

import (
	"sort"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// BenchmarkThroughputAtLimit runs 8 competing worker processes (one poller each, batches of
// 10, each with its own flow and idempotency middleware, as 8 containers would) on the embedded
// emulator against one queue of jobs of one key, and measures the rate at which the jobs start
// while the backlog lasts (from the 10th to the 90th percentile of the starts; jobs/s-all is the
// whole run, first start to last, with the last deferred jobs' return), against the limit: a rate limit of 20 per second (with and without holding, MaxHold), and a
// concurrency limit of 4 with jobs of 100 ms (at most 40 per second); the baseline runs the same
// jobs without the flow middleware. DynamoDB calls per job count every process's calls (the
// idempotency middleware's 2 writes per job included).
//
//	go test -run '^$' -bench ThroughputAtLimit -benchtime 1x ./pkg/flow
func BenchmarkThroughputAtLimit(b *testing.B) {
	for _, bc := range []struct {
		name   string
		n      int
		sleep  int // ms per job
		flow   func(*flow.Config)
		limit  float64 // jobs per second the limit allows (0: none)
		noFlow bool
	}{
		{name: "baseline, no limit", n: 400, noFlow: true},
		{name: "rate 20 per s", n: 300, limit: 20, flow: func(f *flow.Config) {
			f.Rates = []flow.Rate{{Kind: "test.work", Limit: 20, Period: time.Second}}
		}},
		{name: "rate 20 per s, no holding", n: 60, limit: 20, flow: func(f *flow.Config) {
			f.Rates = []flow.Rate{{Kind: "test.work", Limit: 20, Period: time.Second}}
			f.MaxHold = -1
		}},
		{name: "concurrency 4 x 100 ms", n: 600, sleep: 100, limit: 40, flow: func(f *flow.Config) {
			f.Concurrency = []flow.Concurrency{{Kind: "test.work", Limit: 4}}
		}},
		{name: "concurrency 4 x 100 ms, no holding", n: 200, sleep: 100, limit: 40, flow: func(f *flow.Config) {
			f.Concurrency = []flow.Concurrency{{Kind: "test.work", Limit: 4}}
			f.MaxHold = -1
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				c := newCluster(b, clusterConfig{processes: 8, concurrency: 1, batch: 10, flow: func(f *flow.Config) {
					f.MinDelay = time.Second
					if bc.flow != nil {
						bc.flow(f)
					}
				}, noFlow: bc.noFlow})
				var args []jobs.Args
				for range bc.n {
					args = append(args, workArgs{Key: "k", Sleep: bc.sleep})
				}
				ids := c.enqueue(args)
				c.waitFor("the jobs", func() bool { return c.ledger.completedCount() >= len(ids) })
				c.ledger.mu.Lock()
				starts := append([]time.Time(nil), c.ledger.starts["k"]...)
				peak := c.ledger.peak["k"]
				c.ledger.mu.Unlock()
				sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
				// The steady rate: from the 10th to the 90th percentile of the starts, the
				// backlog's start (the first receives) and end (the last deferred jobs'
				// returns, a second or two apart) left out; and the whole run's.
				lo, hi := len(starts)/10, len(starts)*9/10
				rate := float64(hi-lo) / starts[hi].Sub(starts[lo]).Seconds()
				all := float64(len(starts)-1) / starts[len(starts)-1].Sub(starts[0]).Seconds()
				b.ReportMetric(rate, "jobs/s")
				b.ReportMetric(all, "jobs/s-all")
				if bc.limit > 0 {
					b.ReportMetric(100*rate/bc.limit, "%limit")
				}
				b.ReportMetric(float64(peak), "peak-running")
				// Writes and reads of every process, the idempotency middleware's 2 writes per
				// job included; the emulator does not return the item with a refused write, so
				// each refused write here also costs a read that DynamoDB spares.
				b.ReportMetric(float64(c.calls.updates.Load()+c.calls.puts.Load())/float64(bc.n), "ddb-writes/job")
				b.ReportMetric(float64(c.calls.gets.Load())/float64(bc.n), "ddb-reads/job")
				var slot, token, held int64
				for _, p := range c.procs {
					if p.flow == nil {
						continue
					}
					s := p.flow.Stats()
					slot, token, held = slot+s.SlotDenied, token+s.TokenDenied, held+s.Held
				}
				b.ReportMetric(float64(slot+token)/float64(bc.n), "deferrals/job")
				b.ReportMetric(float64(held)/float64(bc.n), "holds/job")
				c.stopAll()
			}
		})
	}
}
