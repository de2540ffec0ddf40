package batch_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// The write-unit tests measure exactly, by construction rather than by timing:
//
//   - they wait on the ledger's images (awscost.Ledger.Item), never on reads of the table: a
//     write is billed after DynamoDB applied it (the Counter reads the item back first), so the
//     table can show a job's new state before the ledger has billed the write that made it. And
//     a transaction's writes are billed one after the other, so they wait for every item the
//     transaction writes (the child's record, the batch's counters, the not-succeeded set);
//   - a baseline is read only while nothing runs: the batch is built (Start, Add) before the
//     pollers start, and each later phase starts once the previous one's last write is billed.
//
// The rig's metered client sends its writes one at a time (serialWrites), so that the ledger
// records the writes of each item in the order DynamoDB applied them.

// units returns the write units billed so far, tables and indexes.
func units(l *awscost.Ledger) int {
	table, ix, _ := l.Totals()
	for _, u := range ix {
		table += u
	}
	return table
}

// image returns the ledger's image of the job table's item pk (nil: none).
func (r *rig) image(l *awscost.Ledger, pk string) map[string]types.AttributeValue {
	r.t.Helper()
	item, _, err := l.Item(r.table, map[string]types.AttributeValue{idempotency.AttrPK: &types.AttributeValueMemberS{Value: pk}})
	if err != nil {
		r.t.Fatal(err)
	}
	return item
}

// billedState returns a condition: the ledger's image of each job's record (the rig's store has
// the default layout) is in state want.
func (r *rig) billedState(l *awscost.Ledger, want idempotency.State, msgs ...producer.Message) func() bool {
	return func() bool {
		for _, m := range msgs {
			if attrS(r.image(l, idempotency.LayoutByID.ItemKey(m.Kind, m.Key, m.ID)), idempotency.AttrState) != string(want) {
				return false
			}
		}
		return true
	}
}

// outboxBilledEmpty reports whether the ledger holds no item of the outbox table: every outbox
// item written so far has had its delete billed.
func (r *rig) outboxBilledEmpty(l *awscost.Ledger) bool {
	return len(l.Items(r.obTable)) == 0
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// attrN returns a number attribute (-1 when absent or not a number).
func attrN(item map[string]types.AttributeValue, name string) float64 {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil {
			return f
		}
	}
	return -1
}

// The batch items' keys and attributes, as docs/TABLE.md ("Batches and chains") lists them.
func batchItemKey(id string) string        { return "batch:" + id }
func notSucceededItemKey(id string) string { return "batch:" + id + ":x" }
func chainItemKey(id string) string        { return "chain:" + id }

const (
	batchSucceeded = "ok"   // N: children counted succeeded
	batchDead      = "dead" // N: children counted dead
	batchIDs       = "ids"  // SS: the not-succeeded set's ids
)

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

	// The batch is built while no poller runs: Start and Add are the only writers.
	cb := r.callback("units")
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: cb})
	if err != nil {
		t.Fatal(err)
	}
	start := units(ledger)
	children := r.thumbs(n, never)
	if err := b.Add(r.ctx, r.prod, children...); err != nil {
		t.Fatal(err)
	}
	add := units(ledger) - start

	// The children run. Each one's transaction writes its record, then the batch's counters:
	// once the ledger's image of the batch counts them all, every child's writes are billed.
	r.start(1, 0)
	r.waitFor("the children's writes billed", time.Minute, func() bool {
		return r.billedState(ledger, idempotency.StateSucceeded, children...)() &&
			attrN(r.image(ledger, batchItemKey(b.ID())), batchSucceeded) == n
	})
	run := units(ledger) - start - add

	// Every child finished: the seal completes the batch, its callback goes through the outbox.
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the callback's writes and the outbox item's delete billed", time.Minute, func() bool {
		return attrS(r.image(ledger, batchItemKey(b.ID())), idempotency.AttrState) == batch.StateDone &&
			r.billedState(ledger, idempotency.StateSucceeded, *cb)() && r.outboxBilledEmpty(ledger)
	})
	done := units(ledger) - start - add - run

	// Plain jobs, in a phase of their own: the batch's last write is billed.
	before := units(ledger)
	plain := r.thumbs(n, never)
	r.send(plain...)
	r.waitFor("the plain jobs' writes billed", time.Minute, r.billedState(ledger, idempotency.StateSucceeded, plain...))
	base := units(ledger) - before

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
	always := func(int) bool { return true }

	// The batch is built while no poller runs.
	b, err := r.client.Start(r.ctx, batch.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	child := r.thumbs(1, always)
	if err := b.Add(r.ctx, r.prod, child...); err != nil {
		t.Fatal(err)
	}
	built := units(ledger)

	// The child fails its only attempt: one transaction makes its record dead, counts it dead
	// and adds it to the not-succeeded set.
	r.start(1, 0)
	r.waitFor("the dead child's writes billed", time.Minute, func() bool {
		return r.billedState(ledger, idempotency.StateDead, child...)() &&
			attrN(r.image(ledger, batchItemKey(b.ID())), batchDead) == 1 &&
			slices.Contains(setS(r.image(ledger, notSucceededItemKey(b.ID())), batchIDs), child[0].ID)
	})
	dead := units(ledger) - built

	before := units(ledger)
	plain := r.thumbs(1, always)
	r.send(plain...)
	r.waitFor("the plain dead job's writes billed", time.Minute, r.billedState(ledger, idempotency.StateDead, plain...))
	base := units(ledger) - before

	before = units(ledger)
	steps := make([]Step, 2)
	var plainSteps []producer.Message
	for _, s := range steps {
		m, err := r.prod.Prepare(r.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		r.send(m)
		plainSteps = append(plainSteps, m)
	}
	r.waitFor("the plain steps' writes billed", time.Minute, r.billedState(ledger, idempotency.StateSucceeded, plainSteps...))
	plainTwo := units(ledger) - before

	before = units(ledger)
	var msgs []producer.Message
	for _, s := range steps {
		m, err := r.prod.Prepare(r.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	id, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	// The last step's transaction writes its record, then the chain's item; each step went
	// through the outbox, whose items the relay deletes once sent.
	r.waitFor("the chain's writes billed", time.Minute, func() bool {
		return r.billedState(ledger, idempotency.StateSucceeded, msgs...)() &&
			attrS(r.image(ledger, chainItemKey(id)), idempotency.AttrState) == batch.ChainSucceeded &&
			r.outboxBilledEmpty(ledger)
	})
	chain := units(ledger) - before
	t.Logf("write units: a dead job %d, a dead child %d; 2 jobs %d, a chain of 2 steps %d (start included)", base, dead, plainTwo, chain)
	// The dead child: its record 1 → 2 (transactional), the counter 2, the not-succeeded set 2.
	if dead-base != 5 {
		t.Errorf("a dead child costs %d more than a dead job, want 5 (its record's, the counter's and the not-succeeded set's transactional writes)", dead-base)
	}
	if chain < 2*plainTwo {
		t.Errorf("a chain of 2 steps: %d units; 2 jobs in no chain: %d", chain, plainTwo)
	}
}

func setS(item map[string]types.AttributeValue, name string) []string {
	if v, ok := item[name].(*types.AttributeValueMemberSS); ok {
		return v.Value
	}
	return nil
}
