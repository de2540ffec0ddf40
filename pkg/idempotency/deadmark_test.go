package idempotency_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// jobMessage is the SQS record of a job of any kind with raw args.
func jobMessage(msgID, jobID, kind, key, args string) events.SQSMessage {
	m := message(msgID, jobID, key, chargeArgs{}, 1)
	env := jobs.Envelope{V: 1, ID: jobID, Kind: kind, Key: key, Args: []byte(args)}
	b, err := env.MarshalJSON()
	if err != nil {
		panic(err)
	}
	m.Body = string(b)
	return m
}

// TestDeadLetteredJobsRecordedDead: whatever the reason the worker dead-letters a job whose key
// has a record (a producer's queued record here), the record becomes dead with that reason, so
// the dead jobs a status listing shows are the jobs in the DLQ; a record of another job is left
// alone. Before, an unknown kind and a payload mismatch left the record queued.
func TestDeadLetteredJobsRecordedDead(t *testing.T) {
	t.Parallel()
	client := emulatorDynamoDB(t)
	store := newDynamoStore(t, client)
	st, err := status.New(status.Config{Client: client, Table: store.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	queued := func(kind, key, jobID, args string) {
		t.Helper()
		hash, err := jobs.PayloadHash(kind, []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RecordQueued(ctx, status.QueuedJob{Kind: kind, Key: key, JobID: jobID, PayloadHash: hash, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	good := `{"order":"o","amount":1}`
	tests := []struct {
		name       string
		setup      func()
		msg        events.SQSMessage
		work       func(ctx context.Context, job *jobs.Job[chargeArgs]) error
		kind, key  string
		wantReason string
		wantState  idempotency.State
	}{
		{name: "unknown kind",
			setup: func() { queued("invoice.print", "k-unknown", "j-unknown", `{"n":1}`) },
			msg:   jobMessage("m-unknown", "j-unknown", "invoice.print", "k-unknown", `{"n":1}`),
			kind:  "invoice.print", key: "k-unknown", wantReason: jobs.ReasonUnknownKind, wantState: idempotency.StateDead},
		{name: "args that do not decode",
			setup: func() { queued("payment.charge", "k-args", "j-args", `{"amount":"many"}`) },
			msg:   jobMessage("m-args", "j-args", "payment.charge", "k-args", `{"amount":"many"}`),
			kind:  "payment.charge", key: "k-args", wantReason: jobs.ReasonMalformed, wantState: idempotency.StateDead},
		{name: "payload mismatch with its own queued record",
			setup: func() { queued("payment.charge", "k-mine", "j-mine", `{"order":"o","amount":2}`) },
			msg:   jobMessage("m-mine", "j-mine", "payment.charge", "k-mine", good),
			kind:  "payment.charge", key: "k-mine", wantReason: jobs.ReasonPayloadMismatch, wantState: idempotency.StateDead},
		{name: "payload mismatch with another job's record",
			setup: func() { queued("payment.charge", "k-other", "j-first", `{"order":"o","amount":2}`) },
			msg:   jobMessage("m-other", "j-second", "payment.charge", "k-other", good),
			kind:  "payment.charge", key: "k-other", wantState: idempotency.StateQueued},
		{name: "cancelled",
			setup: func() { queued("payment.charge", "k-cancel", "j-cancel", good) },
			msg:   jobMessage("m-cancel", "j-cancel", "payment.charge", "k-cancel", good),
			work:  func(context.Context, *jobs.Job[chargeArgs]) error { return jobs.Cancel(errors.New("no")) },
			kind:  "payment.charge", key: "k-cancel", wantReason: jobs.ReasonCancelled, wantState: idempotency.StateDead},
		{name: "exhausted",
			setup: func() { queued("payment.charge", "k-exh", "j-exh", good) },
			msg:   jobMessage("m-exh", "j-exh", "payment.charge", "k-exh", good),
			work:  func(context.Context, *jobs.Job[chargeArgs]) error { return errors.New("declined") },
			kind:  "payment.charge", key: "k-exh", wantReason: jobs.ReasonExhausted, wantState: idempotency.StateDead},
	}
	var wantDead []string
	for _, tt := range tests {
		tt.setup()
		r := newRig(t, store, 1, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now })
		r.work = tt.work
		out := r.deliver(ctx, tt.msg)
		if out[0].Outcome != worker.OutcomeDeadLettered || (tt.wantReason != "" && out[0].Reason != tt.wantReason) {
			t.Errorf("%s: outcome %+v, want dead-lettered (%s)", tt.name, out[0], tt.wantReason)
		}
		j, err := st.Get(ctx, tt.kind, tt.key)
		if err != nil || j.State != tt.wantState || (tt.wantReason != "" && j.Reason != tt.wantReason) {
			t.Errorf("%s: record %+v, %v; want %s (%s)", tt.name, j, err, tt.wantState, tt.wantReason)
		}
		if tt.wantState == idempotency.StateDead {
			wantDead = append(wantDead, j.JobID)
		}
	}
	// `sqsworker jobs --status dead` lists them all.
	page, err := st.List(ctx, status.ListQuery{State: idempotency.StateDead, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range page.Jobs {
		got = append(got, j.JobID)
	}
	slices.Sort(got)
	slices.Sort(wantDead)
	if !slices.Equal(got, wantDead) {
		t.Errorf("List(dead) = %v, want %v", got, wantDead)
	}
}

// TestDeadMarkWrites counts the DynamoDB calls per job: the success path and a job dead-lettered
// through its claim cost nothing more; an unknown kind costs one conditional write, which writes
// a dead record when the job has none. A first delivery without a record is claimed with one PutItem (the
// middleware's default, ExpectRecords false); with a queued record and ExpectRecords, with one
// UpdateItem; with a queued record but not ExpectRecords, the PutItem is refused first (and on
// the emulator, which does not return the refusing item, read).
func TestDeadMarkWrites(t *testing.T) {
	t.Parallel()
	raw := emulatorDynamoDB(t)
	counter := &countingClient{DynamoDBAPI: raw}
	store := newDynamoStore(t, counter)
	st, err := status.New(status.Config{Client: raw, Table: store.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := `{"order":"o","amount":1}`
	for _, tt := range []struct {
		name          string
		queued        bool
		expectRecords bool
		msg           events.SQSMessage
		work          func(ctx context.Context, job *jobs.Job[chargeArgs]) error
		want          map[string]int
	}{
		{"succeeds", true, true, jobMessage("m1", "j1", "payment.charge", "k1", good), nil, map[string]int{"UpdateItem": 2}},
		{"cancelled", true, true, jobMessage("m2", "j2", "payment.charge", "k2", good),
			func(context.Context, *jobs.Job[chargeArgs]) error { return jobs.Cancel(errors.New("no")) }, map[string]int{"UpdateItem": 2}},
		{"unknown kind with a record", true, true, jobMessage("m3", "j3", "invoice.print", "k3", good), nil, map[string]int{"UpdateItem": 1}},
		{"unknown kind without a record", false, false, jobMessage("m4", "j4", "invoice.print", "k4", good), nil, map[string]int{"UpdateItem": 1}},
		{"succeeds without a record", false, false, jobMessage("m5", "j5", "payment.charge", "k5", good), nil,
			map[string]int{"PutItem": 1, "UpdateItem": 1}},
		{"succeeds with a record not expected", true, false, jobMessage("m6", "j6", "payment.charge", "k6", good), nil,
			map[string]int{"PutItem": 1, "GetItem": 1, "UpdateItem": 2}},
	} {
		env, err := jobs.ParseEnvelope(tt.msg.Body)
		if err != nil {
			t.Fatal(err)
		}
		if tt.queued {
			hash, _ := jobs.PayloadHash(env.Kind, env.Args)
			if err := st.RecordQueued(ctx, status.QueuedJob{Kind: env.Kind, Key: env.Key, JobID: env.ID, PayloadHash: hash}); err != nil {
				t.Fatal(err)
			}
		}
		r := newRig(t, store, 3, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now; c.ExpectRecords = tt.expectRecords })
		r.work = tt.work
		counter.reset()
		r.deliver(ctx, tt.msg)
		got := counter.reset()
		if !maps.Equal(got, tt.want) {
			t.Errorf("%s: calls %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The middleware records dead letters for the worker.
var _ worker.DeadLetterRecorder = (*idempotency.Middleware)(nil)
