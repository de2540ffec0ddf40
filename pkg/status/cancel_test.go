package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TestCancelJob drives CancelJob over every state on the emulator: a waiting job is cancelled at
// once; a job running under a live claim gets a cancellation request that keeps its claim (its
// worker records the cancellation); unknown and finished jobs are clear errors that write nothing.
func TestCancelJob(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	old, recent := testNow.Add(-time.Hour), testNow.Add(-time.Minute) // a lease of upd + 5 min: over / live
	exp := testNow.Add(time.Hour)
	putSeeds(t, client, name,
		seed{kind: "k", key: "live", jobID: "j-live", state: idempotency.StateRunning, runs: 1, upd: recent, exp: exp, tok: "tok-live"},
		seed{kind: "k", key: "stale", jobID: "j-stale", state: idempotency.StateRunning, runs: 1, upd: old, exp: exp, tok: "tok-stale"},
		seed{kind: "k", key: "queued", jobID: "j-q", state: idempotency.StateQueued, upd: old, exp: exp},
		seed{kind: "k", key: "scheduled", jobID: "j-s", state: idempotency.StateScheduled, upd: old, exp: exp},
		seed{kind: "k", key: "retrying", jobID: "j-r", state: idempotency.StateRetrying, runs: 2, upd: old, exp: exp, errText: "timeout"},
		seed{kind: "k", key: "done", jobID: "j-d", state: idempotency.StateSucceeded, runs: 1, upd: old, exp: exp},
		seed{kind: "k", key: "dead", jobID: "j-x", state: idempotency.StateDead, runs: 5, upd: old, exp: exp, reason: "exhausted"},
		seed{kind: "k", key: "cancelled", jobID: "j-c", state: idempotency.StateCancelled, runs: 1, upd: old, exp: exp, reason: "first"},
		seed{kind: "k", key: "expired", jobID: "j-e", state: idempotency.StateRetrying, runs: 1, upd: old, exp: testNow.Add(-time.Second)},
		seed{kind: "k", key: "lapsed", jobID: "j-l", state: idempotency.StateQueued, upd: old, exp: testNow.Add(-time.Second)},
	)
	ctx := context.Background()

	t.Run("RunningGetsARequest", func(t *testing.T) {
		before := rawItem(t, client, name, idempotency.ItemKey("k", "live"))
		res, err := tbl.CancelJob(ctx, "k", "live", "operator: "+strings.Repeat("x", 600))
		if err != nil || !res.Requested || res.AlreadyRequested {
			t.Fatalf("CancelJob = %+v, %v; want Requested", res, err)
		}
		j, err := tbl.Get(ctx, "k", "live")
		if err != nil {
			t.Fatal(err)
		}
		if j.State != idempotency.StateRunning || j.Token != "tok-live" || !j.UpdatedAt.Equal(recent) {
			t.Errorf("record %+v: want still running under its claim, upd unchanged", j)
		}
		if !j.CancelRequestedAt.Equal(testNow) || len(j.CancelReason) != idempotency.MaxCancelReasonBytes || !strings.HasPrefix(j.CancelReason, "operator: ") {
			t.Errorf("request %v %d bytes, want at %v, the reason cut to %d bytes", j.CancelRequestedAt, len(j.CancelReason), testNow, idempotency.MaxCancelReasonBytes)
		}
		if res.Job.CancelRequestedAt.IsZero() || res.Job.Token != "tok-live" {
			t.Errorf("result's job %+v: want the record after the write", res.Job)
		}
		if got := rawItem(t, client, name, idempotency.ItemKey("k", "live")); got[idempotency.AttrGSI1PK] != nil || !itemsEqual(withoutCancel(got), before) {
			t.Errorf("the request changed more than the request attributes: %v", got)
		}
		// Again: already requested, nothing written; Cancel (lenient) agrees.
		res, err = tbl.CancelJob(ctx, "k", "live", "again")
		if err != nil || !res.AlreadyRequested {
			t.Errorf("second CancelJob = %+v, %v; want AlreadyRequested", res, err)
		}
		if err := tbl.Cancel(ctx, "k", "live", time.Time{}, "again"); err != nil {
			t.Errorf("Cancel of a job asked to cancel = %v", err)
		}
		if j, _ := tbl.Get(ctx, "k", "live"); j.CancelReason == "again" || j.State != idempotency.StateRunning {
			t.Errorf("a repeated request changed the record: %+v", j)
		}
	})

	for _, key := range []string{"stale", "queued", "scheduled", "retrying"} {
		t.Run("Waiting/"+key, func(t *testing.T) {
			res, err := tbl.CancelJob(ctx, "k", key, "not needed")
			if err != nil || res.Requested || res.Job.State != idempotency.StateCancelled || res.Job.Reason != "not needed" {
				t.Fatalf("CancelJob = %+v, %v; want cancelled now", res, err)
			}
			if j, _ := tbl.Get(ctx, "k", key); j.State != idempotency.StateCancelled || j.Token != "" {
				t.Errorf("record %+v, want cancelled without a claim", j)
			}
		})
	}

	for _, tt := range []struct {
		key  string
		want []error
	}{
		{"done", []error{ErrFinished, ErrSucceeded}},
		{"dead", []error{ErrFinished}},
		{"cancelled", []error{ErrFinished}},
		{"expired", []error{ErrNotFound}},
		{"lapsed", []error{ErrNotFound}},
		{"never", []error{ErrNotFound}},
	} {
		t.Run("Refused/"+tt.key, func(t *testing.T) {
			pk := idempotency.ItemKey("k", tt.key)
			before := rawItem(t, client, name, pk)
			_, err := tbl.CancelJob(ctx, "k", tt.key, "x")
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("CancelJob = %v, want it to wrap %v", err, w)
				}
			}
			if err != nil && !strings.Contains(err.Error(), "k/"+tt.key) && !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Errorf("error %q does not name the job", err)
			}
			if after := rawItem(t, client, name, pk); !itemsEqual(before, after) {
				t.Errorf("a refused CancelJob wrote: %v", after)
			}
			if after := rawItem(t, client, name, idempotency.IDItemKey(tt.key)); after != nil {
				t.Errorf("a refused CancelJob wrote a record under the id: %v", after)
			}
		})
	}

	t.Run("ByID", func(t *testing.T) {
		putSeeds(t, client, name, seed{kind: "k", key: "byid", jobID: "j-byid", state: idempotency.StateRetrying, runs: 1, upd: old, exp: exp})
		waitIndexed(t, tbl, "j-byid")
		if res, err := tbl.CancelByID(ctx, "j-byid", ""); err != nil || res.Job.State != idempotency.StateCancelled {
			t.Errorf("CancelByID = %+v, %v", res, err)
		}
		if _, err := tbl.CancelByID(ctx, "no-such-id", ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("CancelByID of an unknown id = %v, want ErrNotFound", err)
		}
		if _, err := tbl.CancelJob(ctx, "", "k", ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("CancelJob without a kind = %v, want ErrInvalid", err)
		}
	})
}

// withoutCancel returns item without the cancellation request's attributes.
func withoutCancel(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		if k != idempotency.AttrCancelAt && k != idempotency.AttrCancelWhy {
			out[k] = v
		}
	}
	return out
}

// waitIndexed polls until the by_id index finds jobID.
func waitIndexed(t *testing.T, tbl *Table, jobID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := tbl.GetByID(context.Background(), jobID); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never indexed", jobID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
