package batch_test

import (
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// batchUnits is what one batch's phases were billed (write units).
type batchUnits struct {
	start, add, children, done int
	id                         string // the batch's
}

// billBatch builds a batch of n children on shards counter shards (Track: Add's writes, and the
// children are sent once they are billed), runs them on the rig's pollers, seals the batch and
// waits for its callback; it
// returns each phase's write units, read once the ledger billed the phase's last write (as
// TestWriteUnitsPerChild does).
func (r *rig) billBatch(l *awscost.Ledger, shards, n int) batchUnits {
	r.t.Helper()
	var u batchUnits
	before := units(l)
	cb := r.callback("units-" + time.Now().String())
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: cb, CounterShards: shards})
	if err != nil {
		r.t.Fatal(err)
	}
	u.start = units(l) - before
	children := r.thumbs(n, func(int) bool { return false })
	before = units(l)
	tagged, err := b.Track(r.ctx, children...) // Add's writes; the children are sent once billed
	if err != nil {
		r.t.Fatal(err)
	}
	u.add = units(l) - before
	before = units(l)
	r.send(tagged...)
	r.waitFor("the children's writes billed", 2*time.Minute, func() bool {
		if !r.billedState(l, idempotency.StateSucceeded, children...)() {
			return false
		}
		if shards == 1 {
			return attrN(r.image(l, batchItemKey(b.ID())), batchSucceeded) == float64(n)
		}
		ok := 0.0
		for k := range shards {
			if s := attrN(r.image(l, shardItemKey(b.ID(), k)), batchSucceeded); s > 0 {
				ok += s
			}
		}
		return ok == float64(n) && attrN(r.image(l, batchItemKey(b.ID())), batchFull) == 0
	})
	u.children = units(l) - before
	before = units(l)
	if err := b.Seal(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	r.waitFor("the callback's writes and the outbox item's delete billed", time.Minute, func() bool {
		return attrS(r.image(l, batchItemKey(b.ID())), idempotency.AttrState) == batch.StateDone &&
			r.billedState(l, idempotency.StateSucceeded, *cb)() && r.outboxBilledEmpty(l)
	})
	u.done = units(l) - before
	u.id = b.ID()
	return u
}

// TestWriteUnitsPerChildSharded bills, in the same run, a batch of 40 children on 1 counter shard
// (the batch's item) and one on 8, by DynamoDB's rules (transactional writes twice). A child of
// either costs 5: its claim 1, its record 2 and its counter 2 (the batch's, or its shard's). A
// sharded batch pays per shard, not per child: Start puts each shard (2), the count of a chunk
// updates each shard it touches (2) and the batch's busy-shard count, and each shard's last
// child, whose first transaction (the common case: its shard keeps children) is refused, writes
// its shard and the batch's busy-shard count (4) in its second.
func TestWriteUnitsPerChildSharded(t *testing.T) {
	t.Parallel()
	ledger := awscost.NewLedger(map[string]awscost.Schema{})
	r := newRig(t, rigOptions{ledger: ledger})
	const n = 40
	r.start(1, 0)
	one := r.billBatch(ledger, 1, n)
	eight := r.billBatch(ledger, 8, n)
	for _, x := range []struct {
		shards int
		u      batchUnits
	}{{1, one}, {8, eight}} {
		t.Logf("write units, %d counter shards, %d children: start %d, add %d, children %d (%.2f each), seal and callback %d; total %d (%.2f a child)",
			x.shards, n, x.u.start, x.u.add, x.u.children, float64(x.u.children)/n, x.u.done,
			x.u.start+x.u.add+x.u.children+x.u.done, float64(x.u.start+x.u.add+x.u.children+x.u.done)/n)
	}
	busy := 0 // the shards that counted children
	for _, tot := range r.shardTotals(eight.id, 8) {
		if tot > 0 {
			busy++
		}
	}
	if one.children != 5*n {
		t.Errorf("1 shard: the children cost %d units, want %d (5 each)", one.children, 5*n)
	}
	if want := 5*n + 4*busy; eight.children != want {
		t.Errorf("8 shards (%d with children): the children cost %d units, want %d (5 each, 4 more per shard)", busy, eight.children, want)
	}
	if want := one.start + 2*8; eight.start != want {
		t.Errorf("8 shards: Start cost %d units, want %d (2 a shard more)", eight.start, want)
	}
	if want := one.add + 2*busy; eight.add != want {
		t.Errorf("8 shards: Add cost %d units, want %d (2 a shard it counted children on more)", eight.add, want)
	}
	if eight.done != one.done {
		t.Errorf("8 shards: the seal and callback cost %d units, 1 shard %d", eight.done, one.done)
	}
}
