package batch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// TestCancelRequestOfARunningChild: a child running under a live claim gets a cancellation request
// (status.CancelJob, `sqsworker cancel`: its record gets cxl_at) and then fails before its worker
// noticed the request. Its failure is recorded as cancelled (idempotency.ErrRecordedCancelled),
// and the batch counts it cancelled, so that the batch finishes and its callback runs; a chain's
// step in the same case stops its chain, cancelled.
func TestCancelRequestOfARunningChild(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("cancel-request")})
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := b.Track(r.ctx, r.thumbs(1, func(int) bool { return false })...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	chainSteps := make([]producer.Message, 2)
	for i := range chainSteps {
		if chainSteps[i], err = r.prod.Prepare(r.ctx, Step{Add: i}); err != nil {
			t.Fatal(err)
		}
	}
	chain, err := r.client.StartChain(r.ctx, batch.ChainSpec{}, chainSteps...)
	if err != nil {
		t.Fatal(err)
	}
	cd, err := r.client.GetChain(r.ctx, chain)
	if err != nil {
		t.Fatal(err)
	}
	first := cd.Steps[0]

	type job struct {
		kind, key, id string
		meta          map[string]string
	}
	for _, j := range []job{
		{tagged[0].Kind, tagged[0].Key, tagged[0].ID, map[string]string{batch.MetaBatch: b.ID()}},
		{first.Kind, first.Key, first.JobID, map[string]string{batch.MetaChain: chain, batch.MetaChainStep: "1"}},
	} {
		now := time.Now()
		res, err := r.store.Claim(r.ctx, idempotency.ClaimRequest{Kind: j.kind, Key: j.key, JobID: j.id, Token: "t-" + j.id,
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), Meta: j.meta})
		if err != nil || !res.Claimed {
			t.Fatalf("claim %s: %v, %+v", j.id, err, res)
		}
		cr, err := r.status.CancelJob(r.ctx, j.kind, j.key, "stop it")
		if err != nil || !cr.Requested {
			t.Fatalf("cancel %s while it runs: %+v, %v; want a request", j.id, cr, err)
		}
		// The job fails (a retry) before its worker noticed the request: the store records it
		// cancelled instead.
		err = r.store.Finish(r.ctx, idempotency.Finish{Kind: j.kind, Key: j.key, JobID: j.id, Token: "t-" + j.id,
			State: idempotency.StateRetrying, Error: "boom", Now: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Meta: j.meta})
		if !errors.Is(err, idempotency.ErrRecordedCancelled) {
			t.Fatalf("finish %s: %v, want ErrRecordedCancelled", j.id, err)
		}
		if st, err := r.status.GetByID(r.ctx, j.id); err != nil || st.State != idempotency.StateCancelled {
			t.Fatalf("job %s after the finish: %+v, %v; want cancelled", j.id, st, err)
		}
	}
	if info := r.info(b.ID()); info.Cancelled != 1 || info.Remaining != 0 || info.State != batch.StateDone {
		t.Errorf("batch after its child was recorded cancelled: %+v, want 1 cancelled, done", info)
	}
	if cd, err := r.client.GetChain(r.ctx, chain); err != nil || cd.State != batch.ChainCancelled || cd.FailedStep != 1 {
		t.Errorf("chain after its step was recorded cancelled: %+v, %v; want cancelled at step 1", cd.ChainInfo, err)
	}
	r.start(1, 0)
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Cancelled != 1 || s.Total != 1 || len(s.NotSucceeded) != 1 || s.NotSucceeded[0] != tagged[0].ID {
		t.Errorf("summary: %+v, want the child cancelled", s)
	}
}

// TestCancelRequestStopsARunningChild: `sqsworker cancel` of a batch child that runs writes a
// request on its record; its worker notices it, cancels the job's context, and records the job
// cancelled in the transaction that counts it: the batch finishes, its callback runs once with
// the child cancelled.
func TestCancelRequestStopsARunningChild(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	b, err := r.client.Start(r.ctx, batch.Spec{Callback: r.callback("stop-running")})
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
	if err := b.Seal(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.start(1, 0)
	<-r.started
	cr, err := r.status.CancelByID(r.ctx, slow.ID, "not needed")
	if err != nil || !cr.Requested {
		t.Fatalf("cancel of the running child: %+v, %v; want a request", cr, err)
	}
	r.waitFor("the callback", time.Minute, func() bool { return r.cbRuns.Load() == 1 })
	if s := r.summaries()[0]; s.Cancelled != 1 || s.Total != 1 {
		t.Errorf("summary: %+v, want the child cancelled", s)
	}
	d, err := r.client.Get(r.ctx, b.ID(), -1)
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Children[0]; c.State != idempotency.StateCancelled || c.Counted != "cancelled" {
		t.Errorf("the child: %s, counted %q; want cancelled", c.State, c.Counted)
	}
}
