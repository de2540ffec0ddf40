package batch_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// TestBatchSmall: a batch of 10 children, 2 failing to exhaustion, on several pollers: the
// callback runs once, with the counts and the ids of the children that did not succeed.
func TestBatchSmall(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	children := r.thumbs(10, func(i int) bool { return i == 3 || i == 7 })
	b, err := r.client.Enqueue(r.ctx, r.prod, batch.Spec{Callback: r.callback("small"), Description: "ten thumbnails"}, children...)
	if err != nil {
		t.Fatal(err)
	}
	r.start(2, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	info := r.info(b.ID())
	if info.State != batch.StateDone || info.Total != 10 || info.Succeeded != 8 || info.Dead != 2 || info.Remaining != 0 {
		t.Errorf("batch after the callback: %+v", info)
	}
	sums := r.summaries()
	if len(sums) != 1 {
		t.Fatalf("callback summaries: %+v", sums)
	}
	want := []string{children[3].ID, children[7].ID}
	sort.Strings(want)
	if s := sums[0]; s.Batch != b.ID() || s.Total != 10 || s.Succeeded != 8 || s.Dead != 2 || !slices.Equal(s.NotSucceeded, want) {
		t.Errorf("summary %+v, want 8 succeeded, 2 dead %v", s, want)
	}
}

// TestBatchThousandExactlyOnce is the test: 1,000 children, 5 % of them failing to
// exhaustion, duplicate deliveries (every 20th child sent twice) and crashes between a child's
// finishing write and its delete (a share of first deletes dropped: the message comes back), on
// three pollers: the callback runs exactly once, with the right counts.
func TestBatchThousandExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 jobs")
	}
	t.Parallel()
	r := newRig(t, rigOptions{})
	fail := func(i int) bool { return i%20 == 7 }
	children := r.thumbs(1000, fail)
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("thousand")})
	if err != nil {
		t.Fatal(err)
	}
	r.start(3, 0.1)
	// Built in chunks while the children already run: the callback cannot fire before the seal.
	for lo := 0; lo < 900; lo += 300 {
		if err := b.Add(r.ctx, r.prod, children[lo:lo+300]...); err != nil {
			t.Fatal(err)
		}
	}
	// The last 100 are counted with Track and sent by the test, each twice: duplicate deliveries.
	tagged, err := b.Track(r.ctx, children[900:]...)
	if err != nil {
		t.Fatal(err)
	}
	r.send(tagged...)
	r.send(tagged...)
	// Adding a child again counts nothing twice (the same chunk: its fingerprint), and sends it again.
	if err := b.Add(r.ctx, r.prod, children[0:300]...); err != nil {
		t.Fatal(err)
	}
	r.waitFor("every child counted", 3*time.Minute, func() bool { return r.info(b.ID()).Remaining == 0 })
	if r.cbRuns.Load() != 0 {
		t.Fatal("the callback ran before the seal")
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	info := r.info(b.ID())
	if info.Total != 1000 || info.Succeeded != 950 || info.Dead != 50 || info.Cancelled != 0 || info.State != batch.StateDone {
		t.Errorf("batch: %+v, want 950 succeeded, 50 dead of 1000", info)
	}
	sums := r.summaries()
	if len(sums) != 1 || sums[0].Succeeded != 950 || sums[0].Dead != 50 || len(sums[0].NotSucceeded) != 50 {
		t.Fatalf("summaries: %+v", sums)
	}
	for i, c := range children {
		j, err := r.status.GetByID(r.ctx, c.ID)
		if err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		want := idempotency.StateSucceeded
		if fail(i) {
			want = idempotency.StateDead
		}
		if j.State != want {
			t.Errorf("child %d: %s, want %s", i, j.State, want)
		}
		// A succeeded child ran once, a failing one its 2 attempts: no crash or duplicate ran a
		// child again.
		if runs, want := r.runs(i), map[bool]int{false: 1, true: 2}[fail(i)]; runs != want {
			t.Errorf("child %d ran %d times, want %d", i, runs, want)
		}
	}
	// The test did what it claims: deletes were dropped (crashes) and duplicates were delivered.
	if r.crashes.Load() == 0 || r.duplicates() == 0 {
		t.Errorf("crashes %d, duplicate deliveries %d: the test exercised neither", r.crashes.Load(), r.duplicates())
	}
	t.Logf("%d deletes dropped, %d duplicate deliveries acknowledged without running", r.crashes.Load(), r.duplicates())
}

// TestChainOfFive: a chain of 5 steps passes each step's result to the next (each adds its
// number to the sum it received), and ends succeeded; a chain whose third step fails stops there,
// failed at step 3, and its later steps never run.
func TestChainOfFive(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	steps := func(failAt int) []producer.Message {
		var out []producer.Message
		for k := 1; k <= 5; k++ {
			m, err := r.prod.Prepare(r.ctx, Step{Add: k * 10, Fail: k == failAt})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	good, err := r.client.StartChain(r.ctx, batch.ChainSpec{Description: "five steps"}, steps(0)...)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, steps(3)...)
	if err != nil {
		t.Fatal(err)
	}
	r.start(2, 0)
	chain := func(id string) batch.ChainDetail {
		d, err := r.client.GetChain(r.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	r.waitFor("both chains", time.Minute, func() bool {
		return chain(good).State == batch.ChainSucceeded && chain(bad).State == batch.ChainFailed
	})
	g := chain(good)
	if g.Current != 5 || g.Steps[4].Result != "150" {
		t.Errorf("good chain: current %d, last result %q; want step 5 with 10+20+30+40+50 = 150", g.Current, g.Steps[4].Result)
	}
	for i, s := range g.Steps {
		if s.State != idempotency.StateSucceeded {
			t.Errorf("good chain step %d: %s", i+1, s.State)
		}
	}
	b := chain(bad)
	if b.FailedStep != 3 || b.Current != 3 || b.Reason == "" {
		t.Errorf("bad chain: %+v, want failed at step 3 with a reason", b.ChainInfo)
	}
	if b.Steps[3].State != "" || b.Steps[4].State != "" {
		t.Errorf("bad chain: steps after the failure have records: %s, %s", b.Steps[3].State, b.Steps[4].State)
	}
	r.mu.Lock()
	seen := append([]string(nil), r.stepSeen...)
	r.mu.Unlock()
	// Each step saw the sum of the ones before it (step 1 none); the failing step 3 ran twice.
	for _, want := range []string{"1:10:0:false", "2:20:10:true", "3:30:30:true", "4:40:60:true", "5:50:100:true"} {
		if !slices.Contains(seen, want) {
			t.Errorf("no step saw %s; seen %v", want, seen)
		}
	}
	if n := len(seen); n != 5+2+2 {
		t.Errorf("%d step runs, want 9 (5 of the good chain, 2 and 2 attempts of step 3 of the bad one): %v", n, seen)
	}
}

// TestCancelBatch: cancelling a batch cancels its children that have not started (they never
// run) and counts them; a running child finishes and is counted; the callback then runs once,
// with the counts and BatchCancelled.
func TestCancelBatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("cancelled")})
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
	// The others are counted but not sent yet: they cannot start before the cancel.
	later, err := b.Track(r.ctx, r.thumbs(20, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	r.start(1, 0)
	<-r.started // the slow child runs
	res, err := r.client.Cancel(r.ctx, b.ID(), "album deleted")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cancelled != 20 || res.Running != 1 {
		t.Errorf("cancel: %+v, want 20 cancelled, 1 running", res)
	}
	r.send(later...) // their deliveries are acknowledged without running
	info := r.info(b.ID())
	if info.State != batch.StateSealed || info.Cancelled != 20 || info.Remaining != 1 || info.CancelReason != "album deleted" {
		t.Errorf("batch after the cancel: %+v", info)
	}
	if _, err := b.Track(r.ctx, r.thumbs(1, func(int) bool { return false })...); !errors.Is(err, batch.ErrSealed) {
		t.Errorf("Track after the cancel: %v, want ErrSealed", err)
	}
	close(r.gate) // the running child finishes
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() > 0 })
	sums := r.summaries()
	if len(sums) != 1 || sums[0].Succeeded != 1 || sums[0].Cancelled != 20 || !sums[0].BatchCancelled || sums[0].More != 0 || len(sums[0].NotSucceeded) != 20 {
		t.Errorf("summaries: %+v", sums)
	}
	d, err := r.client.Get(r.ctx, b.ID(), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Children {
		if c.Kind == (Thumb{}).Kind() && (c.State != idempotency.StateCancelled || c.Counted != "cancelled") {
			t.Errorf("child %s: %s counted %q", c.ID, c.State, c.Counted)
		}
	}
	// Give the cancelled children's deliveries a chance to be (wrongly) run: none ran.
	r.waitFor("the cancelled children's deliveries", time.Minute, func() bool { return r.duplicates() >= 20 })
	for i := range 20 {
		if n := r.runs(i); n != 0 {
			t.Errorf("cancelled child %d ran %d times", i, n)
		}
	}
	if _, err := r.client.Cancel(r.ctx, b.ID(), ""); !errors.Is(err, batch.ErrFinished) {
		t.Errorf("cancel of a finished batch: %v, want ErrFinished", err)
	}
	empty, err := r.client.Enqueue(r.ctx, r.prod, batch.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Cancel(r.ctx, empty.ID(), "too late"); !errors.Is(err, batch.ErrFinished) {
		t.Errorf("cancel of a finished batch never cancelled: %v, want ErrFinished", err)
	}
	if info := r.info(empty.ID()); !info.CancelledAt.IsZero() || info.CancelReason != "" {
		t.Errorf("a refused cancel marked the finished batch: %+v", info)
	}
}

// TestBadInput: an empty batch fires its callback at once (Summary of 0 children); a callback of
// a kind the registry does not know, a batch id in use, children added to a sealed batch and a
// message already in another batch are refused with clear errors, and nothing is written for
// them.
func TestBadInput(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	r.start(1, 0)
	empty, err := r.client.Enqueue(r.ctx, r.prod, batch.Spec{Callback: r.callback("empty")})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor("the empty batch's callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Batch != empty.ID() || s.Total != 0 || s.Succeeded != 0 {
		t.Errorf("empty batch's summary: %+v", s)
	}
	if info := r.info(empty.ID()); info.State != batch.StateDone || info.Progress() != 1 {
		t.Errorf("empty batch: %+v", info)
	}

	unknown, err := r.prod.PrepareRaw(r.ctx, "test.nobody", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Start(r.ctx, batch.Spec{ID: "unknown-cb", Callback: &unknown}); !errors.Is(err, batch.ErrUnknownKind) {
		t.Errorf("callback of an unregistered kind: %v, want ErrUnknownKind", err)
	}
	if _, err := r.client.Get(r.ctx, "unknown-cb", 0); !errors.Is(err, batch.ErrNotFound) {
		t.Errorf("the refused batch was written: %v", err)
	}

	if _, err := r.client.Start(r.ctx, batch.Spec{ID: "taken"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Start(r.ctx, batch.Spec{ID: "taken", Callback: r.callback("x")}); !errors.Is(err, batch.ErrExists) {
		t.Errorf("a reused id: %v, want ErrExists", err)
	}
	if info := r.info("taken"); info.Callback != "" {
		t.Errorf("the reused id's create changed the batch: %+v", info)
	}
	for _, id := range []string{"", "a:b", "a#b", string(make([]byte, 129))} {
		if err := batch.ValidateID(id); !errors.Is(err, batch.ErrInvalid) {
			t.Errorf("ValidateID(%q): %v", id, err)
		}
	}

	b, err := r.client.Batch("taken")
	if err != nil {
		t.Fatal(err)
	}
	kids := r.thumbs(2, func(int) bool { return false })
	tagged, err := b.Track(r.ctx, kids[0])
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.client.Start(r.ctx, batch.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Add(r.ctx, r.prod, tagged[0]); !errors.Is(err, batch.ErrInvalid) {
		t.Errorf("a child of another batch: %v, want ErrInvalid", err)
	}
	if err := b.Add(r.ctx, r.prod, kids[1], kids[1]); !errors.Is(err, batch.ErrInvalid) {
		t.Errorf("a child twice in one call: %v, want ErrInvalid", err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(r.ctx, r.prod, kids[1]); !errors.Is(err, batch.ErrSealed) {
		t.Errorf("Add to a sealed batch: %v, want ErrSealed", err)
	}
	if info := r.info("taken"); info.Total != 1 || info.State != batch.StateSealed {
		t.Errorf("batch after the refused adds: %+v, want 1 child, sealed", info)
	}
}

// TestRedriveMovesCount: a dead child that is redriven and then succeeds moves its count from
// dead to succeeded, without changing what remains; the callback, which already ran, does not run
// again; the child leaves the not-succeeded ids.
func TestRedriveMovesCount(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	cb := r.callback("redrive")
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: cb})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(2, func(i int) bool { return i == 1 })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.send(tagged...)
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Succeeded != 1 || s.Dead != 1 || !slices.Equal(s.NotSucceeded, []string{tagged[1].ID}) {
		t.Fatalf("summary: %+v", s)
	}
	r.waitFor("the callback's outbox item deleted", time.Minute, func() bool {
		_, err := r.ob.Get(r.ctx, cb.ID)
		return err != nil
	})
	// Fix the child and redrive it as pkg/dlq does: reset its record (a fresh attempt budget),
	// then a new message with the same job.
	r.mu.Lock()
	r.failing[1] = false
	r.mu.Unlock()
	if err := r.status.ResetForRedrive(r.ctx, tagged[1].Kind, tagged[1].Key, false); err != nil {
		t.Fatal(err)
	}
	r.send(tagged[1])
	r.waitFor("the redriven child's count", time.Minute, func() bool { return r.info(b.ID()).Succeeded == 2 })
	// The transaction that moved the count put no callback into the outbox (it would be there
	// now, or already sent and run a second time, below).
	if _, err := r.ob.Get(r.ctx, cb.ID); err == nil {
		t.Errorf("the callback %s is in the outbox again after the redrive", cb.ID)
	}
	d, err := r.client.Get(r.ctx, b.ID(), -1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Dead != 0 || d.Remaining != 0 || d.Total != 2 || len(d.NotSucceeded) != 0 || d.State != batch.StateDone {
		t.Errorf("batch after the redrive: %+v", d)
	}
	if n := r.cbRuns.Load(); n != 1 {
		t.Errorf("the callback ran %d times", n)
	}
}

// TestChildOutsideTheBatch: a child dead-lettered without a claim (a kind no worker has) is
// marked dead and counted; a child cancelled with status.Cancel (not the batch's Cancel) is
// counted cancelled at its next delivery, once.
func TestChildOutsideTheBatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	unknown, err := r.prod.PrepareRaw(r.ctx, "test.nobody", []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("outside")})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, append(r.thumbs(1, func(int) bool { return false }), unknown)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.status.Cancel(r.ctx, tagged[0].Kind, tagged[0].Key, time.Time{}, "not needed"); err != nil {
		t.Fatal(err)
	}
	r.send(tagged...)
	r.send(tagged[0]) // a duplicate of the cancelled child: counted once
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	s := r.summaries()[0]
	if s.Total != 2 || s.Dead != 1 || s.Cancelled != 1 || s.Succeeded != 0 {
		t.Errorf("summary: %+v, want 1 dead (unknown kind), 1 cancelled", s)
	}
	if n := r.runs(0); n != 0 {
		t.Errorf("the cancelled child ran %d times", n)
	}
}

// TestBatchInABusinessTransaction: a batch prepared with Prepare commits with the caller's
// business write, its children enqueued through the outbox; a business write that fails leaves no
// batch and no child.
func TestBatchInABusinessTransaction(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	r.start(1, 0)
	business := func(id string, cond string) *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
			TableName: aws.String(r.table), ConditionExpression: aws.String(cond),
			Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "album:" + id}},
		}}}}
	}
	tx, err := r.client.Prepare(batch.Spec{ID: "album-1", Callback: r.callback("album-1")}, true, r.thumbs(5, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.client.Transact(r.ctx, business("1", "attribute_not_exists(pk)"), tx); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Batch != "album-1" || s.Succeeded != 5 {
		t.Errorf("summary: %+v", s)
	}
	tx2, err := r.client.Prepare(batch.Spec{ID: "album-2", Callback: r.callback("album-2")}, true, r.thumbs(5, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.client.Transact(r.ctx, business("1", "attribute_not_exists(pk)"), tx2); err == nil || errors.Is(err, batch.ErrExists) {
		t.Errorf("a failing business write: %v, want the cancellation (not ErrExists)", err)
	}
	if _, err := r.client.Get(r.ctx, "album-2", 0); !errors.Is(err, batch.ErrNotFound) {
		t.Errorf("the batch of a cancelled transaction exists: %v", err)
	}
	if err := r.client.Transact(r.ctx, business("3", "attribute_not_exists(pk)"), tx); !errors.Is(err, batch.ErrExists) {
		t.Errorf("the same batch again: %v, want ErrExists", err)
	}
}

// failingTx fails every TransactWriteItems: DynamoDB throttling beyond the retries, an outage.
type failingTx struct{ batch.DynamoDBAPI }

func (failingTx) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, errors.New("service unavailable")
}

// TestRepair: a child whose finishing transaction keeps failing gets its outcome recorded alone
// (its status is right, the batch has not counted it); Repair counts it, once, and the last one
// counted enqueues the callback.
func TestRepair(t *testing.T) {
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
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("repair")})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(2, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, m := range tagged {
		meta := map[string]string{batch.MetaBatch: b.ID()}
		res, err := store.Claim(r.ctx, idempotency.ClaimRequest{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-" + m.ID,
			Now: now, LeaseUntil: now.Add(time.Minute), Meta: meta})
		if err != nil || !res.Claimed {
			t.Fatalf("claim: %v, %+v", err, res)
		}
		if err := store.Finish(r.ctx, idempotency.Finish{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-" + m.ID,
			State: idempotency.StateSucceeded, Now: now, ExpiresAt: now.Add(time.Hour), Meta: meta}); err != nil {
			t.Fatalf("finish with the transaction failing: %v, want the outcome recorded alone", err)
		}
		if j, err := r.status.GetByID(r.ctx, m.ID); err != nil || j.State != idempotency.StateSucceeded {
			t.Fatalf("child %s after the finish: %+v, %v", m.ID, j, err)
		}
	}
	if info := r.info(b.ID()); info.Remaining != 2 {
		t.Fatalf("the batch counted children whose transaction failed: %+v", info)
	}
	n, err := r.client.Repair(r.ctx, b.ID())
	if err != nil || n != 2 {
		t.Fatalf("Repair: %d, %v; want 2", n, err)
	}
	if n, err := r.client.Repair(r.ctx, b.ID()); err != nil || n != 0 {
		t.Errorf("Repair again: %d, %v; want 0 (counted once)", n, err)
	}
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if info := r.info(b.ID()); info.State != batch.StateDone || info.Succeeded != 2 {
		t.Errorf("batch after the repair: %+v", info)
	}
}

// TestBatchOfBatches: sub-batches whose callbacks are children of a parent batch (Track): the
// parent's callback runs once, after every sub-batch has finished, and each sub-callback got its
// sub-batch's summary.
func TestBatchOfBatches(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	parent, err := r.client.Start(r.ctx, batch.Spec{ID: "parent-" + t.Name(), Callback: r.callback("parent")})
	if err != nil {
		t.Fatal(err)
	}
	var subCallbacks []producer.Message
	for i := range 3 {
		subCallbacks = append(subCallbacks, *r.callback("sub-" + strconv.Itoa(i)))
	}
	tagged, err := parent.Track(r.ctx, subCallbacks...)
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	var subs []string
	for i := range 3 {
		cb := tagged[i]
		sub, err := r.client.Enqueue(r.ctx, r.prod, batch.Spec{Callback: &cb}, r.thumbs(4, func(n int) bool { return i == 2 && n == 0 })...)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub.ID())
	}
	r.start(2, 0)
	r.waitFor("the parent's callback", 2*time.Minute, func() bool { return r.info(parent.ID()).State == batch.StateDone && r.cbRuns.Load() == 4 })
	byBatch := map[string]batch.Summary{}
	for _, s := range r.summaries() {
		if _, dup := byBatch[s.Batch]; dup {
			t.Errorf("batch %s's callback ran twice", s.Batch)
		}
		byBatch[s.Batch] = s
	}
	if p := byBatch[parent.ID()]; p.Total != 3 || p.Succeeded != 3 {
		t.Errorf("the parent's summary: %+v, want its 3 sub-batches' callbacks", p)
	}
	if s := byBatch[subs[2]]; s.Total != 4 || s.Succeeded != 3 || s.Dead != 1 {
		t.Errorf("the third sub-batch's summary: %+v", s)
	}
}

// TestRepairChain: a step whose finishing transaction keeps failing gets its outcome recorded
// alone, and its chain waits at that step; RepairChain counts it, once, and enqueues the next
// step with the step's result, so that the chain finishes.
func TestRepairChain(t *testing.T) {
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
	var steps []producer.Message
	for _, add := range []int{7, 10} {
		m, err := r.prod.Prepare(r.ctx, Step{Add: add})
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, m)
	}
	id, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, steps...)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.client.RepairChain(r.ctx, id); err != nil || ok {
		t.Fatalf("RepairChain of a chain whose step has not run: %v, %v; want nothing to repair", ok, err)
	}
	first := steps[0]
	now := time.Now()
	meta := map[string]string{batch.MetaChain: id, batch.MetaChainStep: "1"}
	if res, err := store.Claim(r.ctx, idempotency.ClaimRequest{Kind: first.Kind, Key: first.Key, JobID: first.ID, Token: "t1",
		Now: now, LeaseUntil: now.Add(time.Minute), Meta: meta}); err != nil || !res.Claimed {
		t.Fatalf("claim: %v, %+v", err, res)
	}
	if err := store.Finish(r.ctx, idempotency.Finish{Kind: first.Kind, Key: first.Key, JobID: first.ID, Token: "t1",
		State: idempotency.StateSucceeded, Result: "7", Now: now, ExpiresAt: now.Add(time.Hour), Meta: meta}); err != nil {
		t.Fatalf("finish with the transaction failing: %v, want the outcome recorded alone", err)
	}
	if d, err := r.client.GetChain(r.ctx, id); err != nil || d.Current != 1 || d.State != batch.ChainRunning || d.Steps[0].State != idempotency.StateSucceeded {
		t.Fatalf("the chain after its step's outcome was recorded alone: %+v, %v", d, err)
	}
	if ok, err := r.client.RepairChain(r.ctx, id); err != nil || !ok {
		t.Fatalf("RepairChain: %v, %v; want the step counted", ok, err)
	}
	if ok, err := r.client.RepairChain(r.ctx, id); err != nil || ok {
		t.Errorf("RepairChain again: %v, %v; want nothing (counted once)", ok, err)
	}
	r.start(1, 0)
	r.waitFor("the chain", time.Minute, func() bool {
		d, err := r.client.GetChain(r.ctx, id)
		return err == nil && d.State == batch.ChainSucceeded
	})
	d, err := r.client.GetChain(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Steps[1].Result != "17" {
		t.Errorf("step 2's result %q, want 17 (step 1's 7 passed on, plus 10)", d.Steps[1].Result)
	}
	if _, err := r.client.RepairChain(r.ctx, "no-such-chain"); !errors.Is(err, batch.ErrNotFound) {
		t.Errorf("RepairChain of an unknown chain: %v, want ErrNotFound", err)
	}
}

// TestPrepareRefusesMoreThanATransactionHolds: a batch whose children do not fit one transaction's
// 4 MB is refused by Prepare with ErrTooLarge, before anything is written (DynamoDB would refuse
// the transaction; the embedded emulator takes it).
func TestPrepareRefusesMoreThanATransactionHolds(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	var children []producer.Message
	for range 20 { // 20 × 300 KB that do not compress: above 4 MB, within 100 actions
		pad := make([]byte, 225<<10)
		if _, err := rand.Read(pad); err != nil {
			t.Fatal(err)
		}
		m, err := r.prod.PrepareRaw(r.ctx, Thumb{}.Kind(), []byte(`{"n":1,"pad":"`+base64.StdEncoding.EncodeToString(pad)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, m)
	}
	if _, err := r.client.Prepare(batch.Spec{ID: "too-big"}, true, children...); !errors.Is(err, batch.ErrTooLarge) {
		t.Errorf("Prepare of %d children of 300 KB: %v, want ErrTooLarge", len(children), err)
	}
	if _, err := r.client.Prepare(batch.Spec{ID: "fits"}, true, children[:5]...); err != nil {
		t.Errorf("Prepare of 5 children of 300 KB: %v", err)
	}
}

// TestAddThroughOutbox: 250 children counted and put into the outbox in the same transactions
// (chunks of at most 97, within DynamoDB's 100 actions), added twice (the second call counts and
// enqueues nothing: each chunk's fingerprint is written), then sealed: every child runs once
// through the relay, and the callback runs once with 250 succeeded.
func TestAddThroughOutbox(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("through-outbox")})
	if err != nil {
		t.Fatal(err)
	}
	children := r.thumbs(250, func(int) bool { return false })
	if err := b.AddThroughOutbox(r.ctx, children...); err != nil {
		t.Fatal(err)
	}
	if err := b.AddThroughOutbox(r.ctx, children...); err != nil {
		t.Fatalf("AddThroughOutbox again: %v", err)
	}
	if info := r.info(b.ID()); info.Total != 250 || info.Remaining != 250 {
		t.Fatalf("batch after two adds of the same 250: %+v", info)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.start(2, 0)
	r.waitFor("the callback", 2*time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Total != 250 || s.Succeeded != 250 {
		t.Errorf("summary: %+v, want 250 succeeded", s)
	}
	for i := range children {
		if n := r.runs(i); n != 1 {
			t.Errorf("child %d ran %d times, want 1", i, n)
		}
	}
}

// TestCancelRequestedChildThatFails: a running child asked to cancel (status CancelJob: a
// request on its record) fails before its worker noticed the request; the store records it
// cancelled instead of retrying (idempotency.ErrRecordedCancelled), and its batch counts it
// cancelled then, once, so that the batch finishes.
func TestCancelRequestedChildThatFails(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("cancel-request")})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(1, func(int) bool { return true })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	m, now := tagged[0], time.Now()
	meta := map[string]string{batch.MetaBatch: b.ID()}
	res, err := r.store.Claim(r.ctx, idempotency.ClaimRequest{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-run",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), Meta: meta})
	if err != nil || !res.Claimed {
		t.Fatalf("claim: %v, %+v", err, res)
	}
	c, err := r.status.CancelJob(r.ctx, m.Kind, m.Key, "not needed")
	if err != nil || !c.Requested {
		t.Fatalf("CancelJob of the running child: %+v, %v; want a request", c, err)
	}
	err = r.store.Finish(r.ctx, idempotency.Finish{Kind: m.Kind, Key: m.Key, JobID: m.ID, Token: "t-run",
		State: idempotency.StateRetrying, Error: "thumb 0 fails", Now: time.Now(), ExpiresAt: now.Add(time.Hour), Meta: meta})
	if !errors.Is(err, idempotency.ErrRecordedCancelled) {
		t.Fatalf("finish of the failed run: %v, want ErrRecordedCancelled", err)
	}
	if j, err := r.status.GetByID(r.ctx, m.ID); err != nil || j.State != idempotency.StateCancelled {
		t.Fatalf("child after the finish: %+v, %v; want cancelled", j, err)
	}
	if info := r.info(b.ID()); info.State != batch.StateDone || info.Cancelled != 1 || info.Remaining != 0 {
		t.Errorf("batch after its only child was recorded cancelled: %+v; want done, 1 cancelled", info)
	}
}
