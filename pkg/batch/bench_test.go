package batch_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/batch"
)

// BenchmarkCompletionLatency measures, on the embedded emulator, how long after a batch's last
// child finished its callback starts: from the completing transaction (the batch's DoneAt, taken
// just before it is sent) to the callback's worker being called, through the DynamoDB outbox,
// its relay, the queue and a poller. 3 pollers (4 batches of 10 messages each at once) run:
//
//   - steady: 8 producers each enqueue a batch of 10 children and wait for its callback, 25
//     times (200 batches, 2,000 children, while the other producers' children run);
//   - burst: 40 batches of 25 children enqueued at once (the callbacks queue behind children).
//
// On AWS the outbox's stream relay reads the callback's inserted item; the emulator emits no
// stream records for transactions, so here the sweeper sends it, woken by the batch client
// (Config.OnOutbox → outbox.RelayConfig.Wake: "wake"), or on its 1-second poll alone ("poll").
// "wake/shards-8" is "wake" with every batch's children counted on 8 counter shards
// (Spec.CounterShards): its completion reads the 8 shards and their not-succeeded sets first.
// It reports p50, p99 and max in milliseconds.
//
//	go test -run '^$' -bench CompletionLatency -benchtime 1x ./pkg/batch
func BenchmarkCompletionLatency(b *testing.B) {
	for _, load := range []struct {
		name                         string
		producers, batches, children int
	}{{"steady", 8, 25, 10}, {"burst", 40, 1, 25}} {
		for _, mode := range []string{"wake", "poll", "wake/shards-8"} {
			shards := 1
			if mode == "wake/shards-8" {
				shards = 8
			}
			b.Run(load.name+"/"+mode, func(b *testing.B) {
				for range b.N {
					lat := completionLatencies(b, rigOptions{noWake: mode == "poll", relayPoll: time.Second}, load.producers, load.batches, load.children, shards)
					slices.Sort(lat)
					ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
					b.ReportMetric(float64(len(lat)), "batches")
					b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
					b.ReportMetric(ms(lat[(len(lat)*99+99)/100-1]), "p99-ms")
					b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
				}
			})
		}
	}
}

// completionLatencies runs producers × batches batches of children each on shards counter shards
// (each producer enqueues its next batch once the callback of its last one started) and returns
// each batch's completion latency.
func completionLatencies(tb testing.TB, o rigOptions, producers, batches, children, shards int) []time.Duration {
	r := newRig(tb, o)
	r.start(3, 0)
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			for i := range batches {
				b, err := r.client.Enqueue(r.ctx, r.prod, batch.Spec{Callback: r.callback(fmt.Sprint(p, "-", i)), CounterShards: shards},
					r.thumbs(children, func(int) bool { return false })...)
				if err != nil {
					errs <- err
					return
				}
				var started time.Time
				r.waitFor("the callback of "+b.ID(), 5*time.Minute, func() bool {
					r.mu.Lock()
					defer r.mu.Unlock()
					started = r.cbStarted[b.ID()]
					return !started.IsZero()
				})
				info := r.info(b.ID())
				mu.Lock()
				lat = append(lat, started.Sub(info.DoneAt))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return lat
}
