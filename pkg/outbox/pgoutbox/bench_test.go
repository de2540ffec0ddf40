package pgoutbox_test

// Measurements of docs/BENCHMARKS.md ("The PostgreSQL outbox"). They run on a second, durable
// cluster (fsync and synchronous commit on), and report their numbers with b.ReportMetric; b.N
// is the number of jobs, so run them with -benchtime Nx:
//
//	go test -run '^$' -bench 'Outbox' -benchtime 2000x ./pkg/outbox/pgoutbox
//	go test -run '^$' -bench 'OutboxTableSize' -benchtime 100000x ./pkg/outbox/pgoutbox

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/internal/testenv/pgtest"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// benchOutbox returns a migrated outbox on a fresh database of the durable cluster.
func benchOutbox(b *testing.B, api producer.SQSAPI, url string, cfg pgoutbox.Config) (*pgoutbox.Outbox, *sql.DB, string, *producer.Producer) {
	b.Helper()
	srv := pgtest.DurableServer(b)
	dsn, err := srv.CreateDatabase(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	db := openDB(b, dsn)
	p := newProducer(b, api, url)
	cfg.DB, cfg.Producer = db, p
	o, err := pgoutbox.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := o.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return o, db, dsn, p
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// BenchmarkOutboxCommitToSQS: one job per transaction, a commit every 10 ms, one relay; the
// latency is from the commit's return to SendMessageBatch's (the emulator's) answer.
func BenchmarkOutboxCommitToSQS(b *testing.B) {
	for _, tc := range []struct {
		name     string
		notify   bool
		interval time.Duration
	}{
		{"notify", true, time.Second},
		{"poll-100ms", false, 100 * time.Millisecond},
		{"poll-1s", false, time.Second},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client, stack := emulatorQueue(b, false)
			api := &countingSQS{next: client}
			o, db, dsn, p := benchOutbox(b, api, stack.QueueURL, pgoutbox.Config{NoNotify: !tc.notify})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			ready := make(chan struct{})
			go func() {
				defer close(done)
				_ = pgxoutbox.RunRelay(ctx, pgxoutbox.RunConfig{Outbox: o, ConnString: dsn, PollOnly: !tc.notify, OnReady: func() { close(ready) },
					Relay: outbox.RelayConfig{Producers: []*producer.Producer{p}, PollInterval: tc.interval, Logger: quiet()}})
			}()
			<-ready
			committed := make(map[string]time.Time, b.N)
			b.ResetTimer()
			tick := time.NewTicker(10 * time.Millisecond)
			for i := 0; i < b.N; i++ {
				<-tick.C
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				m, err := o.EnqueueTx(ctx, tx, orderArgs{Order: "o", N: i})
				if err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				committed[m.ID] = time.Now()
			}
			tick.Stop()
			waitFor(b, "every job sent", func() bool { return len(api.sent()) >= b.N })
			b.StopTimer()
			cancel()
			<-done
			var lat []time.Duration
			for _, s := range api.sent() {
				lat = append(lat, s.At.Sub(committed[s.JobID]))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(api.calls.Load())/float64(b.N), "requests/job")
		})
	}
}

// BenchmarkOutboxEnqueueTx: what EnqueueTx costs the business transaction. Four writers commit
// b.N transactions of one job each (BEGIN, EnqueueTx, COMMIT) on a standard queue, on a FIFO
// queue with a group per writer (its advisory lock never waits), and on a FIFO queue with one
// group for all (each writer waits for the open transaction before it: the writers serialize).
func BenchmarkOutboxEnqueueTx(b *testing.B) {
	for _, tc := range []struct {
		name  string
		url   string
		group func(writer int) string
	}{
		{"standard", stdURL, nil},
		{"fifo-group-per-writer", fifoURL, func(w int) string { return fmt.Sprintf("g%d", w) }},
		{"fifo-one-group", fifoURL, func(int) string { return "g" }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o, db, _, _ := benchOutbox(b, &countingSQS{}, tc.url, pgoutbox.Config{})
			const writers = 4
			var next sync.Mutex
			n := 0
			take := func() bool {
				next.Lock()
				defer next.Unlock()
				n++
				return n <= b.N
			}
			var wg sync.WaitGroup
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				wg.Go(func() {
					var opts []producer.Option
					if tc.group != nil {
						opts = append(opts, producer.WithGroupID(tc.group(w)))
					}
					for take() {
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := o.EnqueueTx(ctx, tx, orderArgs{Order: "o"}, opts...); err != nil {
							_ = tx.Rollback()
							b.Error(err)
							return
						}
						if err := tx.Commit(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tx/s")
			b.ReportMetric(float64(elapsed.Microseconds())*writers/float64(b.N)/1000, "ms/tx")
		})
	}
}

// BenchmarkOutboxRelayThroughput: b.N committed rows, drained by 1 or 4 relays (batches of
// 100), into a counting fake SQS (the outbox's own rate) or the embedded emulator.
func BenchmarkOutboxRelayThroughput(b *testing.B) {
	for _, sqsKind := range []string{"fake", "emulator"} {
		for _, relays := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/relays-%d", sqsKind, relays), func(b *testing.B) {
				api := &countingSQS{}
				url := stdURL
				if sqsKind == "emulator" {
					client, stack := emulatorQueue(b, false)
					api.next, url = client, stack.QueueURL
				}
				o, db, _, p := benchOutbox(b, api, url, pgoutbox.Config{NoNotify: true})
				for i := 0; i < b.N; i += 1000 {
					var reqs []producer.Request
					for k := i; k < min(i+1000, b.N); k++ {
						reqs = append(reqs, producer.Request{Args: orderArgs{Order: "o", N: k}})
					}
					inTx(b, db, func(tx *sql.Tx) error { _, err := o.EnqueueBatchTx(context.Background(), tx, reqs); return err })
				}
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for i := range relays {
					r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, ID: fmt.Sprint("r", i), Logger: quiet()})
					if err != nil {
						b.Fatal(err)
					}
					wg.Go(func() {
						for rowCount(b, db, o) > 0 {
							if _, err := r.Drain(context.Background()); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if n := len(api.sent()); n != b.N {
					b.Fatalf("sent %d of %d", n, b.N)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
				b.ReportMetric(float64(api.calls.Load())/float64(b.N), "requests/job")
			})
		}
	}
}

// BenchmarkOutboxTableSize: b.N jobs go through the outbox twice (a writer commits 100 per
// transaction while two relays, woken by NOTIFY, send them); the table's size (heap, indexes
// and TOAST) at its largest during the first burst and after autovacuum's pass that follows
// each burst (autovacuum_naptime is PostgreSQL's default minute), against the size of b.N rows
// pending. A table that bloated from sent rows would grow from one burst to the next.
func BenchmarkOutboxTableSize(b *testing.B) {
	api := &countingSQS{}
	o, db, dsn, p := benchOutbox(b, api, stdURL, pgoutbox.Config{})
	size := func() float64 {
		var n int64
		if err := db.QueryRow(`SELECT pg_total_relation_size($1)`, o.Table()).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return float64(n)
	}
	lastVacuum := func() time.Time {
		var t sql.NullTime
		if err := db.QueryRow(`SELECT last_autovacuum FROM pg_stat_user_tables WHERE relid = $1::regclass`, o.Table()).Scan(&t); err != nil {
			b.Fatal(err)
		}
		return t.Time
	}
	deadTuples := func() int64 {
		var n int64
		if err := db.QueryRow(`SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass`, o.Table()).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_ = pgxoutbox.RunRelay(ctx, pgxoutbox.RunConfig{Outbox: o, ConnString: dsn,
				Relay: outbox.RelayConfig{Producers: []*producer.Producer{p}, PollInterval: 100 * time.Millisecond, Logger: quiet()}})
		})
	}
	peak := 0.0
	burst := func(round int) float64 {
		before := lastVacuum()
		for i := 0; i < b.N; i += 100 {
			var reqs []producer.Request
			for k := i; k < min(i+100, b.N); k++ {
				reqs = append(reqs, producer.Request{Args: orderArgs{Order: "o", N: k}})
			}
			inTx(b, db, func(tx *sql.Tx) error { _, err := o.EnqueueBatchTx(ctx, tx, reqs); return err })
			if i%5000 == 0 {
				peak = max(peak, size())
			}
		}
		for deadline := time.Now().Add(5 * time.Minute); rowCount(b, db, o) > 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("burst %d: %d rows left after 5 minutes, %d entries sent", round, rowCount(b, db, o), api.entries.Load())
			}
		}
		peak = max(peak, size())
		drainedAt := time.Now()
		_ = before
		// Wait for an autovacuum that ends after the drain and leaves no dead row. Below
		// autovacuum's threshold (500 + 1 % of the rows) there is nothing to wait for.
		for deadline := time.Now().Add(3 * time.Minute); b.N >= 10000 && (!lastVacuum().After(drainedAt) || deadTuples() > 0); {
			if time.Now().After(deadline) {
				b.Fatalf("no autovacuum of %s within 3 minutes of burst %d", o.Table(), round)
			}
			time.Sleep(time.Second)
		}
		rows, err := db.Query(`SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c WHERE c.relname LIKE 'sqsworker_outbox%' AND c.relkind IN ('r', 'i') ORDER BY 1`)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var name string
			var n int64
			_ = rows.Scan(&name, &n)
			if b.N >= 10000 {
				fmt.Fprintf(os.Stderr, "burst %d: %s %d KiB\n", round, name, n/1024)
			}
		}
		rows.Close()
		return size()
	}
	b.ResetTimer()
	first := burst(1)
	b.StopTimer()
	second := burst(2)
	third := burst(3)
	fourth := burst(4)
	b.ReportMetric(third/1024, "after-burst-3-KiB")
	b.ReportMetric(fourth/1024, "after-burst-4-KiB")
	cancel()
	wg.Wait()
	// For comparison: the same number of rows, pending.
	pendingOutbox, pdb, _, _ := benchOutbox(b, api, stdURL, pgoutbox.Config{NoNotify: true})
	for i := 0; i < b.N; i += 1000 {
		var reqs []producer.Request
		for k := i; k < min(i+1000, b.N); k++ {
			reqs = append(reqs, producer.Request{Args: orderArgs{Order: "o", N: k}})
		}
		inTx(b, pdb, func(tx *sql.Tx) error {
			_, err := pendingOutbox.EnqueueBatchTx(context.Background(), tx, reqs)
			return err
		})
	}
	var pending int64
	if err := pdb.QueryRow(`SELECT pg_total_relation_size($1)`, pendingOutbox.Table()).Scan(&pending); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(peak/1024, "peak-KiB")
	b.ReportMetric(first/1024, "after-burst-1-KiB")
	b.ReportMetric(second/1024, "after-burst-2-KiB")
	b.ReportMetric(float64(pending)/1024, "all-pending-KiB")
	b.ReportMetric(float64(api.calls.Load())/float64(4*b.N), "requests/job")
}
