package status

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

func TestResetForRedrive(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	old := testNow.Add(-time.Hour) // a running record written then has an expired lease
	live := testNow.Add(time.Hour)
	dead := func(key string) seed {
		return seed{kind: "email.send", key: key, jobID: "job-" + key, state: idempotency.StateDead, runs: 3,
			upd: old, exp: live, errText: "boom", reason: "exhausted"}
	}
	with := func(s seed, f func(*seed)) seed { f(&s); return s }
	for _, tc := range []struct {
		name     string
		seed     *seed // nil: no record
		keepRuns bool
		// want: the record afterwards; changed false means untouched.
		changed  bool
		wantRuns int
	}{
		{"dead", ptr(dead("dead")), false, true, 0},
		{"dead keeping runs", ptr(dead("dead-keep")), true, true, 3},
		{"retrying", ptr(with(dead("retrying"), func(s *seed) { s.state, s.reason, s.runs = idempotency.StateRetrying, "", 2 })), false, true, 0},
		// Reset by an earlier release, which kept the reason: only the reason goes.
		{"retrying with a reason", ptr(with(dead("retrying-reason"), func(s *seed) { s.state, s.runs = idempotency.StateRetrying, 0 })), false, true, 0},
		{"running, lease expired", ptr(with(dead("crashed"), func(s *seed) { s.state, s.reason, s.tok = idempotency.StateRunning, "", "t1" })), false, true, 0},
		{"running, lease live", ptr(with(dead("running"), func(s *seed) { s.state, s.reason, s.tok, s.upd = idempotency.StateRunning, "", "t1", testNow })), false, false, 3},
		{"succeeded", ptr(with(dead("ok"), func(s *seed) { s.state, s.reason = idempotency.StateSucceeded, "" })), false, false, 3},
		{"cancelled", ptr(with(dead("cancelled"), func(s *seed) { s.state = idempotency.StateCancelled })), false, false, 3},
		{"queued", ptr(with(dead("queued"), func(s *seed) { s.state, s.reason, s.runs = idempotency.StateQueued, "", 0 })), false, false, 0},
		{"scheduled", ptr(with(dead("scheduled"), func(s *seed) { s.state, s.reason, s.runs = idempotency.StateScheduled, "", 0 })), false, false, 0},
		{"dead but expired", ptr(with(dead("expired"), func(s *seed) { s.exp = testNow.Add(-time.Second) })), false, false, 3},
		{"no record", nil, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "none"
			var before map[string]types.AttributeValue
			if tc.seed != nil {
				putSeeds(t, client, name, *tc.seed)
				key = tc.seed.key
				before = rawItem(t, client, name, tc.seed.pk())
			}
			pk := idempotency.ItemKey("email.send", key)
			if err := tbl.ResetForRedrive(context.Background(), "email.send", key, tc.keepRuns); err != nil {
				t.Fatal(err)
			}
			after := rawItem(t, client, name, pk)
			if !tc.changed {
				if !itemsEqual(before, after) {
					t.Fatalf("record changed:\nbefore %v\nafter  %v", before, after)
				}
				return
			}
			j, err := jobFromItem(after, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != idempotency.StateRetrying || j.Runs != tc.wantRuns || j.Token != "" || !j.LeaseUntil.IsZero() ||
				j.LastError != tc.seed.errText || j.Reason != "" || !j.UpdatedAt.Equal(testNow) {
				t.Errorf("record after reset = %+v; want retrying, %d runs, no claim, no reason, the error kept", j, tc.wantRuns)
			}
			// Listed as retrying, no longer as dead.
			if g, _ := getS(after, idempotency.AttrGSI1PK); g != idempotency.StatusPartition(idempotency.StateRetrying, pk, idempotency.DefaultShards) {
				t.Errorf("by_status partition %q, want the retrying one", g)
			}
			if n, _, _ := getN(after, idempotency.AttrGSI1SK); n != unixMs(testNow) {
				t.Errorf("by_status sort key %d, want the reset time", n)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestResetForRedriveValidates(t *testing.T) {
	t.Parallel()
	tbl, _, _ := emulatorTable(t)
	for _, kk := range [][2]string{{"", "k"}, {"email.send", ""}} {
		if err := tbl.ResetForRedrive(context.Background(), kk[0], kk[1], false); !errors.Is(err, ErrInvalid) {
			t.Errorf("ResetForRedrive(%q, %q) error = %v, want ErrInvalid", kk[0], kk[1], err)
		}
	}
}

// racing writes another record over the key just before the first UpdateItem, as a worker
// finishing the job at the same time would.
type racing struct {
	DynamoDBAPI
	put  func()
	done bool
}

func (r *racing) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if !r.done {
		r.done = true
		r.put()
	}
	return r.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

func TestResetForRedriveNeverClobbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		racer     seed
		wantState idempotency.State
		wantRuns  int
	}{
		// The redriven job ran and succeeded meanwhile: left alone.
		{"succeeded meanwhile", seed{state: idempotency.StateSucceeded, runs: 4}, idempotency.StateSucceeded, 4},
		// A worker claimed it meanwhile: left alone (its lease is live).
		{"claimed meanwhile", seed{state: idempotency.StateRunning, runs: 4, tok: "t2"}, idempotency.StateRunning, 4},
		// It failed again meanwhile: the reset applies to the new record.
		{"failed again meanwhile", seed{state: idempotency.StateDead, runs: 4, reason: "exhausted"}, idempotency.StateRetrying, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tbl, client, name := emulatorTable(t)
			s := seed{kind: "email.send", key: "k", jobID: "job-k", state: idempotency.StateDead, runs: 3,
				upd: testNow.Add(-time.Hour), exp: testNow.Add(time.Hour), reason: "exhausted"}
			putSeeds(t, client, name, s)
			racer := tc.racer
			racer.kind, racer.key, racer.jobID, racer.upd, racer.exp = s.kind, s.key, s.jobID, testNow.Add(-time.Minute), s.exp
			tbl.client = &racing{DynamoDBAPI: tbl.client, put: func() { putSeeds(t, client, name, racer) }}
			if err := tbl.ResetForRedrive(context.Background(), "email.send", "k", false); err != nil {
				t.Fatal(err)
			}
			j, err := jobFromItem(rawItem(t, client, name, s.pk()), testNow)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != tc.wantState || j.Runs != tc.wantRuns {
				t.Errorf("record = %s with %d runs, want %s with %d", j.State, j.Runs, tc.wantState, tc.wantRuns)
			}
		})
	}
}
