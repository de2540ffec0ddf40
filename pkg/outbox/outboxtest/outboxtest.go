// Package outboxtest checks that an outbox.Store (and its outbox.Inspector) keeps the package's
// contract, in the spirit of testing/slogtest: run it from a test of your store.
//
//	func TestConformance(t *testing.T) {
//		outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
//			s := newIsolatedStore(t)
//			return outboxtest.Harness{Store: s, Inspector: s, Insert: s.insertCommitted}
//		})
//	}
//
// Every case is a parallel subtest that calls newHarness for a store of its own: a claim takes
// whatever is due, so cases must not see each other's entries (a fresh table, schema or key
// prefix per call). All times are explicit (Claim.Now, …) and lie in 2050, so nothing sleeps.
// Precision the suite expects: times kept to the millisecond.
package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Harness is one isolated store under test.
type Harness struct {
	// Store is the store under test. Required.
	Store outbox.Store
	// Inspector is the same store's inspection side. Required.
	Inspector outbox.Inspector
	// Insert writes entries as one committed transaction, in order, the way the store's own
	// enqueue path does, keeping each entry's CreatedAt and AvailableAt (the suite sets both).
	// Required.
	Insert func(ctx context.Context, entries []outbox.Entry) error
}

// T0 is the suite's clock origin; every time the suite uses is derived from it.
var T0 = time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)

// Queue URLs of the suite's messages.
const (
	StandardQueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/outboxtest-jobs"
	FIFOQueueURL     = "https://sqs.us-east-1.amazonaws.com/123456789012/outboxtest-jobs.fifo"
)

const lease = 30 * time.Second

func at(d time.Duration) time.Time { return T0.Add(d) }

// Run runs the conformance suite.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if h.Store == nil || h.Inspector == nil || h.Insert == nil {
				t.Fatal("outboxtest: the Harness needs Store, Inspector and Insert")
			}
			c.run(&env{t: t, h: h, ctx: context.Background()})
		})
	}
}

type env struct {
	t   *testing.T
	h   Harness
	ctx context.Context
	n   int
}

// noSQS is never called: the suite only prepares messages.
type noSQS struct{}

func (noSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("outboxtest: no SQS")
}

func (noSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("outboxtest: no SQS")
}

type testArgs struct {
	N    int    `json:"n"`
	Text string `json:"text,omitempty"`
}

func (testArgs) Kind() string { return "outboxtest.job" }

// entry builds a pending entry created at T0 (group "" on the standard queue).
func (e *env) entry(group string, opts ...producer.Option) outbox.Entry {
	e.t.Helper()
	url := StandardQueueURL
	if group != "" {
		url = FIFOQueueURL
		opts = append(opts, producer.WithGroupID(group))
	}
	p, err := producer.New(producer.Config{SQS: noSQS{}, QueueURL: url, Clock: func() time.Time { return T0 }})
	if err != nil {
		e.t.Fatal(err)
	}
	e.n++
	m, err := p.Prepare(e.ctx, testArgs{N: e.n}, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return outbox.Entry{Message: m, State: outbox.StatePending, CreatedAt: T0, AvailableAt: T0}
}

func (e *env) insert(entries ...outbox.Entry) {
	e.t.Helper()
	if err := e.h.Insert(e.ctx, entries); err != nil {
		e.t.Fatalf("Insert: %v", err)
	}
}

func (e *env) claim(owner string, max int, now time.Time) []outbox.Entry {
	e.t.Helper()
	got, err := e.h.Store.Claim(e.ctx, outbox.Claim{Owner: owner, Max: max, Now: now, Until: now.Add(lease)})
	if err != nil {
		e.t.Fatalf("Claim(%s, %d, %v): %v", owner, max, now, err)
	}
	return got
}

func (e *env) complete(owner string, outcomes ...outbox.Outcome) {
	e.t.Helper()
	if err := e.h.Store.Complete(e.ctx, owner, outcomes); err != nil {
		e.t.Fatalf("Complete(%s): %v", owner, err)
	}
}

func (e *env) get(id string) (outbox.Entry, bool) {
	e.t.Helper()
	got, err := e.h.Inspector.Get(e.ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return got, false
	}
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	return got, true
}

func ids(entries []outbox.Entry) []string {
	out := make([]string, len(entries))
	for i := range entries {
		out[i] = entries[i].ID()
	}
	return out
}

func (e *env) wantIDs(what string, got []outbox.Entry, want ...outbox.Entry) {
	e.t.Helper()
	g, w := ids(got), ids(want)
	if strings.Join(g, ",") != strings.Join(w, ",") {
		e.t.Errorf("%s: got %v, want %v", what, g, w)
	}
}

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

func sent(c outbox.Entry) outbox.Outcome {
	return outbox.Outcome{ID: c.ID(), Attempts: c.Attempts, Sent: true}
}

func failed(c outbox.Entry, err string, next time.Time) outbox.Outcome {
	return outbox.Outcome{ID: c.ID(), Attempts: c.Attempts, Error: err, AvailableAt: next}
}

var cases = []struct {
	name string
	run  func(e *env)
}{
	{"ClaimsDueEntriesInCommitOrder", func(e *env) {
		a, b, c := e.entry(""), e.entry(""), e.entry("")
		later := e.entry("")
		later.AvailableAt = at(time.Hour)
		e.insert(a, b)
		e.insert(later, c)
		got := e.claim("r1", 10, at(time.Second))
		e.wantIDs("claim", got, a, b, c)
		for _, g := range got {
			if g.Attempts != 1 || g.LockedBy != "r1" || !sameTime(g.LockedUntil, at(time.Second+lease)) || g.State != outbox.StatePending {
				e.t.Errorf("claimed %s: attempts %d locked by %q until %v state %s", g.ID(), g.Attempts, g.LockedBy, g.LockedUntil, g.State)
			}
		}
		for _, g := range got {
			e.complete("r1", sent(g))
		}
		e.wantIDs("claim after the delay", e.claim("r1", 10, at(time.Hour)), later)
	}},
	{"ClaimKeepsTheMessage", func(e *env) {
		attrs := map[string]types.MessageAttributeValue{
			"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme ✓")},
			"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		}
		std := e.entry("", producer.WithKey("key ✓"), producer.WithAttributes(attrs), producer.WithDelay(time.Hour), producer.WithMeta("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
		fifo := e.entry("group-1", producer.WithDeduplicationID("dedup-1"))
		e.insert(std, fifo)
		got := e.claim("r1", 10, at(time.Second))
		if len(got) != 2 {
			e.t.Fatalf("claimed %v", ids(got))
		}
		for i, want := range []outbox.Entry{std, fifo} {
			g := got[i].Message
			w := want.Message
			if g.ID != w.ID || g.Kind != w.Kind || g.Key != w.Key || g.Body != w.Body || g.QueueURL != w.QueueURL ||
				g.GroupID != w.GroupID || g.DeduplicationID != w.DeduplicationID || !sameTime(g.RunAt, w.RunAt) {
				e.t.Errorf("message %d changed in the store:\n got  %+v\n want %+v", i, g, w)
			}
			if len(g.Attributes) != len(w.Attributes) {
				e.t.Errorf("message %d attributes %v, want %v", i, g.Attributes, w.Attributes)
			}
			for name, wv := range w.Attributes {
				gv := g.Attributes[name]
				if aws.ToString(gv.DataType) != aws.ToString(wv.DataType) || aws.ToString(gv.StringValue) != aws.ToString(wv.StringValue) || string(gv.BinaryValue) != string(wv.BinaryValue) {
					e.t.Errorf("attribute %s = %+v, want %+v", name, gv, wv)
				}
			}
			if !sameTime(got[i].CreatedAt, T0) {
				e.t.Errorf("CreatedAt %v, want %v", got[i].CreatedAt, T0)
			}
		}
		if g, ok := e.get(std.ID()); !ok || g.Message.Body != std.Message.Body || g.Attempts != 1 || g.LockedBy != "r1" {
			e.t.Errorf("Get = %+v, %v", g, ok)
		}
	}},
	{"ClaimRespectsMax", func(e *env) {
		var all []outbox.Entry
		for range 5 {
			all = append(all, e.entry(""))
		}
		e.insert(all...)
		e.wantIDs("first claim", e.claim("r1", 2, at(time.Second)), all[:2]...)
		e.wantIDs("second claim", e.claim("r2", 10, at(time.Second)), all[2:]...)
		e.wantIDs("third claim", e.claim("r3", 10, at(time.Second)))
	}},
	{"LeaseHidesAndExpires", func(e *env) {
		a := e.entry("")
		e.insert(a)
		e.wantIDs("claim", e.claim("r1", 10, at(0)), a)
		e.wantIDs("claim inside the lease", e.claim("r2", 10, at(lease-time.Second)))
		got := e.claim("r2", 10, at(lease))
		e.wantIDs("claim when the lease ended", got, a)
		if len(got) == 1 && (got[0].Attempts != 2 || got[0].LockedBy != "r2") {
			e.t.Errorf("taken over: attempts %d locked by %s, want 2 and r2", got[0].Attempts, got[0].LockedBy)
		}
	}},
	{"SentLeavesTheOutbox", func(e *env) {
		a, b := e.entry(""), e.entry("")
		e.insert(a, b)
		got := e.claim("r1", 10, at(0))
		e.complete("r1", sent(got[0]))
		if g, ok := e.get(a.ID()); ok && g.State != outbox.StateSent {
			e.t.Errorf("sent entry is still %s", g.State)
		}
		e.wantIDs("claim after the lease", e.claim("r2", 10, at(2*lease)), b)
		page, err := e.h.Inspector.List(e.ctx, outbox.ListQuery{State: outbox.StatePending})
		if err != nil {
			e.t.Fatal(err)
		}
		e.wantIDs("pending list", page.Entries, b)
	}},
	{"FailedWaitsAndKeepsTheError", func(e *env) {
		a := e.entry("")
		e.insert(a)
		c := e.claim("r1", 10, at(0))[0]
		e.complete("r1", failed(c, "SQS said no ✗", at(time.Minute)))
		g, ok := e.get(a.ID())
		if !ok || g.LastError != "SQS said no ✗" || g.LockedBy != "" || g.Attempts != 1 || !sameTime(g.AvailableAt, at(time.Minute)) || g.State != outbox.StatePending {
			e.t.Errorf("after a failure: %+v (found %v)", g, ok)
		}
		e.wantIDs("claim before the retry is due", e.claim("r1", 10, at(time.Minute-time.Millisecond)))
		got := e.claim("r1", 10, at(time.Minute))
		e.wantIDs("claim when the retry is due", got, a)
		if len(got) == 1 && got[0].Attempts != 2 {
			e.t.Errorf("attempts %d, want 2", got[0].Attempts)
		}
	}},
	{"DeadIsKeptAndRetryable", func(e *env) {
		a, b := e.entry(""), e.entry("")
		e.insert(a, b)
		c := e.claim("r1", 1, at(0))[0]
		e.complete("r1", outbox.Outcome{ID: c.ID(), Attempts: c.Attempts, Dead: true, Error: "poison"})
		g, ok := e.get(a.ID())
		if !ok || g.State != outbox.StateDead || g.LastError != "poison" || g.LockedBy != "" {
			e.t.Errorf("dead entry: %+v (found %v)", g, ok)
		}
		e.wantIDs("claim skips the dead", e.claim("r1", 10, at(time.Hour)), b)
		page, err := e.h.Inspector.List(e.ctx, outbox.ListQuery{State: outbox.StateDead})
		if err != nil {
			e.t.Fatal(err)
		}
		e.wantIDs("dead list", page.Entries, a)
		if err := e.h.Inspector.Retry(e.ctx, a.ID()); err != nil {
			e.t.Fatal(err)
		}
		got := e.claim("r2", 10, at(time.Hour))
		e.wantIDs("claim after Retry", got, a)
		if len(got) == 1 && got[0].Attempts != 1 {
			e.t.Errorf("attempts after Retry and a claim: %d, want 1", got[0].Attempts)
		}
		if err := e.h.Inspector.Retry(e.ctx, "no-such-entry"); !errors.Is(err, outbox.ErrNotFound) {
			e.t.Errorf("Retry(unknown) = %v, want ErrNotFound", err)
		}
		if _, err := e.h.Inspector.Get(e.ctx, "no-such-entry"); !errors.Is(err, outbox.ErrNotFound) {
			e.t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
		}
	}},
	{"ReleaseUndoesTheAttempt", func(e *env) {
		a := e.entry("")
		e.insert(a)
		c := e.claim("r1", 10, at(0))[0]
		e.complete("r1", outbox.Outcome{ID: c.ID(), Attempts: c.Attempts, Release: true})
		got := e.claim("r2", 10, at(time.Millisecond))
		e.wantIDs("claim after a release", got, a)
		if len(got) == 1 && got[0].Attempts != 1 {
			e.t.Errorf("attempts %d after a release and a claim, want 1", got[0].Attempts)
		}
	}},
	{"ReleaseWaitsForItsAvailableAt", func(e *env) {
		// A relay defers an entry it could not send yet (a delay its producer cannot express)
		// by releasing it with a later AvailableAt: no attempt spent, not due before then.
		a := e.entry("")
		e.insert(a)
		c := e.claim("r1", 10, at(0))[0]
		e.complete("r1", outbox.Outcome{ID: c.ID(), Attempts: c.Attempts, Release: true, AvailableAt: at(time.Hour)})
		g, ok := e.get(a.ID())
		if !ok || g.State != outbox.StatePending || g.Attempts != 0 || g.LockedBy != "" || !sameTime(g.AvailableAt, at(time.Hour)) {
			e.t.Errorf("after a release until %v: %+v (found %v)", at(time.Hour), g, ok)
		}
		e.wantIDs("claim before AvailableAt", e.claim("r2", 10, at(time.Hour-time.Millisecond)))
		got := e.claim("r2", 10, at(time.Hour))
		e.wantIDs("claim at AvailableAt", got, a)
		if len(got) == 1 && got[0].Attempts != 1 {
			e.t.Errorf("attempts %d after a deferral and a claim, want 1", got[0].Attempts)
		}
	}},
	{"RetryRefusesALiveClaim", func(e *env) {
		// Retry on an entry a relay is sending would clear its claim: the relay's guarded
		// write-back would then fail and the entry be sent twice. The suite's claims lie in 2050,
		// so they are live by any store's clock.
		a, b := e.entry(""), e.entry("")
		e.insert(a, b)
		got := e.claim("r1", 10, at(0))
		if len(got) != 2 {
			e.t.Fatalf("claimed %v", ids(got))
		}
		if err := e.h.Inspector.Retry(e.ctx, a.ID()); !errors.Is(err, outbox.ErrClaimed) {
			e.t.Errorf("Retry(claimed) = %v, want ErrClaimed", err)
		}
		if g, ok := e.get(a.ID()); !ok || g.LockedBy != "r1" || g.Attempts != 1 {
			e.t.Errorf("a refused Retry changed the entry: %+v (found %v)", g, ok)
		}
		// The relay's write-back still holds, and once the claim is gone Retry works.
		e.complete("r1", sent(got[0]), failed(got[1], "throttled", at(time.Hour)))
		if g, ok := e.get(a.ID()); ok && g.State != outbox.StateSent {
			e.t.Errorf("the relay's write-back after a refused Retry: %s is %s", a.ID(), g.State)
		}
		if err := e.h.Inspector.Retry(e.ctx, b.ID()); err != nil {
			e.t.Errorf("Retry(waiting for a retry) = %v", err)
		}
		e.wantIDs("claim after Retry", e.claim("r2", 10, at(time.Second)), b)
	}},
	{"WriteBackIsGuardedByTheClaim", func(e *env) {
		a, b := e.entry(""), e.entry("")
		e.insert(a, b)
		old := e.claim("r1", 10, at(0))
		// r1 stalls past its lease; r2 takes both over.
		taken := e.claim("r2", 10, at(lease))
		e.wantIDs("take-over", taken, a, b)
		// r1's late write-back must change nothing.
		e.complete("r1", sent(old[0]), failed(old[1], "late", at(time.Hour)))
		for _, id := range []string{a.ID(), b.ID()} {
			g, ok := e.get(id)
			if !ok || g.LockedBy != "r2" || g.Attempts != 2 || g.LastError != "" {
				e.t.Errorf("after r1's late write-back, %s = %+v (found %v)", id, g, ok)
			}
		}
		// The same owner with an older claim is refused as well.
		again := e.claim("r2", 10, at(3*lease))
		e.complete("r2", sent(taken[0]))
		if _, ok := e.get(a.ID()); !ok {
			e.t.Errorf("a write-back for an older claim of the same owner deleted %s", a.ID())
		}
		e.complete("r2", sent(again[0]), sent(again[1]))
		for _, id := range []string{a.ID(), b.ID()} {
			if g, ok := e.get(id); ok && g.State != outbox.StateSent {
				e.t.Errorf("%s is still %s after r2 sent it", id, g.State)
			}
		}
	}},
	{"FIFOGroupsAreClaimedInOrder", func(e *env) {
		g1, g2, g3 := e.entry("g"), e.entry("g"), e.entry("g")
		h1, h2 := e.entry("h"), e.entry("h")
		e.insert(g1, h1)
		e.insert(g2, h2, g3)
		got := e.claim("r1", 1, at(0))
		e.wantIDs("first claim", got, g1)
		// g1 is claimed by r1: r2 must not get g2 or g3, and gets h's.
		hs := e.claim("r2", 10, at(0))
		e.wantIDs("second claim", hs, h1, h2)
		if len(hs) == 2 {
			e.complete("r2", sent(hs[0]), sent(hs[1]))
		}
		// g1 fails and waits: g2 still waits behind it.
		e.complete("r1", failed(got[0], "throttled", at(time.Minute)))
		e.wantIDs("claim while g1 waits", e.claim("r3", 10, at(time.Second)))
		// g1 is due again: the whole group comes, in order.
		again := e.claim("r3", 10, at(time.Minute))
		e.wantIDs("claim when g1 is due", again, g1, g2, g3)
		// g1 dies: it no longer holds the group back.
		e.complete("r3", outbox.Outcome{ID: again[0].ID(), Attempts: again[0].Attempts, Dead: true, Error: "poison"},
			outbox.Outcome{ID: again[1].ID(), Attempts: again[1].Attempts, Release: true},
			outbox.Outcome{ID: again[2].ID(), Attempts: again[2].Attempts, Release: true})
		e.wantIDs("claim after g1 died", e.claim("r4", 10, at(time.Minute)), g2, g3)
	}},
	{"ConcurrentClaimsNeverShareAnEntry", func(e *env) {
		const n = 150
		var all []outbox.Entry
		for i := range n {
			group := ""
			if i%3 == 0 {
				group = fmt.Sprintf("g%d", i%4)
			}
			all = append(all, e.entry(group))
		}
		for i := 0; i < n; i += 50 {
			e.insert(all[i:min(i+50, n)]...)
		}
		var mu sync.Mutex
		claimed := map[string]string{}
		var wg sync.WaitGroup
		for w := range 6 {
			owner := fmt.Sprintf("r%d", w)
			wg.Go(func() {
				for idle := 0; idle < 3; {
					got, err := e.h.Store.Claim(e.ctx, outbox.Claim{Owner: owner, Max: 7, Now: at(0), Until: at(time.Hour)})
					if err != nil {
						e.t.Errorf("Claim: %v", err)
						return
					}
					if len(got) == 0 {
						idle++
						continue
					}
					idle = 0
					var outs []outbox.Outcome
					mu.Lock()
					for _, g := range got {
						if prev, dup := claimed[g.ID()]; dup {
							e.t.Errorf("%s claimed by %s and %s", g.ID(), prev, owner)
						}
						claimed[g.ID()] = owner
						outs = append(outs, sent(g))
					}
					mu.Unlock()
					if err := e.h.Store.Complete(e.ctx, owner, outs); err != nil {
						e.t.Errorf("Complete: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if len(claimed) != n {
			e.t.Errorf("%d of %d entries claimed", len(claimed), n)
		}
	}},
	{"ListPagesOldestFirst", func(e *env) {
		var all []outbox.Entry
		for range 23 {
			all = append(all, e.entry(""))
		}
		e.insert(all...)
		var got []outbox.Entry
		token := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				e.t.Fatal("List does not end")
			}
			p, err := e.h.Inspector.List(e.ctx, outbox.ListQuery{State: outbox.StatePending, Limit: 10, PageToken: token})
			if err != nil {
				e.t.Fatal(err)
			}
			if len(p.Entries) > 10 {
				e.t.Errorf("page of %d entries, limit 10", len(p.Entries))
			}
			got = append(got, p.Entries...)
			if token = p.NextPageToken; token == "" {
				break
			}
		}
		e.wantIDs("listed", got, all...)
		if _, err := e.h.Inspector.List(e.ctx, outbox.ListQuery{State: "bogus"}); !errors.Is(err, outbox.ErrInvalid) {
			e.t.Errorf("List(bogus state) = %v, want ErrInvalid", err)
		}
		if _, err := e.h.Inspector.List(e.ctx, outbox.ListQuery{State: outbox.StatePending, PageToken: "garbage\x81"}); !errors.Is(err, outbox.ErrInvalid) {
			e.t.Errorf("List(garbage token) = %v, want ErrInvalid", err)
		}
	}},
}
