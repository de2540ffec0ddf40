package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobevents"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// The items of a sharded batch, as docs/TABLE.md ("Batches and chains") lists them.
func shardItemKey(id string, k int) string { return "batch:" + id + ":s:" + strconv.Itoa(k) }

const (
	batchFull      = "full" // N: the batch's shards with unfinished children
	shardTotal     = "tot"  // N: a shard's children
	shardRemaining = "rem"  // N: a shard's unfinished children
)

// raw reads an item of the job table (strongly consistent; nil when there is none).
func (r *rig) raw(pk string) map[string]types.AttributeValue {
	r.t.Helper()
	out, err := r.ddb.GetItem(r.ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{idempotency.AttrPK: &types.AttributeValueMemberS{Value: pk}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return out.Item
}

// shardTotals returns each counter shard's children (tot) of batch id, read from its items.
func (r *rig) shardTotals(id string, n int) []int {
	out := make([]int, n)
	for k := range n {
		out[k] = int(attrN(r.raw(shardItemKey(id, k)), shardTotal))
	}
	return out
}

// TestShardedBatchExactlyOnce is the exactly-once test on a batch of 8 counter shards:
// 400 children, 5 % failing to exhaustion, built in chunks while the children already run, the
// last 100 delivered twice, a share of first deletes dropped (a crash between a child's finishing
// write and its delete), and sealed while children are still running, on three pollers. The
// callback runs exactly once, with the counts summed over the shards and the ids of the children
// that did not succeed; every shard counted children.
func TestShardedBatchExactlyOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	fail := func(i int) bool { return i%20 == 7 }
	children := r.thumbs(400, fail)
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("sharded"), CounterShards: 8})
	if err != nil {
		t.Fatal(err)
	}
	r.start(3, 0.1)
	for lo := 0; lo < 300; lo += 100 {
		if err := b.Add(r.ctx, r.prod, children[lo:lo+100]...); err != nil {
			t.Fatal(err)
		}
	}
	tagged, err := b.Track(r.ctx, children[300:]...)
	if err != nil {
		t.Fatal(err)
	}
	r.send(tagged...)
	r.send(tagged...)                                                // duplicate deliveries
	if err := b.Add(r.ctx, r.prod, children[0:100]...); err != nil { // counted once: its fingerprint
		t.Fatal(err)
	}
	if info := r.info(b.ID()); info.Total != 400 || info.CounterShards != 8 {
		t.Fatalf("batch after the adds: %+v, want 400 children on 8 shards", info)
	}
	if r.cbRuns.Load() != 0 {
		t.Fatal("the callback ran before the seal")
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the callback", 3*time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	info := r.info(b.ID())
	if info.Total != 400 || info.Succeeded != 380 || info.Dead != 20 || info.Cancelled != 0 || info.Remaining != 0 || info.State != batch.StateDone {
		t.Errorf("batch: %+v, want 380 succeeded, 20 dead of 400", info)
	}
	var want []string
	for i, c := range children {
		if fail(i) {
			want = append(want, c.ID)
		}
	}
	sort.Strings(want)
	sums := r.summaries()
	if len(sums) != 1 {
		t.Fatalf("%d callbacks: %+v", len(sums), sums)
	}
	if s := sums[0]; s.Total != 400 || s.Succeeded != 380 || s.Dead != 20 || s.More != 0 || !slices.Equal(s.NotSucceeded, want) {
		t.Errorf("summary %+v, want 380 succeeded, 20 dead %v", s, want)
	}
	totals := r.shardTotals(b.ID(), 8)
	sum := 0
	for k, n := range totals {
		if n == 0 {
			t.Errorf("shard %d counted no child: %v", k, totals)
		}
		sum += n
	}
	if sum != 400 {
		t.Errorf("the shards counted %d children (%v), want 400", sum, totals)
	}
	if full := attrN(r.raw(batchItemKey(b.ID())), batchFull); full != 0 {
		t.Errorf("the done batch has %v busy shards", full)
	}
	// The completion wrote the summed counts on the batch's item: the job table's stream shows
	// them in the batch's completion event (pkg/jobevents).
	rec := events.DynamoDBEventRecord{EventName: "MODIFY"}
	rec.Change.NewImage = dynamooutbox.ToStreamImage(r.raw(batchItemKey(b.ID())))
	rec.Change.OldImage = map[string]events.DynamoDBAttributeValue{idempotency.AttrState: events.NewStringAttribute(batch.StateSealed)}
	if ev, ok, err := jobevents.BatchFromRecord(&rec); err != nil || !ok || ev.Total == nil || *ev.Total != 400 ||
		*ev.Succeeded != 380 || *ev.Dead != 20 || *ev.Cancelled != 0 {
		t.Errorf("the sharded batch's completion event: %+v, %v, %v; want 380 succeeded, 20 dead of 400", ev, ok, err)
	}
	for i, c := range children {
		j, err := r.status.GetByID(r.ctx, c.ID)
		if err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		wantState := idempotency.StateSucceeded
		if fail(i) {
			wantState = idempotency.StateDead
		}
		if j.State != wantState {
			t.Errorf("child %d: %s, want %s", i, j.State, wantState)
		}
		if runs, want := r.runs(i), map[bool]int{false: 1, true: 2}[fail(i)]; runs != want {
			t.Errorf("child %d ran %d times, want %d", i, runs, want)
		}
	}
	if r.crashes.Load() == 0 || r.duplicates() == 0 {
		t.Errorf("crashes %d, duplicate deliveries %d: the test exercised neither", r.crashes.Load(), r.duplicates())
	}
	t.Logf("shards %v; %d deletes dropped, %d duplicate deliveries acknowledged without running", totals, r.crashes.Load(), r.duplicates())
}

// TestShardedSealAfterEveryShardEmptied: the children of an open sharded batch all finish (every
// shard back at 0, the batch counting no busy shard) and the callback does not fire; children
// added then go to shards that were at 0, which count as busy again; once they have finished too,
// the seal completes the batch in its own transaction, and the callback runs once with all of
// them.
func TestShardedSealAfterEveryShardEmptied(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("emptied"), CounterShards: 4})
	if err != nil {
		t.Fatal(err)
	}
	children := r.thumbs(24, func(i int) bool { return i == 3 || i == 20 })
	first, err := b.Track(r.ctx, children[:16]...)
	if err != nil {
		t.Fatal(err)
	}
	if full := attrN(r.raw(batchItemKey(b.ID())), batchFull); full < 1 || full > 4 {
		t.Fatalf("busy shards after the first 16 children: %v", full)
	}
	r.start(2, 0)
	r.send(first...)
	r.waitFor("the first 16 children", 2*time.Minute, func() bool { return r.info(b.ID()).Remaining == 0 })
	for k, n := range r.shardTotals(b.ID(), 4) {
		if rem := attrN(r.raw(shardItemKey(b.ID(), k)), shardRemaining); rem != 0 {
			t.Errorf("shard %d (%d children) has %v unfinished", k, n, rem)
		}
	}
	if full := attrN(r.raw(batchItemKey(b.ID())), batchFull); full != 0 {
		t.Errorf("busy shards once every child finished: %v, want 0", full)
	}
	second, err := b.Track(r.ctx, children[16:]...)
	if err != nil {
		t.Fatal(err)
	}
	busy := 0
	for k := range 4 {
		if attrN(r.raw(shardItemKey(b.ID(), k)), shardRemaining) > 0 {
			busy++
		}
	}
	if full := attrN(r.raw(batchItemKey(b.ID())), batchFull); busy == 0 || full != float64(busy) {
		t.Errorf("after adding 8 children to emptied shards: the batch counts %v busy shards, the shards say %d", full, busy)
	}
	r.send(second...)
	r.waitFor("the other 8 children", 2*time.Minute, func() bool { return r.info(b.ID()).Remaining == 0 })
	if n := r.cbRuns.Load(); n != 0 {
		t.Fatalf("the callback ran %d times before the seal", n)
	}
	if info := r.info(b.ID()); info.State != batch.StateOpen {
		t.Fatalf("batch before the seal: %+v", info)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	// The seal itself completed the batch: done as soon as Seal returns.
	if info := r.info(b.ID()); info.State != batch.StateDone || info.DoneAt.IsZero() || !info.DoneAt.Equal(info.SealedAt) {
		t.Errorf("batch after the seal: %+v, want done by the seal", info)
	}
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	want := []string{children[3].ID, children[20].ID}
	sort.Strings(want)
	sums := r.summaries()
	if len(sums) != 1 || sums[0].Total != 24 || sums[0].Succeeded != 22 || sums[0].Dead != 2 || !slices.Equal(sums[0].NotSucceeded, want) {
		t.Errorf("summaries: %+v, want one with 22 succeeded, 2 dead %v", sums, want)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Errorf("sealing a done batch again: %v", err)
	}
}

// TestShardedRedrive: a dead child of a sharded batch, redriven after the callback ran and then
// succeeding, moves its count from dead to succeeded on its shard (the batch's sums follow, and
// it leaves the not-succeeded ids); the callback is not enqueued again.
func TestShardedRedrive(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	cb := r.callback("sharded-redrive")
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: cb, CounterShards: 4})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(6, func(i int) bool { return i == 1 })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.send(tagged...)
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Succeeded != 5 || s.Dead != 1 || !slices.Equal(s.NotSucceeded, []string{tagged[1].ID}) {
		t.Fatalf("summary: %+v", s)
	}
	r.waitFor("the callback's outbox item deleted", time.Minute, func() bool {
		_, err := r.ob.Get(r.ctx, cb.ID)
		return err != nil
	})
	r.mu.Lock()
	r.failing[1] = false
	r.mu.Unlock()
	if err := r.status.ResetForRedrive(r.ctx, tagged[1].Kind, tagged[1].Key, false); err != nil {
		t.Fatal(err)
	}
	r.send(tagged[1])
	r.waitFor("the redriven child's count", time.Minute, func() bool { return r.info(b.ID()).Succeeded == 6 })
	if _, err := r.ob.Get(r.ctx, cb.ID); err == nil {
		t.Errorf("the callback %s is in the outbox again after the redrive", cb.ID)
	}
	d, err := r.client.Get(r.ctx, b.ID(), -1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Dead != 0 || d.Remaining != 0 || d.Total != 6 || len(d.NotSucceeded) != 0 || d.State != batch.StateDone {
		t.Errorf("batch after the redrive: %+v", d)
	}
	for _, c := range d.Children {
		if c.Counted != "succeeded" {
			t.Errorf("child %s counted %q", c.ID, c.Counted)
		}
	}
	if n := r.cbRuns.Load(); n != 1 {
		t.Errorf("the callback ran %d times", n)
	}
}

// TestShardedCancel: cancelling a sharded batch cancels its unstarted children, each counted on
// its shard; the running one finishes; the callback runs once with BatchCancelled and the sums.
func TestShardedCancel(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("sharded-cancel"), CounterShards: 8})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := r.prod.Prepare(r.ctx, Slow{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(r.ctx, r.prod, slow); err != nil {
		t.Fatal(err)
	}
	later, err := b.Track(r.ctx, r.thumbs(20, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	r.start(1, 0)
	<-r.started
	res, err := r.client.Cancel(r.ctx, b.ID(), "album deleted")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cancelled != 20 || res.Running != 1 {
		t.Errorf("cancel: %+v, want 20 cancelled, 1 running", res)
	}
	r.send(later...)
	if info := r.info(b.ID()); info.State != batch.StateSealed || info.Cancelled != 20 || info.Remaining != 1 {
		t.Errorf("batch after the cancel: %+v", info)
	}
	close(r.gate)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	sums := r.summaries()
	if len(sums) != 1 || sums[0].Succeeded != 1 || sums[0].Cancelled != 20 || !sums[0].BatchCancelled || len(sums[0].NotSucceeded) != 20 {
		t.Errorf("summaries: %+v", sums)
	}
	r.waitFor("the cancelled children's deliveries", time.Minute, func() bool { return r.duplicates() >= 20 })
	for i := range 20 {
		if n := r.runs(i); n != 0 {
			t.Errorf("cancelled child %d ran %d times", i, n)
		}
	}
}

// TestShardedRepair: children of a sharded batch whose finishing transactions kept failing have
// their outcomes recorded alone; Repair counts each on its shard, once, and the last one
// completes the batch.
func TestShardedRepair(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	broken, err := batch.New(batch.Config{Client: failingTx{r.ddb}, Table: r.table, Outbox: r.ob})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: r.ddb, Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	store, err := broken.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("sharded-repair"), CounterShards: 4})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(6, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, m := range tagged {
		meta := metaOf(t, m)
		res, err := store.Claim(r.ctx, idempotency.ClaimRequest{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-" + m.ID,
			Now: now, LeaseUntil: now.Add(time.Minute), Meta: meta})
		if err != nil || !res.Claimed {
			t.Fatalf("claim: %v, %+v", err, res)
		}
		if err := store.Finish(r.ctx, idempotency.Finish{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-" + m.ID,
			State: idempotency.StateSucceeded, Now: now, ExpiresAt: now.Add(time.Hour), Meta: meta}); err != nil {
			t.Fatalf("finish with the transaction failing: %v", err)
		}
	}
	if info := r.info(b.ID()); info.Remaining != 6 {
		t.Fatalf("the batch counted children whose transaction failed: %+v", info)
	}
	n, err := r.client.Repair(r.ctx, b.ID())
	if err != nil || n != 6 {
		t.Fatalf("Repair: %d, %v; want 6", n, err)
	}
	if n, err := r.client.Repair(r.ctx, b.ID()); err != nil || n != 0 {
		t.Errorf("Repair again: %d, %v; want 0", n, err)
	}
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if info := r.info(b.ID()); info.State != batch.StateDone || info.Succeeded != 6 {
		t.Errorf("batch after the repair: %+v", info)
	}
}

// wakeRelay starts a pass of the rig's relay (batch.Config.OnOutbox of the tests' own clients).
func (r *rig) wakeRelay() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// metaOf returns a tagged message's envelope meta.
func metaOf(t *testing.T, m producer.Message) map[string]string {
	t.Helper()
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		t.Fatal(err)
	}
	return env.Meta
}

// hookDDB runs before ahead of the DynamoDB calls it selects (then the call itself): a seal or a
// child's count made to land between another writer's read and its write.
type hookDDB struct {
	batch.DynamoDBAPI
	onTx     func(in *dynamodb.TransactWriteItemsInput)
	onUpdate func(in *dynamodb.UpdateItemInput)
}

func (h *hookDDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if h.onTx != nil {
		h.onTx(in)
	}
	return h.DynamoDBAPI.TransactWriteItems(ctx, in, o...)
}

func (h *hookDDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if h.onUpdate != nil {
		h.onUpdate(in)
	}
	return h.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// writesItem reports whether a transaction writes item pk.
func writesItem(in *dynamodb.TransactWriteItemsInput, pk string) bool {
	for _, it := range in.TransactItems {
		if it.Update != nil && it.Update.Key[idempotency.AttrPK].(*types.AttributeValueMemberS).Value == pk {
			return true
		}
	}
	return false
}

// TestShardedSealRaces forces the two orders in which a seal and the last child of the last busy
// shard can meet, each between the other's read and its write:
//
//   - the seal commits after the child read the batch open, before the child's transaction: that
//     transaction (which would only take its shard out of the busy count) is refused, and the
//     child's next one completes the batch;
//   - the child's transaction commits after the seal read its shard busy, before the seal's
//     write: the seal's write is refused, and the seal completes the batch.
//
// Either way the batch completes once, and the callback runs once.
func TestShardedSealRaces(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	r.start(1, 0)
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: r.ddb, Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(store idempotency.Store, m producer.Message) idempotency.Finish {
		t.Helper()
		now := time.Now()
		meta := metaOf(t, m)
		if res, err := store.Claim(r.ctx, idempotency.ClaimRequest{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-" + m.ID,
			Now: now, LeaseUntil: now.Add(time.Minute), Meta: meta}); err != nil || !res.Claimed {
			t.Fatalf("claim: %v, %+v", err, res)
		}
		return idempotency.Finish{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-" + m.ID,
			State: idempotency.StateSucceeded, Now: now, ExpiresAt: now.Add(time.Hour), Meta: meta}
	}

	t.Run("seal before the child's write", func(t *testing.T) {
		b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("race-1"), CounterShards: 4})
		if err != nil {
			t.Fatal(err)
		}
		tagged, err := b.Track(r.ctx, r.thumbs(1, func(int) bool { return false })...)
		if err != nil {
			t.Fatal(err)
		}
		var sealedBetween atomic.Bool
		hook := &hookDDB{DynamoDBAPI: r.ddb}
		hook.onTx = func(in *dynamodb.TransactWriteItemsInput) {
			// The child's first transaction that writes the batch's item: it read the batch open.
			if writesItem(in, batchItemKey(b.ID())) && !sealedBetween.Load() {
				if err := b.Seal(r.ctx); err != nil {
					t.Error(err)
				}
				sealedBetween.Store(r.info(b.ID()).State == batch.StateSealed)
			}
		}
		hooked, err := batch.New(batch.Config{Client: hook, Table: r.table, Outbox: r.ob, OnOutbox: r.wakeRelay})
		if err != nil {
			t.Fatal(err)
		}
		store, err := hooked.WrapStore(inner)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(r.ctx, claim(store, tagged[0])); err != nil {
			t.Fatal(err)
		}
		if !sealedBetween.Load() {
			t.Fatal("the seal did not land between the child's read and its write")
		}
		if info := r.info(b.ID()); info.State != batch.StateDone || info.Succeeded != 1 {
			t.Errorf("batch: %+v, want done by the child's count", info)
		}
		r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	})

	t.Run("child's write before the seal's", func(t *testing.T) {
		b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("race-2"), CounterShards: 4})
		if err != nil {
			t.Fatal(err)
		}
		tagged, err := b.Track(r.ctx, r.thumbs(1, func(int) bool { return false })...)
		if err != nil {
			t.Fatal(err)
		}
		store, err := r.client.WrapStore(inner)
		if err != nil {
			t.Fatal(err)
		}
		f := claim(store, tagged[0])
		var countedBetween atomic.Bool
		hook := &hookDDB{DynamoDBAPI: r.ddb}
		hook.onUpdate = func(in *dynamodb.UpdateItemInput) {
			// The seal's write: it read the child's shard busy.
			if !countedBetween.Swap(true) {
				if err := store.Finish(r.ctx, f); err != nil {
					t.Error(err)
				}
				if info := r.info(b.ID()); info.State != batch.StateOpen || info.Remaining != 0 {
					t.Errorf("batch after the child's count, before the seal's write: %+v", info)
				}
			}
		}
		hooked, err := batch.New(batch.Config{Client: hook, Table: r.table, Outbox: r.ob, OnOutbox: r.wakeRelay})
		if err != nil {
			t.Fatal(err)
		}
		hb, err := hooked.Batch(b.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := hb.Seal(r.ctx); err != nil {
			t.Fatal(err)
		}
		if !countedBetween.Load() {
			t.Fatal("the child's count did not land between the seal's read and its write")
		}
		if info := r.info(b.ID()); info.State != batch.StateDone || info.Succeeded != 1 || !info.DoneAt.Equal(info.SealedAt) {
			t.Errorf("batch: %+v, want done by the seal", info)
		}
		r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 2 })
	})
	byBatch := map[string]int{}
	for _, s := range r.summaries() {
		byBatch[s.Batch]++
		if s.Total != 1 || s.Succeeded != 1 {
			t.Errorf("summary %+v", s)
		}
	}
	for id, n := range byBatch {
		if n != 1 {
			t.Errorf("batch %s's callback ran %d times", id, n)
		}
	}
}

// TestShardedThroughOutbox: a sharded batch prepared for a business transaction (5 children),
// then 60 more added through the outbox from a handle that knows only the batch's id (it reads
// the shard count), then sealed: the callback runs once with 65; CounterShards is validated.
func TestShardedThroughOutbox(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	for _, n := range []int{-1, batch.MaxCounterShards + 1} {
		if _, err := r.client.Start(r.ctx, batch.Spec{CounterShards: n}); !errors.Is(err, batch.ErrInvalid) {
			t.Errorf("CounterShards %d: %v, want ErrInvalid", n, err)
		}
	}
	tx, err := r.client.Prepare(batch.Spec{ID: "sharded-album", Callback: r.callback("sharded-album"), CounterShards: 4}, false,
		r.thumbs(5, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.client.Transact(r.ctx, &dynamodb.TransactWriteItemsInput{}, tx); err != nil {
		t.Fatal(err)
	}
	b, err := r.client.Batch("sharded-album")
	if err != nil {
		t.Fatal(err)
	}
	more := r.thumbs(60, func(int) bool { return false })
	if err := b.AddThroughOutbox(r.ctx, more...); err != nil {
		t.Fatal(err)
	}
	if err := b.AddThroughOutbox(r.ctx, more...); err != nil { // counted once
		t.Fatal(err)
	}
	if info := r.info(b.ID()); info.Total != 65 || info.Remaining != 65 || info.CounterShards != 4 {
		t.Fatalf("batch: %+v, want 65 unfinished children on 4 shards", info)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.start(2, 0)
	r.waitFor("the callback", 2*time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Total != 65 || s.Succeeded != 65 {
		t.Errorf("summary: %+v", s)
	}
	list, err := r.client.List(r.ctx, batch.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Total != 65 || list[0].Succeeded != 65 || list[0].State != batch.StateDone || list[0].Progress() != 1 {
		t.Errorf("List: %+v", list)
	}
}

// claimFor claims tagged child m with store and returns its Finish (succeeded; set State for
// another outcome), as the worker's middleware would.
func (r *rig) claimFor(store idempotency.Store, m producer.Message, token string) idempotency.Finish {
	r.t.Helper()
	now := time.Now()
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	if res, err := store.Claim(r.ctx, idempotency.ClaimRequest{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: token,
		Now: now, LeaseUntil: now.Add(time.Minute), Meta: env.Meta}); err != nil || !res.Claimed {
		r.t.Fatalf("claim %s: %v, %+v", m.ID, err, res)
	}
	return idempotency.Finish{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: token,
		State: idempotency.StateSucceeded, Now: now, ExpiresAt: now.Add(time.Hour), Meta: env.Meta}
}

// TestShardedCompletionMeetsARedrive: the last child of a sealed sharded batch completes it with
// a summary of every shard, read before its transaction; a dead child of another shard, redriven
// and succeeding between that read and the transaction, moves its shard's count. The completion
// must not commit a summary the shards no longer hold (dead 1 where the batch says 0): it is
// refused, reads again, and the callback gets the counts as they are when the batch completes.
func TestShardedCompletionMeetsARedrive(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: r.ddb, Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	store, err := r.client.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("redrive-race"), CounterShards: 4})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(8, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	// dead and last are on different shards; the others finish first.
	dead, last := tagged[0], -1
	for i, m := range tagged[1:] {
		if metaOf(t, m)[batch.MetaBatchShard] != metaOf(t, dead)[batch.MetaBatchShard] {
			last = i + 1
			break
		}
	}
	if last < 0 {
		t.Fatal("every child hashed to one shard")
	}
	for i, m := range tagged {
		if i == 0 || i == last {
			continue
		}
		if err := store.Finish(r.ctx, r.claimFor(store, m, "t-"+m.ID)); err != nil {
			t.Fatal(err)
		}
	}
	f := r.claimFor(store, dead, "t1-"+dead.ID)
	f.State = idempotency.StateDead
	if err := store.Finish(r.ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	if info := r.info(b.ID()); info.State != batch.StateSealed || info.Dead != 1 || info.Remaining != 1 {
		t.Fatalf("batch before its last child: %+v", info)
	}

	var redriven atomic.Bool
	hook := &hookDDB{DynamoDBAPI: r.ddb}
	hook.onTx = func(in *dynamodb.TransactWriteItemsInput) {
		// The completing transaction (the only one of the last child's that writes the batch's
		// item): it has read the shards. The dead child is redriven and succeeds now.
		if !writesItem(in, batchItemKey(b.ID())) || redriven.Swap(true) {
			return
		}
		if err := r.status.ResetForRedrive(r.ctx, dead.Kind, dead.Key, false); err != nil {
			t.Error(err)
			return
		}
		if err := store.Finish(r.ctx, r.claimFor(store, dead, "t2-"+dead.ID)); err != nil {
			t.Error(err)
		}
	}
	hooked, err := batch.New(batch.Config{Client: hook, Table: r.table, Outbox: r.ob, OnOutbox: r.wakeRelay})
	if err != nil {
		t.Fatal(err)
	}
	hstore, err := hooked.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := hstore.Finish(r.ctx, r.claimFor(hstore, tagged[last], "t-"+tagged[last].ID)); err != nil {
		t.Fatal(err)
	}
	if !redriven.Load() {
		t.Fatal("the redrive did not land between the completion's read and its write")
	}
	info := r.info(b.ID())
	if info.State != batch.StateDone || info.Succeeded != 8 || info.Dead != 0 {
		t.Errorf("batch: %+v, want done with 8 succeeded", info)
	}
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Succeeded != info.Succeeded || s.Dead != info.Dead || len(s.NotSucceeded) != 0 {
		t.Errorf("summary %+v; the batch completed with %d succeeded, %d dead", s, info.Succeeded, info.Dead)
	}
}

// TestNotSucceededSetsExpire: the not-succeeded set of a batch (batch:<id>:x) and of each counter
// shard (batch:<id>:x:<k>), created by a dead child's ADD, expires like the batch's other items
// (docs/TABLE.md: every item expires Config.TTL after it was made); it did not, and stayed in
// the table for ever.
func TestNotSucceededSetsExpire(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: r.ddb, Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	store, err := r.client.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	for _, shards := range []int{1, 4} {
		t.Run(strconv.Itoa(shards)+" shards", func(t *testing.T) {
			b, err := r.client.Start(r.ctx, batch.Spec{CounterShards: shards})
			if err != nil {
				t.Fatal(err)
			}
			// Two children: the first, dead, is not the batch's last (its count is the common one);
			// the second, dead too, completes the sealed batch.
			tagged, err := b.Track(r.ctx, r.thumbs(2, func(int) bool { return true })...)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Seal(r.ctx); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range tagged {
				f := r.claimFor(store, m, "t-"+m.ID)
				f.State = idempotency.StateDead
				if err := store.Finish(r.ctx, f); err != nil {
					t.Fatal(err)
				}
				key := "batch:" + b.ID() + ":x"
				if shards > 1 {
					key += ":" + metaOf(t, m)[batch.MetaBatchShard]
				}
				keys = append(keys, key)
			}
			if info := r.info(b.ID()); info.State != batch.StateDone || info.Dead != 2 {
				t.Fatalf("batch: %+v", info)
			}
			batchExp := attrN(r.raw(batchItemKey(b.ID())), idempotency.AttrExpires)
			for _, key := range keys {
				item := r.raw(key)
				if item == nil {
					t.Fatalf("%s: no item", key)
				}
				exp := attrN(item, idempotency.AttrExpires)
				if exp < batchExp || exp > float64(time.Now().Add(batch.DefaultTTL+time.Minute).Unix()) {
					t.Errorf("%s expires at %v; the batch at %v", key, exp, batchExp)
				}
			}
		})
	}
}

// TestCounterShardsValidation: Spec.CounterShards outside 1..MaxCounterShards is refused with
// ErrInvalid and an error that names it, by Start and Prepare, before anything is written; 0 is
// the default, 1.
func TestCounterShardsValidation(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	for _, tc := range []struct {
		shards int
		want   int // the batch's counter shards; 0: refused
	}{
		{-1, 0}, {0, 1}, {1, 1}, {2, 2}, {batch.MaxCounterShards, batch.MaxCounterShards}, {batch.MaxCounterShards + 1, 0}, {1000, 0},
	} {
		t.Run(strconv.Itoa(tc.shards), func(t *testing.T) {
			id := "shards-" + strings.ReplaceAll(strconv.Itoa(tc.shards), "-", "m")
			_, perr := r.client.Prepare(batch.Spec{ID: id + "-tx", CounterShards: tc.shards}, true)
			b, err := r.client.Start(r.ctx, batch.Spec{ID: id, CounterShards: tc.shards})
			if tc.want == 0 {
				for what, e := range map[string]error{"Start": err, "Prepare": perr} {
					if !errors.Is(e, batch.ErrInvalid) || !strings.Contains(fmt.Sprint(e), "CounterShards "+strconv.Itoa(tc.shards)) {
						t.Errorf("%s: %v, want ErrInvalid naming CounterShards %d", what, e, tc.shards)
					}
				}
				if item := r.raw(batchItemKey(id)); item != nil {
					t.Errorf("a refused batch was written: %v", item)
				}
				return
			}
			if err != nil || perr != nil {
				t.Fatalf("Start: %v; Prepare: %v", err, perr)
			}
			if info := r.info(b.ID()); info.CounterShards != tc.want {
				t.Errorf("the batch has %d counter shards, want %d", info.CounterShards, tc.want)
			}
		})
	}
}
