package pgoutbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// enqueue commits n jobs (one transaction per batch of at most 500) and returns their ids.
func enqueue(t testing.TB, db *sql.DB, o *pgoutbox.Outbox, n int, opts ...producer.Option) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i += 500 {
		var reqs []producer.Request
		for k := i; k < min(i+500, n); k++ {
			reqs = append(reqs, producer.Request{Args: orderArgs{Order: "o", N: k}, Options: opts})
		}
		inTx(t, db, func(tx *sql.Tx) error {
			msgs, err := o.EnqueueBatchTx(context.Background(), tx, reqs)
			for _, m := range msgs {
				ids = append(ids, m.ID)
			}
			return err
		})
	}
	return ids
}

// A relay killed after SQS accepted its batch and before it deleted the rows: once the lease
// has passed, another relay sends the same jobs again, with the same job ids, and the rows go.
func TestRelayKilledAfterSendResendsTheSameJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, stack := emulatorQueue(t, false)
	p := newProducer(t, client, stack.QueueURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	ids := enqueue(t, db, o, 30)

	killed, err := outbox.NewRelay(outbox.RelayConfig{Store: &stallingStore{Store: o, drop: true}, Producers: []*producer.Producer{p},
		ID: "killed", Lease: 30 * time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := killed.RunOnce(ctx)
	if st.Sent != 30 || err == nil {
		t.Fatalf("the killed relay: %+v, %v; want 30 sent and a failed write-back", st, err)
	}
	// Inside the lease nobody else takes the rows.
	other := func(now func() time.Time) *outbox.Relay {
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, ID: "survivor",
			Lease: 30 * time.Second, Now: now, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if st, err := other(time.Now).Drain(ctx); err != nil || st.Claimed != 0 {
		t.Fatalf("a relay inside the killed relay's lease: %+v, %v; want nothing claimed", st, err)
	}
	later := func() time.Time { return time.Now().Add(31 * time.Second) }
	if st, err := other(later).Drain(ctx); err != nil || st.Sent != 30 {
		t.Fatalf("after the lease: %+v, %v; want the 30 sent again", st, err)
	}
	if n := rowCount(t, db, o); n != 0 {
		t.Errorf("%d rows left", n)
	}
	seen, order := received(t, client, stack.QueueURL, 60, 60*time.Second)
	if len(order) != 60 {
		t.Fatalf("received %d messages, want 60 (30 jobs twice)", len(order))
	}
	for _, id := range ids {
		if seen[id] != 2 {
			t.Errorf("job %s arrived %d times, want twice with the same id", id, seen[id])
		}
	}
}

// Four relays over 10,000 rows at once: every row is sent, none twice (no relay crashed), the
// table is empty, and every relay took part. SQS is a counting fake here: the property is the
// claim's exclusivity, which the fake observes exactly at the API boundary (every entry of every
// SendMessageBatch), and it keeps the test to seconds; the emulator tests above and below cover
// the real send path. That each relay claims rows is made certain without timing: each relay's
// first claim waits until all four have reached theirs (claimBarrier), and four concurrent
// claims of 100 over 10,000 due rows each get rows (SKIP LOCKED passes over the others' rows);
// the claims per relay are counted and must sum to the 10,000 rows.
func TestFourRelaysTenThousandRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &countingSQS{}
	p := newProducer(t, api, "https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	const n = 10_000
	ids := enqueue(t, db, o, n)
	var wg sync.WaitGroup
	var total atomic.Int64
	const relays = 4
	barrier := newClaimBarrier(o, relays)
	for i := range relays {
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: barrier, Producers: []*producer.Producer{p}, ID: fmt.Sprintf("relay-%d", i), Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			// Drain ends at a pass that claims nothing, which a relay may meet while the others
			// hold the last rows: run it until the outbox is empty.
			for rowCount(t, db, o) > 0 {
				st, err := r.Drain(ctx)
				if err != nil {
					t.Errorf("relay %d: %v", i, err)
					return
				}
				total.Add(int64(st.Sent))
			}
		})
	}
	wg.Wait()
	counts := map[string]int{}
	for _, s := range api.sent() {
		counts[s.JobID]++
	}
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("job %s sent %d times", id, counts[id])
		}
	}
	if len(counts) != n || total.Load() != n {
		t.Errorf("%d distinct jobs sent, relays counted %d; want %d", len(counts), total.Load(), n)
	}
	if left := rowCount(t, db, o); left != 0 {
		t.Errorf("%d rows left", left)
	}
	claimed := barrier.claimedBy()
	sum := 0
	for i := range relays {
		id := fmt.Sprintf("relay-%d", i)
		if claimed[id] == 0 {
			t.Errorf("%s claimed nothing: %v", id, claimed)
		}
		sum += claimed[id]
	}
	if sum != n || len(claimed) != relays {
		t.Errorf("claims %v add up to %d, want %d by the %d relays", claimed, sum, n, relays)
	}
	t.Logf("%d SendMessageBatch requests for %d jobs (%.3f per job); rows claimed per relay %v", api.calls.Load(), n, float64(api.calls.Load())/n, claimed)
}

// claimBarrier is a Store whose first Claim of each owner waits until n owners have made
// theirs (or a minute passed: a relay that never claims then shows in the counts instead of
// hanging the test), and which counts the entries each owner claimed.
type claimBarrier struct {
	outbox.Store
	arrived sync.WaitGroup
	all     chan struct{}
	mu      sync.Mutex
	claimed map[string]int
}

func newClaimBarrier(s outbox.Store, n int) *claimBarrier {
	b := &claimBarrier{Store: s, claimed: map[string]int{}, all: make(chan struct{})}
	b.arrived.Add(n)
	go func() {
		b.arrived.Wait()
		close(b.all)
	}()
	return b
}

func (b *claimBarrier) Claim(ctx context.Context, c outbox.Claim) ([]outbox.Entry, error) {
	b.mu.Lock()
	_, seen := b.claimed[c.Owner]
	if !seen {
		b.claimed[c.Owner] = 0
	}
	b.mu.Unlock()
	if !seen {
		b.arrived.Done()
		select {
		case <-b.all:
		case <-time.After(time.Minute):
		}
	}
	entries, err := b.Store.Claim(ctx, c)
	b.mu.Lock()
	b.claimed[c.Owner] += len(entries)
	b.mu.Unlock()
	return entries, err
}

func (b *claimBarrier) claimedBy() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.claimed)
}

// A relay paused past its lease: another relay takes the rows over, and the paused relay's late
// write-back (its batch was sent: delete) does not undo the other's work (its failure, kept
// for a retry).
func TestLeaseExpiryTakeOverAndLateWriteBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	accepts, rejects := &countingSQS{}, &countingSQS{reject: func(string) bool { return true }}
	const url = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: newProducer(t, accepts, url)})
	ids := enqueue(t, db, o, 5)
	t0 := time.Now()
	paused := &stallingStore{Store: o, hold: make(chan struct{}), holding: make(chan struct{})}
	a, err := outbox.NewRelay(outbox.RelayConfig{Store: paused, Producers: []*producer.Producer{newProducer(t, accepts, url)}, ID: "a",
		Lease: 30 * time.Second, Now: func() time.Time { return t0 }, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{newProducer(t, rejects, url)}, ID: "b",
		Lease: 30 * time.Second, Now: func() time.Time { return t0.Add(31 * time.Second) }, Backoff: constBackoff(time.Hour), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.RunOnce(ctx)
		done <- err
	}()
	<-paused.holding // a has sent its batch and is paused before the write-back
	st, err := b.RunOnce(ctx)
	if err != nil || st.Claimed != 5 || st.Failed != 5 {
		t.Fatalf("b: %+v, %v; want the 5 rows taken over and failed", st, err)
	}
	close(paused.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		e, err := o.Get(ctx, id)
		if err != nil {
			t.Fatalf("row %s is gone: a's late write-back deleted the row b had taken over (%v)", id, err)
		}
		if e.Attempts != 2 || e.LastError == "" || !strings.Contains(e.LastError, "rejected by the test") || e.LockedBy != "" ||
			!e.AvailableAt.After(t0.Add(time.Minute)) {
			t.Errorf("row %s after a's late write-back: %+v; want b's failure kept", id, e)
		}
	}
}

// FIFO order per group under concurrency: four writers commit rows to eight groups at once
// (each transaction adds a row to two groups picked at random, so writers overlap on the same
// groups) while four relays claim and send them through a link that fails a fifth of the
// entries (a failed entry waits for its retry, and its group waits with it). Each group reaches
// SQS — the emulator's FIFO queue — in commit order, every row once. The commit order is
// recorded by the writers themselves: after EnqueueBatchTx each transaction increments its
// groups' counters (a row lock held until its commit), so a group's counter values are its
// commit order.
func TestFIFOOrderUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, stack := emulatorQueue(t, true)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	flaky := &countingSQS{next: client, reject: func(string) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(5) == 0
	}}
	p := newProducer(t, flaky, stack.QueueURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	const groups, writers, txPerWriter = 8, 4, 30
	for _, q := range []string{`CREATE TABLE group_commits (g text PRIMARY KEY, n integer NOT NULL DEFAULT 0)`,
		`CREATE TABLE commit_order (job_id text PRIMARY KEY, g text NOT NULL, n integer NOT NULL)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for g := range groups {
		if _, err := db.Exec(`INSERT INTO group_commits (g) VALUES ($1)`, fmt.Sprintf("g%d", g)); err != nil {
			t.Fatal(err)
		}
	}
	rctx, stop := context.WithCancel(ctx)
	var relays sync.WaitGroup
	for i := range 4 {
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, ID: fmt.Sprintf("relay-%d", i),
			BatchSize: 25, PollInterval: 10 * time.Millisecond, Backoff: constBackoff(20 * time.Millisecond), MaxAttempts: 1000, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		relays.Go(func() { _ = r.Run(rctx) })
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			pick := rand.New(rand.NewPCG(uint64(w), 7))
			for n := range txPerWriter {
				a, b := pick.IntN(groups), pick.IntN(groups-1)
				if b >= a {
					b++
				}
				pair := []string{fmt.Sprintf("g%d", min(a, b)), fmt.Sprintf("g%d", max(a, b))}
				inTx(t, db, func(tx *sql.Tx) error {
					var reqs []producer.Request
					for _, group := range pair {
						reqs = append(reqs, producer.Request{Args: orderArgs{Order: fmt.Sprintf("w%d-%d", w, n), Group: group},
							Options: []producer.Option{producer.WithGroupID(group)}})
					}
					msgs, err := o.EnqueueBatchTx(ctx, tx, reqs)
					if err != nil {
						return err
					}
					for i, group := range pair {
						var seq int
						if err := tx.QueryRowContext(ctx, `UPDATE group_commits SET n = n + 1 WHERE g = $1 RETURNING n`, group).Scan(&seq); err != nil {
							return err
						}
						if _, err := tx.ExecContext(ctx, `INSERT INTO commit_order VALUES ($1, $2, $3)`, msgs[i].ID, group, seq); err != nil {
							return err
						}
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	waitFor(t, "the relays to empty the outbox", func() bool { return rowCount(t, db, o) == 0 })
	stop()
	relays.Wait()

	type commit struct {
		group string
		n     int
	}
	commits := map[string]commit{}
	total := map[string]int{}
	rows, err := db.Query(`SELECT job_id, g, n FROM commit_order`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var c commit
		if err := rows.Scan(&id, &c.group, &c.n); err != nil {
			t.Fatal(err)
		}
		commits[id] = c
		total[c.group]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(commits) != writers*txPerWriter*2 {
		t.Fatalf("%d commits recorded, want %d", len(commits), writers*txPerWriter*2)
	}
	checkOrder := func(what string, ids []string) {
		t.Helper()
		next := map[string]int{}
		for _, id := range ids {
			c, ok := commits[id]
			if !ok {
				t.Errorf("%s: job %s was never committed", what, id)
				continue
			}
			if c.n != next[c.group]+1 {
				t.Errorf("%s: group %s got its commit %d after %d", what, c.group, c.n, next[c.group])
			}
			next[c.group] = c.n
		}
		for group, n := range total {
			if next[group] != n {
				t.Errorf("%s: group %s ended at commit %d, want %d", what, group, next[group], n)
			}
		}
	}
	var sentIDs []string
	for _, s := range flaky.sent() {
		sentIDs = append(sentIDs, s.JobID)
	}
	checkOrder("sent", sentIDs)
	_, order := received(t, client, stack.QueueURL, len(commits), 60*time.Second)
	var recvIDs []string
	for _, env := range order {
		recvIDs = append(recvIDs, env.ID)
	}
	checkOrder("received", recvIDs)
	t.Logf("%d entries rejected on the way; rows per group %v", int(flaky.entries.Load())-len(flaky.sent()), total)
}

func argsOf(t testing.TB, env jobs.Envelope) orderArgs {
	t.Helper()
	var a orderArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// A poison row (SQS rejects it every time) is dead after MaxAttempts and holds back only its
// own group: the other group is sent at once, and the poison's successor once it is dead. A
// person's Retry sends it when SQS accepts it again.
func TestPoisonRowIsDeadAndBlocksOnlyItsGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, stack := emulatorQueue(t, true)
	api := &countingSQS{next: client, reject: func(body string) bool { return strings.Contains(body, "poison") }}
	p := newProducer(t, api, stack.QueueURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	job := func(order, group string) producer.Request {
		return producer.Request{Args: orderArgs{Order: order, Group: group}, Options: []producer.Option{producer.WithGroupID(group)}}
	}
	var msgs []producer.Message
	inTx(t, db, func(tx *sql.Tx) error {
		var err error
		msgs, err = o.EnqueueBatchTx(ctx, tx, []producer.Request{job("poison", "bad"), job("good-0", "good"), job("second-bad", "bad"),
			job("good-1", "good"), job("good-2", "good")})
		return err
	})
	poison, after := msgs[0].ID, msgs[2].ID
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, MaxAttempts: 3,
		Backoff: constBackoff(50 * time.Millisecond), PollInterval: 10 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = r.Run(rctx) }()
	waitFor(t, "the poison row to die and the rest to be sent", func() bool { return rowCount(t, db, o) == 1 })
	e, err := o.Get(ctx, poison)
	if err != nil || e.State != outbox.StateDead || e.Attempts != 3 || !strings.Contains(e.LastError, "rejected by the test") {
		t.Fatalf("poison row: %+v, %v; want dead after 3 attempts with SQS's error", e, err)
	}
	rejected := api.rejections(poison)
	if len(rejected) != 3 {
		t.Fatalf("SQS saw the poison %d times, want 3", len(rejected))
	}
	for _, s := range api.sent() {
		switch {
		case s.JobID == after && s.Call < rejected[2]:
			t.Errorf("the poison's successor was sent (call %d) before the poison's last attempt (call %d)", s.Call, rejected[2])
		case s.Group == "good" && s.Call > rejected[1]:
			t.Errorf("group good waited for the poison: sent in call %d, after the poison's second attempt (call %d)", s.Call, rejected[1])
		}
	}
	page, err := o.List(ctx, outbox.ListQuery{State: outbox.StateDead})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].ID() != poison {
		t.Fatalf("dead list: %+v, %v", page.Entries, err)
	}
	api.setReject(nil)
	if err := o.Retry(ctx, poison); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retried poison to be sent", func() bool { return rowCount(t, db, o) == 0 })
	seen, order := received(t, client, stack.QueueURL, 5, 60*time.Second)
	if len(order) != 5 || len(seen) != 5 || seen[poison] != 1 {
		t.Errorf("received %v, want the 5 jobs once each", seen)
	}
	// The documented cost of letting a group go on past its dead entry: the retried poison
	// arrives after its successor.
	pos := map[string]int{}
	for i, env := range order {
		pos[env.ID] = i
	}
	if pos[poison] < pos[after] {
		t.Errorf("the retried poison arrived at %d, before its successor (%d): a dead row held its group", pos[poison], pos[after])
	}
}

// A row that other code damaged (attributes the store cannot read) does not stop the claims: it
// is failed with the reason and dead after MaxAttempts, and the other rows are sent.
func TestCorruptRowIsDeadWithTheReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := &countingSQS{}
	p := newProducer(t, api, stdURL)
	o, db, _ := newOutbox(t, pgoutbox.Config{Producer: p})
	ids := enqueue(t, db, o, 3)
	if _, err := db.Exec(`UPDATE `+o.Table()+` SET attributes = '["not", "a", "map"]' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: o, Producers: []*producer.Producer{p}, MaxAttempts: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Drain(ctx)
	if err != nil || st.Sent != 2 || st.Dead != 1 {
		t.Fatalf("Drain = %+v, %v; want 2 sent and the damaged row dead", st, err)
	}
	e, err := o.Get(ctx, ids[1])
	if err != nil || e.State != outbox.StateDead || !strings.Contains(e.LastError, "cannot be read") || !strings.Contains(e.LastError, "attributes column") {
		t.Errorf("damaged row: %+v, %v", e, err)
	}
}
