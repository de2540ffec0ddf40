package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func slotReq(job string, limit int, now, until time.Time) flow.SlotRequest {
	return flow.SlotRequest{Name: "partner.api", Key: "acct-1", Limit: limit, JobID: job, LeaseUntil: until, Now: now}
}

// TestSlotsOnTheEmulator: a limit of 2 takes two holders and refuses a third (saying how many hold
// it and when the earliest lease ends); a second delivery of a holder's job is refused as held; a
// release frees the slot; a release of a slot that is no longer the caller's changes nothing.
func TestSlotsOnTheEmulator(t *testing.T) {
	t.Parallel()
	tbl, client, table := newTable(t)
	ctx := context.Background()
	a, err := tbl.AcquireSlot(ctx, slotReq("JOBA", 2, t0, t0.Add(time.Minute)))
	if err != nil || !a.Acquired || a.Writes != 1 {
		t.Fatalf("A: %+v, %v; want acquired in one write", a, err)
	}
	b, err := tbl.AcquireSlot(ctx, slotReq("JOBB", 2, t0, t0.Add(2*time.Minute)))
	if err != nil || !b.Acquired {
		t.Fatalf("B: %+v, %v", b, err)
	}
	c, err := tbl.AcquireSlot(ctx, slotReq("JOBC", 2, t0, t0.Add(time.Minute)))
	if err != nil || c.Acquired || c.Holders != 2 || !c.EarliestEnd.Equal(t0.Add(time.Minute)) {
		t.Fatalf("C: %+v, %v; want refused, 2 holders, earliest end +1m", c, err)
	}
	dup, err := tbl.AcquireSlot(ctx, slotReq("JOBA", 2, t0, t0.Add(time.Minute)))
	if err != nil || dup.Acquired || !dup.HeldUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("second delivery of A: %+v, %v; want refused as held until +1m", dup, err)
	}
	if err := tbl.ReleaseSlot(ctx, a.Slot); err != nil {
		t.Fatal(err)
	}
	c, err = tbl.AcquireSlot(ctx, slotReq("JOBC", 2, t0, t0.Add(time.Minute)))
	if err != nil || !c.Acquired {
		t.Fatalf("C after A's release: %+v, %v", c, err)
	}
	if err := tbl.ReleaseSlot(ctx, a.Slot); err != nil { // twice: a no-op
		t.Fatalf("second release: %v", err)
	}
	item := getItem(t, client, table, "$limit#partner.api#acct-1")
	if n := item["n"].(*types.AttributeValueMemberN).Value; n != "2" {
		t.Errorf("n = %s after a double release, want 2", n)
	}
	holders := 0
	for name := range item {
		if strings.HasPrefix(name, "h_") {
			holders++
		}
	}
	if holders != 2 || item["h_JOBB"] == nil || item["h_JOBC"] == nil {
		t.Errorf("holder attributes %v, want h_JOBB and h_JOBC", item)
	}
	if gp := item[idempotency.AttrGSI1PK].(*types.AttributeValueMemberS).Value; gp != flow.IndexPartitionLimits {
		t.Errorf("gsi1pk = %q, want %q", gp, flow.IndexPartitionLimits)
	}
	if item[idempotency.AttrKind] != nil || item[idempotency.AttrState] != nil {
		t.Errorf("a limit item has job attributes: %v", item)
	}
}

// TestExpiredHoldersArePruned: a holder whose lease ended (its job died) is removed by the next
// acquisition, in a second conditional write; a late release or renewal by the dead holder does
// not touch the slot that replaced it; a redelivery of a job whose own slot expired takes it back.
func TestExpiredHoldersArePruned(t *testing.T) {
	t.Parallel()
	tbl, client, table := newTable(t)
	ctx := context.Background()
	dead, err := tbl.AcquireSlot(ctx, slotReq("DEAD", 1, t0, t0.Add(10*time.Second)))
	if err != nil || !dead.Acquired {
		t.Fatalf("dead: %+v, %v", dead, err)
	}
	early, err := tbl.AcquireSlot(ctx, slotReq("NEXT", 1, t0.Add(9*time.Second), t0.Add(time.Minute)))
	if err != nil || early.Acquired || early.Pruned != 0 {
		t.Fatalf("before the lease ends: %+v, %v; want refused", early, err)
	}
	next, err := tbl.AcquireSlot(ctx, slotReq("NEXT", 1, t0.Add(10*time.Second), t0.Add(time.Minute)))
	if err != nil || !next.Acquired || next.Pruned != 1 || next.Writes != 2 {
		t.Fatalf("after the lease ends: %+v, %v; want acquired, 1 pruned, in 2 writes", next, err)
	}
	if err := tbl.ReleaseSlot(ctx, dead.Slot); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.RenewSlot(ctx, dead.Slot, t0.Add(time.Hour)); !errors.Is(err, flow.ErrSlotLost) {
		t.Errorf("renewal of the pruned slot: %v, want ErrSlotLost", err)
	}
	item := getItem(t, client, table, "$limit#partner.api#acct-1")
	if item["h_NEXT"] == nil || item["h_DEAD"] != nil || item["n"].(*types.AttributeValueMemberN).Value != "1" {
		t.Fatalf("item %v; want NEXT alone, n = 1", item)
	}
	renewed, err := tbl.RenewSlot(ctx, next.Slot, t0.Add(2*time.Minute))
	if err != nil || !renewed.LeaseUntil.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("renew: %+v, %v", renewed, err)
	}
	// NEXT dies too; its job comes back (a redelivery) after the lease: it takes its slot back.
	again, err := tbl.AcquireSlot(ctx, slotReq("NEXT", 1, t0.Add(3*time.Minute), t0.Add(4*time.Minute)))
	if err != nil || !again.Acquired || again.Pruned != 1 {
		t.Fatalf("redelivery after its own lease: %+v, %v", again, err)
	}
	if err := tbl.ReleaseSlot(ctx, renewed); err != nil { // the old delivery's late release
		t.Fatal(err)
	}
	if item := getItem(t, client, table, "$limit#partner.api#acct-1"); item["h_NEXT"] == nil || item["n"].(*types.AttributeValueMemberN).Value != "1" {
		t.Fatalf("the old delivery's release removed the new one's slot: %v", item)
	}
	if err := tbl.ReleaseSlot(ctx, again.Slot); err != nil {
		t.Fatal(err)
	}
	if item := getItem(t, client, table, "$limit#partner.api#acct-1"); item["n"].(*types.AttributeValueMemberN).Value != "0" {
		t.Fatalf("after the last release: %v", item)
	}
}

// TestTokensOnTheEmulator: 2 per second with a burst of 3 grants three at once and refuses the
// fourth, saying when the next is due; that token is granted then; the writes follow the hint.
func TestTokensOnTheEmulator(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	ctx := context.Background()
	req := func(now, hint time.Time) flow.TokenRequest {
		return flow.TokenRequest{Name: "email.send", Key: "", Limit: 2, Period: time.Second, Burst: 3, Now: now, Hint: hint}
	}
	var hint time.Time
	for i := range 3 {
		r, err := tbl.TakeToken(ctx, req(t0, hint))
		if err != nil || !r.Granted {
			t.Fatalf("token %d: %+v, %v", i+1, r, err)
		}
		if i > 0 && r.Writes != 1 {
			t.Errorf("token %d took %d writes with a hint, want 1", i+1, r.Writes)
		}
		hint = r.TAT
	}
	if want := t0.Add(1500 * time.Millisecond); !hint.Equal(want) {
		t.Errorf("bucket time %s after 3 tokens, want %s", hint, want)
	}
	r, err := tbl.TakeToken(ctx, req(t0, hint))
	if err != nil || r.Granted || r.Wait != 500*time.Millisecond {
		t.Fatalf("fourth token: %+v, %v; want refused, due in 500ms", r, err)
	}
	r, err = tbl.TakeToken(ctx, req(t0.Add(500*time.Millisecond), hint))
	if err != nil || !r.Granted || r.Writes != 1 {
		t.Fatalf("when due: %+v, %v", r, err)
	}
	// A wrong hint (idle while the bucket is busy) costs one refused write.
	r, err = tbl.TakeToken(ctx, req(t0.Add(1600*time.Millisecond), time.Time{}))
	if err != nil || !r.Granted || r.Writes != 2 {
		t.Fatalf("with a wrong hint: %+v, %v; want granted in 2 writes", r, err)
	}
	// After a quiet time the bucket is idle again: a burst is allowed.
	later := t0.Add(time.Minute)
	for i := range 3 {
		r, err := tbl.TakeToken(ctx, req(later, r.TAT))
		if err != nil || !r.Granted {
			t.Fatalf("after a quiet minute, token %d: %+v, %v", i+1, r, err)
		}
	}
}

// TestPausesOnTheEmulator: kinds and queues are paused and resumed by name; the pauses read back
// with who and why; bad names and notes are refused.
func TestPausesOnTheEmulator(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(t)
	ctx := context.Background()
	if p, err := tbl.Pauses(ctx); err != nil || len(p.Kinds)+len(p.Queues) != 0 {
		t.Fatalf("no pauses yet: %+v, %v", p, err)
	}
	if err := tbl.PauseKind(ctx, flow.Pause{Kind: "email.send", By: "ops", Note: "provider outage <b>", At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.PauseQueue(ctx, flow.Pause{Queue: "myapp-jobs", At: t0}); err != nil {
		t.Fatal(err)
	}
	p, err := tbl.Pauses(ctx)
	if err != nil || !p.KindPaused("email.send") || p.KindPaused("email.other") || !p.QueuePaused("myapp-jobs") {
		t.Fatalf("pauses %+v, %v", p, err)
	}
	if k := p.Kinds[0]; k.By != "ops" || k.Note != "provider outage <b>" || !k.At.Equal(t0) {
		t.Errorf("kind pause %+v", k)
	}
	if was, err := tbl.ResumeKind(ctx, "email.send"); err != nil || !was {
		t.Fatalf("resume: %v, %v", was, err)
	}
	if was, err := tbl.ResumeKind(ctx, "email.send"); err != nil || was {
		t.Fatalf("second resume: %v, %v; want not paused", was, err)
	}
	if was, err := tbl.ResumeQueue(ctx, "myapp-jobs"); err != nil || !was {
		t.Fatalf("resume queue: %v, %v", was, err)
	}
	for _, bad := range []error{
		tbl.PauseKind(ctx, flow.Pause{Kind: "Bad Kind"}),
		tbl.PauseQueue(ctx, flow.Pause{Queue: "no/slash"}),
		tbl.PauseKind(ctx, flow.Pause{Kind: "ok", Note: strings.Repeat("x", flow.MaxPauseNote+1)}),
		tbl.PauseKind(ctx, flow.Pause{Kind: "ok", By: "\xff"}),
	} {
		if !errors.Is(bad, flow.ErrInvalid) {
			t.Errorf("bad input: %v, want ErrInvalid", bad)
		}
	}
}

func getItem(t *testing.T, client *dynamodb.Client, table, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{idempotency.AttrPK: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// conflictOnce refuses the first UpdateItem with a TransactionConflictException, as DynamoDB
// does while a transaction holds the item.
type conflictOnce struct {
	flow.DynamoDBAPI
	n atomic.Int32
}

func (c *conflictOnce) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.n.Add(1) == 1 {
		return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// TestWritesRetryTransactionConflicts: a write refused by a transaction conflict (it did not
// happen) is sent again, through the shared retry of the table's writers.
func TestWritesRetryTransactionConflicts(t *testing.T) {
	t.Parallel()
	_, client, table := newTable(t)
	cc := &conflictOnce{DynamoDBAPI: client}
	tbl, err := flow.NewTable(flow.TableConfig{Client: cc, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tbl.AcquireSlot(context.Background(), slotReq("JOBA", 1, t0, t0.Add(time.Minute)))
	if err != nil || !res.Acquired || cc.n.Load() != 2 {
		t.Fatalf("acquire: %+v, %v after %d writes; want acquired on the second", res, err, cc.n.Load())
	}
}
