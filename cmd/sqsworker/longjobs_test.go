package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// seedLongJob writes the record of a long job that saved cursor (its checkpoint #seq at
// savedAt), was continued conts times and ran runTime in total, and now waits in state.
func seedLongJob(t *testing.T, stack, kind, key, id, cursor string, seq int64, savedAt time.Time, conts int, runTime time.Duration) {
	t.Helper()
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: backend(t).DynamoDB(), Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exp := time.Now().Add(24 * time.Hour)
	if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: kind, Key: key, JobID: id, Token: "t", Now: savedAt.Add(-time.Second),
		LeaseUntil: savedAt.Add(time.Minute), ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Touch(ctx, idempotency.Touch{Kind: kind, Key: key, JobID: id, Token: "t", Now: savedAt,
		Cursor: &idempotency.Cursor{Value: cursor, Seq: seq}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Finish(ctx, idempotency.Finish{Kind: kind, Key: key, JobID: id, Token: "t", State: idempotency.StateQueued,
		Continue: true, RunTime: runTime, Now: savedAt.Add(time.Second), ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	for range conts - 1 { // more continuations, as later slices record them
		if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: kind, Key: key, JobID: id, Token: "u", Now: savedAt.Add(2 * time.Second),
			LeaseUntil: savedAt.Add(time.Minute), ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(ctx, idempotency.Finish{Kind: kind, Key: key, JobID: id, Token: "u", State: idempotency.StateQueued,
			Continue: true, Now: savedAt.Add(3 * time.Second), ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
}

// status and cursor show a long job: its cursor's size, number and age, its continuations and
// total run time, the cursor's value (escaped: it is the job's own data) and the same in JSON.
func TestCursorAndStatusOfALongJob(t *testing.T) {
	t.Parallel()
	stack := newStack(t, "cursor", false)
	savedAt := time.Now().Add(-3 * time.Minute).Truncate(time.Millisecond)
	seedLongJob(t, stack, "backfill.orders", "2026-11", "job-backfill", "{\"after\":\"k9\\u001b[2J\u202e\"}", 41, savedAt, 3, 90*time.Minute+1500*time.Millisecond)
	tr := newTranscript(t, stack)

	out := tr.must("status", "backfill.orders/2026-11")
	for _, re := range []string{
		`(?m)^cursor +26 B, checkpoint #41, saved 3m\d+s ago$`,
		`(?m)^continuations +3$`,
		`(?m)^run time +1h30m2s$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status output does not match %s:\n%s", re, out)
		}
	}

	out = tr.must("cursor", "job-backfill")
	if !strings.Contains(out, `{"after":"k9\u001b[2J\u202e"}`) || strings.ContainsAny(out, "\x1b\u202e") { // escaped: no raw RLO
		t.Errorf("cursor output shows the value raw or unescaped:\n%q", out)
	}
	if !regexp.MustCompile(`(?m)^saved at +` + regexp.QuoteMeta(savedAt.UTC().Format("2006-01-02T15:04:05.000Z")) + `$`).MatchString(out) {
		t.Errorf("cursor output lacks the save time:\n%s", out)
	}

	out = tr.must("cursor", "backfill.orders/2026-11", "--output", "json")
	var doc struct {
		JobID         string `json:"job_id"`
		State         string `json:"state"`
		Continuations int    `json:"continuations"`
		RunTimeMS     int64  `json:"run_time_ms"`
		Cursor        struct {
			Checkpoint int64           `json:"checkpoint"`
			Bytes      int             `json:"bytes"`
			AgeMS      int64           `json:"age_ms"`
			Saved      bool            `json:"saved"`
			Value      json.RawMessage `json:"value"`
		} `json:"cursor"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var value struct{ After string }
	_ = json.Unmarshal(doc.Cursor.Value, &value)
	if doc.JobID != "job-backfill" || doc.State != "queued" || doc.Continuations != 3 || doc.RunTimeMS != 5401500 ||
		doc.Cursor.Checkpoint != 41 || doc.Cursor.Bytes != 26 || !doc.Cursor.Saved || doc.Cursor.AgeMS < 170_000 || value.After != "k9\x1b[2J\u202e" {
		t.Errorf("cursor JSON %+v (value %s)", doc, doc.Cursor.Value)
	}

	if _, code := tr.run("", "cursor", "job-nope"); code != 1 {
		t.Errorf("cursor of an unknown job: exit %d, want 1", code)
	}
	if _, code := tr.run("", "cursor", "Bad Kind/x"); code != 2 {
		t.Errorf("cursor of a bad KIND/KEY: exit %d, want 2 (usage)", code)
	}
}
