package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	fake := newFakeDB()
	tests := []struct {
		name  string
		cfg   Config
		field string // "" = valid
	}{
		{"minimal", Config{Client: fake, Table: "jobs"}, ""},
		{"all set", Config{Client: fake, Table: "jobs", Shards: 4, QueryConcurrency: 2, CancelTTL: time.Hour, Now: time.Now}, ""},
		{"no client", Config{Table: "jobs"}, "Config.Client"},
		{"no table", Config{Client: fake}, "Config.Table"},
		{"negative shards", Config{Client: fake, Table: "jobs", Shards: -1}, "Config.Shards"},
		{"too many shards", Config{Client: fake, Table: "jobs", Shards: MaxShards + 1}, "Config.Shards"},
		{"negative concurrency", Config{Client: fake, Table: "jobs", QueryConcurrency: -1}, "Config.QueryConcurrency"},
		{"negative cancel ttl", Config{Client: fake, Table: "jobs", CancelTTL: -time.Second}, "Config.CancelTTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tbl, err := New(tt.cfg)
			if tt.field == "" {
				if err != nil || tbl == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("New: err = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	upd := testNow.Add(-time.Minute)
	putSeeds(t, client, name,
		seed{kind: "email.send", key: "order-1", jobID: "job-1", state: idempotency.StateDead, runs: 5, upd: upd,
			exp: testNow.Add(time.Hour), errText: "smtp: 550", reason: "exhausted"},
		seed{kind: "email.send", key: "old", jobID: "job-2", state: idempotency.StateSucceeded, runs: 1, upd: upd,
			exp: testNow.Add(-time.Second)},
	)
	tests := []struct {
		name, kind, key string
		wantErr         error
		check           func(t *testing.T, j Job)
	}{
		{name: "found", kind: "email.send", key: "order-1", check: func(t *testing.T, j Job) {
			want := idempotency.Record{
				Kind: "email.send", Key: "order-1", JobID: "job-1", State: idempotency.StateDead, Runs: 5,
				PayloadHash: "h-order-1", LastError: "smtp: 550", Reason: "exhausted",
				FirstAttemptAt: upd.Add(-time.Minute), LastAttemptAt: upd.Add(-time.Second), UpdatedAt: upd,
				ExpiresAt: testNow.Add(time.Hour),
			}
			if j.Record != want || j.Expired || !j.RunAt.IsZero() {
				t.Fatalf("got %+v\nwant %+v", j, want)
			}
		}},
		{name: "expired is returned, marked", kind: "email.send", key: "old", check: func(t *testing.T, j Job) {
			if !j.Expired || j.State != idempotency.StateSucceeded {
				t.Fatalf("got %+v, want an expired succeeded job", j)
			}
		}},
		{name: "not found", kind: "email.send", key: "nope", wantErr: ErrNotFound},
		{name: "other kind", kind: "report.build", key: "order-1", wantErr: ErrNotFound},
		{name: "empty kind", kind: "", key: "order-1", wantErr: ErrInvalid},
		{name: "empty key", kind: "email.send", key: "", wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := tbl.Get(context.Background(), tt.kind, tt.key)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, j)
		})
	}
}

func TestGetByID(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	putSeeds(t, client, name,
		seed{kind: "email.send", key: "a", jobID: "job-a", state: idempotency.StateRunning, runs: 1, upd: testNow.Add(-time.Minute), tok: "t1"},
		// job-b was copied under two keys; the newer record wins.
		seed{kind: "email.send", key: "b1", jobID: "job-b", state: idempotency.StateRetrying, runs: 2, upd: testNow.Add(-2 * time.Minute)},
		seed{kind: "email.send", key: "b2", jobID: "job-b", state: idempotency.StateSucceeded, runs: 1, upd: testNow.Add(-time.Second)},
		seed{kind: "email.send", key: "c", jobID: "job-c", state: idempotency.StateDead, runs: 3, upd: testNow.Add(-time.Hour), exp: testNow},
	)
	tests := []struct {
		id, wantKey string
		wantExpired bool
		wantErr     error
	}{
		{id: "job-a", wantKey: "a"},
		{id: "job-b", wantKey: "b2"},
		{id: "job-c", wantKey: "c", wantExpired: true},
		{id: "job-x", wantErr: ErrNotFound},
		{id: "", wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			j, err := tbl.GetByID(context.Background(), tt.id)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.Key != tt.wantKey || j.JobID != tt.id || j.Expired != tt.wantExpired {
				t.Fatalf("got key %q id %q expired %v, want key %q expired %v", j.Key, j.JobID, j.Expired, tt.wantKey, tt.wantExpired)
			}
		})
	}
}

// TestListWalksEveryJobOnce pages through 120 jobs spread over every state and two kinds.
func TestListWalksEveryJobOnce(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	seeds := manySeeds(120)
	putSeeds(t, client, name, seeds...)
	tests := []struct {
		state idempotency.State
		kind  string
		limit int
	}{
		{idempotency.StateDead, "", 7},
		{idempotency.StateDead, "report.build", 7},
		{idempotency.StateDead, "email.send", 1},
		{idempotency.StateDead, "", 0}, // default 50: one page
		{idempotency.StateRetrying, "", 7},
		{idempotency.StateScheduled, "email.send", 3},
		{idempotency.StateCancelled, "", MaxListLimit},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/kind=%s/limit=%d", tt.state, tt.kind, tt.limit), func(t *testing.T) {
			t.Parallel()
			want := expected(seeds, tt.state, tt.kind)
			if len(want) < 5 {
				t.Fatalf("only %d matching seeds: the test needs more", len(want))
			}
			got := walk(t, tbl, ListQuery{State: tt.state, Kind: tt.kind, Limit: tt.limit})
			if !slices.Equal(got, want) {
				t.Fatalf("walked %d jobs:\n%v\nwant %d:\n%v", len(got), got, len(want), want)
			}
		})
	}
}

func TestListShowsCurrentRecords(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	s := seed{kind: "email.send", key: "x", jobID: "job-x", state: idempotency.StateDead, runs: 5,
		upd: testNow.Add(-time.Minute), exp: testNow.Add(time.Hour), errText: strings.Repeat("e", idempotency.MaxErrorBytes), reason: "exhausted"}
	putSeeds(t, client, name, s)
	p, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateDead})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 1 || p.NextPageToken != "" {
		t.Fatalf("got %d jobs, token %q; want 1 job and no token", len(p.Jobs), p.NextPageToken)
	}
	// The index projects neither the error nor the expiry: List reads them from the table.
	j := p.Jobs[0]
	if j.LastError != s.errText || !j.ExpiresAt.Equal(s.exp) || j.Runs != 5 || j.Reason != "exhausted" {
		t.Fatalf("got %+v", j)
	}
}

// longPK is a partition key one byte longer than DynamoDB takes.
var longPK = "email.send#" + strings.Repeat("k", 2049-len("email.send#"))

func TestListRejectsBadQueries(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	putSeeds(t, client, name, manySeeds(40)...)
	first, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateDead, Limit: 2})
	if err != nil || first.NextPageToken == "" {
		t.Fatalf("first page: %v, token %q", err, first.NextPageToken)
	}
	good := first.NextPageToken
	other, err := New(Config{Client: tbl.client, Table: name, Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		tbl   *Table
		q     ListQuery
		field string // the message must contain it
	}{
		{"no state", tbl, ListQuery{}, "ListQuery.State is empty"},
		{"running", tbl, ListQuery{State: idempotency.StateRunning}, `"running" is not indexed`},
		{"succeeded", tbl, ListQuery{State: idempotency.StateSucceeded}, `"succeeded" is not indexed`},
		{"queued", tbl, ListQuery{State: idempotency.StateQueued}, `"queued" is not indexed`},
		{"unknown state", tbl, ListQuery{State: "paused"}, `"paused" is not indexed`},
		{"bad kind", tbl, ListQuery{State: idempotency.StateDead, Kind: "Email"}, "ListQuery.Kind"},
		{"negative limit", tbl, ListQuery{State: idempotency.StateDead, Limit: -1}, "ListQuery.Limit"},
		{"limit too large", tbl, ListQuery{State: idempotency.StateDead, Limit: MaxListLimit + 1}, "ListQuery.Limit"},
		{"token not base64", tbl, ListQuery{State: idempotency.StateDead, PageToken: "!!"}, "ListQuery.PageToken: not base64url"},
		{"token not json", tbl, ListQuery{State: idempotency.StateDead, PageToken: "bm9wZQ"}, "ListQuery.PageToken: not a page token"},
		{"token other state", tbl, ListQuery{State: idempotency.StateRetrying, PageToken: good}, `listing of state "dead"`},
		{"token other kind", tbl, ListQuery{State: idempotency.StateDead, Kind: "email.send", PageToken: good}, `listing of kind ""`},
		{"token other shards", other, ListQuery{State: idempotency.StateDead, PageToken: good}, "made for 16 shards"},
		{"token version", tbl, ListQuery{State: idempotency.StateDead, PageToken: encodeToken(&pageToken{V: 2, State: "dead", Shards: 16})}, "version 2"},
		{"token shard range", tbl, ListQuery{State: idempotency.StateDead, PageToken: encodeToken(&pageToken{V: 1, State: "dead", Shards: 16,
			Pos: []shardCursor{{I: 16, Done: true}}})}, "shard 16 out of range"},
		{"token shard twice", tbl, ListQuery{State: idempotency.StateDead, PageToken: encodeToken(&pageToken{V: 1, State: "dead", Shards: 16,
			Pos: []shardCursor{{I: 1, Done: true}, {I: 1, Done: true}}})}, "appears twice"},
		{"token wrong shard", tbl, ListQuery{State: idempotency.StateDead, PageToken: encodeToken(&pageToken{V: 1, State: "dead", Shards: 16,
			Pos: []shardCursor{{I: (idempotency.Shard("email.send#k000", 16) + 1) % 16, PK: "email.send#k000"}}})}, "belongs to shard"},
		{"token no position", tbl, ListQuery{State: idempotency.StateDead, PageToken: encodeToken(&pageToken{V: 1, State: "dead", Shards: 16,
			Pos: []shardCursor{{I: 3}}})}, "shard 3 has no position"},
		// A key in its right shard, but longer than DynamoDB's 2,048-byte partition keys: it would
		// reach DynamoDB and come back as a ValidationException.
		{"token key too long", tbl, ListQuery{State: idempotency.StateDead, PageToken: encodeToken(&pageToken{V: 1, State: "dead", Shards: 16,
			Pos: []shardCursor{{I: idempotency.Shard(longPK, 16), PK: longPK}}})}, "key of 2049 bytes"},
		{"token unknown field", tbl, ListQuery{State: idempotency.StateDead, PageToken: "eyJ2IjoxLCJ4IjoxfQ"}, "unknown field"},
		{"token too long", tbl, ListQuery{State: idempotency.StateDead, PageToken: strings.Repeat("A", maxTokenLen+1)}, "bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.tbl.List(context.Background(), tt.q)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tt.field)
			}
			var pe *PageTokenError
			if isToken := strings.HasPrefix(tt.name, "token "); errors.As(err, &pe) != isToken {
				t.Fatalf("err = %v: a *PageTokenError %v, want %v", err, !isToken, isToken)
			}
			// Only a sound token of another listing is OtherListing; a damaged one is not.
			other := strings.HasPrefix(tt.name, "token other ")
			if pe != nil && pe.OtherListing != other {
				t.Errorf("OtherListing = %v, want %v", pe.OtherListing, other)
			}
		})
	}
}

func TestListEmptyAndFinishedTokens(t *testing.T) {
	t.Parallel()
	tbl, _, _ := emulatorTable(t)
	p, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateDead})
	if err != nil || len(p.Jobs) != 0 || p.NextPageToken != "" {
		t.Fatalf("empty table: %+v, %v", p, err)
	}
	var all []shardCursor
	for i := range idempotency.DefaultShards {
		all = append(all, shardCursor{I: i, Done: true})
	}
	done := encodeToken(&pageToken{V: 1, State: "dead", Shards: idempotency.DefaultShards, Pos: all})
	p, err = tbl.List(context.Background(), ListQuery{State: idempotency.StateDead, PageToken: done})
	if err != nil || len(p.Jobs) != 0 || p.NextPageToken != "" {
		t.Fatalf("finished token: %+v, %v", p, err)
	}
}

func TestRecordQueued(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	putSeeds(t, client, name,
		seed{kind: "email.send", key: "running", jobID: "job-r", state: idempotency.StateRunning, runs: 1, upd: testNow.Add(-time.Second), tok: "tok-r", exp: testNow.Add(time.Hour)},
		seed{kind: "email.send", key: "done", jobID: "job-d", state: idempotency.StateSucceeded, runs: 1, upd: testNow.Add(-time.Second), exp: testNow.Add(time.Hour)},
		seed{kind: "email.send", key: "stale", jobID: "job-s", state: idempotency.StateSucceeded, runs: 1, upd: testNow.Add(-48 * time.Hour), exp: testNow.Add(-time.Hour)},
	)
	at := testNow.Add(-1500 * time.Microsecond) // kept to the millisecond
	exp := testNow.Add(4*24*time.Hour + 300*time.Millisecond)
	tests := []struct {
		name      string
		key       string
		wantState idempotency.State
		wantJobID string
	}{
		{"absent: written", "new", idempotency.StateQueued, "job-new"},
		{"running: untouched", "running", idempotency.StateRunning, "job-r"},
		{"succeeded: untouched", "done", idempotency.StateSucceeded, "job-d"},
		{"expired: replaced", "stale", idempotency.StateQueued, "job-stale"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := rawItem(t, client, name, idempotency.ItemKey("email.send", tt.key))
			err := tbl.RecordQueued(context.Background(), QueuedJob{
				Kind: "email.send", Key: tt.key, JobID: "job-" + tt.key, PayloadHash: "hash-" + tt.key, At: at, ExpiresAt: exp,
			})
			if err != nil {
				t.Fatal(err)
			}
			after := rawItem(t, client, name, idempotency.ItemKey("email.send", tt.key))
			j, err := tbl.Get(context.Background(), "email.send", tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != tt.wantState || j.JobID != tt.wantJobID {
				t.Fatalf("state %s job %s, want %s %s", j.State, j.JobID, tt.wantState, tt.wantJobID)
			}
			if tt.wantState != idempotency.StateQueued {
				if !itemsEqual(before, after) {
					t.Fatalf("record changed:\nbefore %v\nafter  %v", before, after)
				}
				return
			}
			want := idempotency.Record{
				Kind: "email.send", Key: tt.key, JobID: tt.wantJobID, State: idempotency.StateQueued,
				PayloadHash: "hash-" + tt.key, UpdatedAt: at.Truncate(time.Millisecond),
				ExpiresAt: exp.Truncate(time.Second).Add(time.Second), // rounded up
			}
			if j.Record != want {
				t.Fatalf("got  %+v\nwant %+v", j.Record, want)
			}
			if _, ok := after[idempotency.AttrGSI1PK]; ok {
				t.Fatal("queued records are not indexed, but gsi1pk is set")
			}
		})
	}
}

func itemsEqual(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			if w, ok := w.(*types.AttributeValueMemberS); !ok || w.Value != v.Value {
				return false
			}
		case *types.AttributeValueMemberN:
			if w, ok := w.(*types.AttributeValueMemberN); !ok || w.Value != v.Value {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func TestRecordValidates(t *testing.T) {
	t.Parallel()
	tbl, err := New(Config{Client: newFakeDB(), Table: "jobs", Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	ok := QueuedJob{Kind: "email.send", Key: "k", JobID: "j"}
	tests := []struct {
		name  string
		edit  func(q *QueuedJob)
		field string
	}{
		{"bad kind", func(q *QueuedJob) { q.Kind = "Email" }, "QueuedJob.Kind"},
		{"no kind", func(q *QueuedJob) { q.Kind = "" }, "QueuedJob.Kind"},
		{"no key", func(q *QueuedJob) { q.Key = "" }, "QueuedJob.Key"},
		{"no job id", func(q *QueuedJob) { q.JobID = "" }, "QueuedJob.JobID"},
		{"expires before", func(q *QueuedJob) { q.ExpiresAt = testNow.Add(-time.Second) }, "QueuedJob.ExpiresAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := ok
			tt.edit(&q)
			err := tbl.RecordQueued(context.Background(), q)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v, want ErrInvalid naming %s", err, tt.field)
			}
			err = tbl.RecordScheduled(context.Background(), ScheduledJob(q2s(q)))
			field := strings.Replace(tt.field, "QueuedJob", "ScheduledJob", 1)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
				t.Fatalf("scheduled: err = %v, want ErrInvalid naming %s", err, field)
			}
		})
	}
	if err := tbl.Cancel(context.Background(), "", "k", time.Time{}, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cancel without kind: %v", err)
	}
}

func q2s(q QueuedJob) ScheduledJob {
	return ScheduledJob{Kind: q.Kind, Key: q.Key, JobID: q.JobID, PayloadHash: q.PayloadHash, At: q.At, ExpiresAt: q.ExpiresAt}
}

func TestRecordScheduled(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	putSeeds(t, client, name,
		seed{kind: "report.build", key: "busy", jobID: "job-busy", state: idempotency.StateRunning, runs: 1, upd: testNow, tok: "t", exp: testNow.Add(time.Hour)})
	runAt := testNow.Add(36 * time.Hour)
	for _, key := range []string{"r1", "r2", "busy"} {
		if err := tbl.RecordScheduled(context.Background(), ScheduledJob{
			Kind: "report.build", Key: key, JobID: "job-" + key, At: testNow, RunAt: runAt, ExpiresAt: runAt.Add(14 * 24 * time.Hour),
		}); err != nil {
			t.Fatal(err)
		}
	}
	item := rawItem(t, client, name, "report.build#r1")
	pk := idempotency.ItemKey("report.build", "r1")
	if g, _ := getS(item, idempotency.AttrGSI1PK); g != idempotency.StatusPartition(idempotency.StateScheduled, pk, idempotency.DefaultShards) {
		t.Fatalf("gsi1pk = %q", g)
	}
	if sk, _, _ := getN(item, idempotency.AttrGSI1SK); sk != unixMs(testNow) {
		t.Fatalf("gsi1sk = %d", sk)
	}
	p, err := tbl.List(context.Background(), ListQuery{State: idempotency.StateScheduled, Kind: "report.build"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, j := range p.Jobs {
		keys = append(keys, j.Key)
		if !j.RunAt.Equal(runAt) {
			t.Fatalf("%s: RunAt %v, want %v", j.Key, j.RunAt, runAt)
		}
	}
	if !slices.Equal(keys, []string{"r1", "r2"}) { // same time: by pk
		t.Fatalf("listed %v, want [r1 r2] (busy is running)", keys)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	old := testNow.Add(-time.Hour)
	putSeeds(t, client, name,
		seed{kind: "email.send", key: "done", jobID: "j1", state: idempotency.StateSucceeded, runs: 1, upd: old, exp: testNow.Add(time.Hour)},
		seed{kind: "email.send", key: "retry", jobID: "j2", state: idempotency.StateRetrying, runs: 2, upd: old, exp: testNow.Add(time.Hour), errText: "timeout"},
		seed{kind: "email.send", key: "run", jobID: "j3", state: idempotency.StateRunning, runs: 1, upd: old, exp: testNow.Add(time.Hour), tok: "tok-3"},
		seed{kind: "email.send", key: "dead", jobID: "j4", state: idempotency.StateDead, runs: 5, upd: old, exp: testNow.Add(90 * 24 * time.Hour), reason: "exhausted"},
		seed{kind: "email.send", key: "gone", jobID: "j5", state: idempotency.StateSucceeded, runs: 1, upd: old, exp: testNow.Add(-time.Second)},
		seed{kind: "email.send", key: "already", jobID: "j6", state: idempotency.StateCancelled, runs: 1, upd: old, exp: testNow.Add(time.Hour), reason: "first"},
	)
	at := testNow.Add(-time.Second)
	defaultExp := testNow.Add(-time.Second + 15*24*time.Hour)
	tests := []struct {
		key      string
		reason   string
		wantErr  error
		wantRuns int
		wantExp  time.Time
		wantUpd  time.Time
		wantWhy  string
		wantErrT string
	}{
		{key: "done", wantErr: ErrSucceeded},
		{key: "retry", reason: "operator", wantRuns: 2, wantExp: defaultExp, wantUpd: at, wantWhy: "operator", wantErrT: "timeout"},
		{key: "run", reason: "operator", wantRuns: 1, wantExp: defaultExp, wantUpd: at, wantWhy: "operator"},
		{key: "dead", wantRuns: 5, wantExp: testNow.Add(90 * 24 * time.Hour), wantUpd: at},  // longer expiry kept, reason cleared
		{key: "gone", reason: "late", wantExp: defaultExp, wantUpd: at, wantWhy: "late"},    // expired: a new record
		{key: "never", reason: "early", wantExp: defaultExp, wantUpd: at, wantWhy: "early"}, // absent: a new record
		{key: "already", reason: "second", wantRuns: 1, wantExp: testNow.Add(time.Hour), wantUpd: old, wantWhy: "first"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			pk := idempotency.ItemKey("email.send", tt.key)
			before := rawItem(t, client, name, pk)
			err := tbl.Cancel(context.Background(), "email.send", tt.key, at, tt.reason)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), "email.send/"+tt.key) {
					t.Fatalf("err = %v, want %v naming the job", err, tt.wantErr)
				}
				if after := rawItem(t, client, name, pk); !itemsEqual(before, after) {
					t.Fatalf("refused cancel changed the record: %v", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			j, err := tbl.Get(context.Background(), "email.send", tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != idempotency.StateCancelled || j.Runs != tt.wantRuns || j.Reason != tt.wantWhy ||
				!j.ExpiresAt.Equal(tt.wantExp) || !j.UpdatedAt.Equal(tt.wantUpd) || j.LastError != tt.wantErrT {
				t.Fatalf("got %+v", j)
			}
			if j.Token != "" || !j.LeaseUntil.IsZero() {
				t.Fatalf("claim token or lease kept: %+v", j)
			}
			item := rawItem(t, client, name, pk)
			if g, _ := getS(item, idempotency.AttrGSI1PK); g != idempotency.StatusPartition(idempotency.StateCancelled, pk, idempotency.DefaultShards) {
				t.Fatalf("gsi1pk = %q", g)
			}
			if sk, _, _ := getN(item, idempotency.AttrGSI1SK); sk != unixMs(tt.wantUpd) {
				t.Fatalf("gsi1sk = %d, want %d", sk, unixMs(tt.wantUpd))
			}
		})
	}
}

// TestCancelMovesBetweenListings checks a cancelled job leaves the retrying listing and joins the
// cancelled one.
func TestCancelMovesBetweenListings(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	putSeeds(t, client, name,
		seed{kind: "email.send", key: "a", jobID: "ja", state: idempotency.StateRetrying, runs: 1, upd: testNow.Add(-time.Minute), exp: testNow.Add(time.Hour)},
		seed{kind: "email.send", key: "b", jobID: "jb", state: idempotency.StateRetrying, runs: 1, upd: testNow.Add(-2 * time.Minute), exp: testNow.Add(time.Hour)},
	)
	if err := tbl.Cancel(context.Background(), "email.send", "a", time.Time{}, "operator"); err != nil {
		t.Fatal(err)
	}
	retrying := walk(t, tbl, ListQuery{State: idempotency.StateRetrying, Limit: 10})
	cancelled := walk(t, tbl, ListQuery{State: idempotency.StateCancelled, Limit: 10})
	if !slices.Equal(retrying, []string{"email.send#b"}) || !slices.Equal(cancelled, []string{"email.send#a"}) {
		t.Fatalf("retrying %v, cancelled %v", retrying, cancelled)
	}
}

// TestShardPartitionMatchesStore: List queries the partitions the store writes.
func TestShardPartitionMatchesStore(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 7, 16, MaxShards} {
		for i := range 200 {
			pk := idempotency.ItemKey("email.send", fmt.Sprintf("key-%d", i))
			got := shardPartition(idempotency.StateDead, idempotency.Shard(pk, shards))
			if want := idempotency.StatusPartition(idempotency.StateDead, pk, shards); got != want {
				t.Fatalf("%s with %d shards: %s, store writes %s", pk, shards, got, want)
			}
		}
	}
}
