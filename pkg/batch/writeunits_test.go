package batch_test

import (
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// units returns the write units billed so far, tables and indexes.
func units(l *awscost.Ledger) int {
	table, ix, _ := l.Totals()
	for _, u := range ix {
		table += u
	}
	return table
}

// TestWriteUnitsPerChild bills, by DynamoDB's rules (transactional writes twice), what a batch
// child costs against a job in no batch, in the same run on the embedded emulator: the jobs run
// through the worker, the middleware and the batch Store. A job in no batch costs 2 (claim,
// finish). A child costs its claim (1) and its finishing transaction: its record (2) and the
// batch's counters (2): 5, 3 more. The batch's own writes (create, count, seal, the completion
// with its callback through the outbox, the callback job) are per batch, not per child.
func TestWriteUnitsPerChild(t *testing.T) {
	t.Parallel()
	ledger := awscost.NewLedger(map[string]awscost.Schema{})
	r := newRig(t, rigOptions{ledger: ledger})
	const n = 10
	never := func(int) bool { return false }
	r.start(1, 0)
	succeeded := func(ids ...string) func() bool {
		return func() bool {
			for _, id := range ids {
				if j, err := r.status.GetByID(r.ctx, id); err != nil || j.State != idempotency.StateSucceeded {
					return false
				}
			}
			return true
		}
	}
	plain := r.thumbs(n, never)
	var ids []string
	for _, m := range plain {
		ids = append(ids, m.ID)
	}
	r.send(plain...)
	r.waitFor("the plain jobs", time.Minute, succeeded(ids...))
	base := r.billed(ledger)

	cb := r.callback("units")
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: cb})
	if err != nil {
		t.Fatal(err)
	}
	start := r.billed(ledger) - base
	// Counted (Add's transaction) and billed before they are sent, so that no child's run is
	// billed as the add.
	children, err := b.Track(r.ctx, r.thumbs(n, never)...)
	if err != nil {
		t.Fatal(err)
	}
	add := r.billed(ledger) - base - start
	r.send(children...)
	ids = ids[:0]
	for _, m := range children {
		ids = append(ids, m.ID)
	}
	r.waitFor("the children", time.Minute, succeeded(ids...))
	run := r.billed(ledger) - base - start - add
	if err := b.Seal(r.ctx); err != nil { // every child finished: the seal completes the batch
		t.Fatal(err)
	}
	r.waitFor("the callback", time.Minute, succeeded(cb.ID))
	r.waitFor("the outbox's callback item deleted", time.Minute, func() bool {
		_, err := r.ob.Get(r.ctx, cb.ID)
		return err != nil
	})
	done := r.billed(ledger) - base - start - add - run
	t.Logf("write units: %d plain jobs %d (%.1f each); batch of %d: start %d, add %d, children %d (%.1f each), seal and callback %d",
		n, base, float64(base)/n, n, start, add, run, float64(run)/n, done)
	if base != 2*n {
		t.Errorf("plain jobs: %d units, want %d (2 each)", base, 2*n)
	}
	if run != 5*n {
		t.Errorf("children: %d units, want %d (5 each: claim 1, transaction 2 + 2)", run, 5*n)
	}
}

// TestWriteUnitsDeadChildAndChain bills a child dead-lettered on its only attempt against a job in
// no batch that is (3: claim, finish, its by_status entry), and a chain of 2 steps against 2 jobs
// in no chain, in the same run (the chain's numbers are logged for docs/BATCHES.md).
func TestWriteUnitsDeadChildAndChain(t *testing.T) {
	t.Parallel()
	ledger := awscost.NewLedger(map[string]awscost.Schema{})
	r := newRig(t, rigOptions{ledger: ledger, maxAttempts: 1})
	r.start(1, 0)
	state := func(want idempotency.State, ids ...string) func() bool {
		return func() bool {
			for _, id := range ids {
				if j, err := r.status.GetByID(r.ctx, id); err != nil || j.State != want {
					return false
				}
			}
			return true
		}
	}
	always := func(int) bool { return true }
	plain := r.thumbs(1, always)
	r.send(plain...)
	r.waitFor("the plain dead job", time.Minute, state(idempotency.StateDead, plain[0].ID))
	base := r.billed(ledger)

	b, err := r.client.Start(r.ctx, batch.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	child, err := b.Track(r.ctx, r.thumbs(1, always)...)
	if err != nil {
		t.Fatal(err)
	}
	built := r.billed(ledger)
	r.send(child...)
	r.waitFor("the dead child", time.Minute, state(idempotency.StateDead, child[0].ID))
	dead := r.billed(ledger) - built

	before := r.billed(ledger)
	steps := make([]Step, 2)
	var plainSteps, chainSteps []string
	for _, s := range steps {
		m, err := r.prod.Prepare(r.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		r.send(m)
		plainSteps = append(plainSteps, m.ID)
	}
	r.waitFor("the plain steps", time.Minute, state(idempotency.StateSucceeded, plainSteps...))
	plainTwo := r.billed(ledger) - before
	before = r.billed(ledger)
	var msgs []producer.Message
	for _, s := range steps {
		m, err := r.prod.Prepare(r.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		chainSteps = append(chainSteps, m.ID)
	}
	id, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor("the chain", time.Minute, func() bool {
		d, err := r.client.GetChain(r.ctx, id)
		return err == nil && d.State == batch.ChainSucceeded
	})
	r.waitFor("the chain's last outbox item deleted", time.Minute, func() bool {
		_, err := r.ob.Get(r.ctx, chainSteps[1])
		return err != nil
	})
	chain := r.billed(ledger) - before
	t.Logf("write units: a dead job %d, a dead child %d; 2 jobs %d, a chain of 2 steps %d (start included)", base, dead, plainTwo, chain)
	// The dead child: its record 1 → 2 (transactional), the counter 2, the not-succeeded set 2.
	if dead-base != 5 {
		t.Errorf("a dead child costs %d more than a dead job, want 5 (its record's, the counter's and the not-succeeded set's transactional writes)", dead-base)
	}
	if chain < 2*plainTwo {
		t.Errorf("a chain of 2 steps: %d units; 2 jobs in no chain: %d", chain, plainTwo)
	}
}
