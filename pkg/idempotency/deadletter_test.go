package idempotency_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// TestEveryDeadLetterWithAnIDHasADeadRecord: with a store, every message the worker dead-letters
// that names a job id gets a dead record with its reason, whether or not the job had a record:
// an unknown kind sent with a plain SendMessage, a malformed body with an id (under its kind and
// key when its kind is valid, else under its id), so that `sqsworker jobs --status dead` lists
// every one of them. A body without an id, and another job's record, are left alone.
func TestEveryDeadLetterWithAnIDHasADeadRecord(t *testing.T) {
	t.Parallel()
	client := emulatorDynamoDB(t)
	store := newDynamoStore(t, client)
	st, err := status.New(status.Config{Client: client, Table: store.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := `{"order":"o","amount":1}`
	raw := func(msgID, body string) (m events.SQSMessage) {
		m = jobMessage(msgID, "x", "payment.charge", "", good)
		m.Body = body
		return m
	}
	if err := st.RecordQueued(ctx, status.QueuedJob{Kind: "payment.charge", Key: "k-taken", JobID: "j-first", PayloadHash: "other", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		msg        events.SQSMessage
		reason     string
		kind, key  string // the record to find ("" key: none)
		jobID      string
		wantRecord bool
	}{
		{"unknown kind, no record", jobMessage("m1", "j-unknown", "invoice.print", "", `{"n":1}`), jobs.ReasonUnknownKind,
			"invoice.print", "j-unknown", "j-unknown", true},
		{"unknown kind with a key, no record", jobMessage("m2", "j-unknown-key", "invoice.print", "inv-7", `{"n":1}`), jobs.ReasonUnknownKind,
			"invoice.print", "inv-7", "j-unknown-key", true},
		{"malformed, with an id and a kind", raw("m3", `{"v":1,"id":"j-bad-args","kind":"payment.charge","key":"k-bad","args":[1]}`), jobs.ReasonMalformed,
			"payment.charge", "k-bad", "j-bad-args", true},
		{"malformed, with an id and no valid kind", raw("m4", `{"v":1,"id":"j-no-kind","kind":"Not A Kind","args":{}}`), jobs.ReasonMalformed,
			"", "j-no-kind", "j-no-kind", true},
		{"malformed, no id", raw("m5", `{"v":1,"kind":"payment.charge","args":{}}`), jobs.ReasonMalformed, "", "", "", false},
		{"not JSON", raw("m6", `hello`), jobs.ReasonMalformed, "", "", "", false},
		{"payload mismatch with another job's record", jobMessage("m7", "j-second", "payment.charge", "k-taken", good), jobs.ReasonPayloadMismatch,
			"payment.charge", "k-taken", "j-first", false},
	}
	var wantDead []string
	for _, tt := range tests {
		r := newRig(t, store, 1, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now })
		out := r.deliver(ctx, tt.msg)
		if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != tt.reason {
			t.Errorf("%s: outcome %+v, want dead-lettered (%s)", tt.name, out[0], tt.reason)
			continue
		}
		if tt.jobID == "" {
			continue
		}
		j, err := st.GetByID(ctx, tt.jobID)
		if tt.kind != "" {
			j, err = st.Get(ctx, tt.kind, tt.key)
		}
		if !tt.wantRecord {
			if err == nil && j.State == idempotency.StateDead {
				t.Errorf("%s: another job's record was made dead: %+v", tt.name, j)
			}
			continue
		}
		if err != nil || j.State != idempotency.StateDead || j.Reason != tt.reason || j.JobID != tt.jobID || j.Kind != tt.kind || j.Runs != 0 || j.LastError == "" {
			t.Errorf("%s: record %+v, %v; want dead (%s), job %s, kind %q, never run, with the error", tt.name, j, err, tt.reason, tt.jobID, tt.kind)
		}
		wantDead = append(wantDead, tt.jobID)
	}
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

// strictDB makes the emulator refuse, as DynamoDB does, a write whose job_id (the by_id index's
// partition key) is longer than 2,048 bytes, and counts such refusals.
type strictDB struct {
	idempotency.DynamoDBAPI
	mu      sync.Mutex
	refused int
}

func (s *strictDB) tooLong(names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) bool {
	check := func(av types.AttributeValue) bool {
		v, ok := av.(*types.AttributeValueMemberS)
		return ok && len(v.Value) > 2048
	}
	if check(item[idempotency.AttrJobID]) {
		return true
	}
	for _, name := range names {
		if name != idempotency.AttrJobID {
			continue
		}
		for ph, av := range values {
			if strings.HasPrefix(ph, ":job") && check(av) {
				return true
			}
		}
	}
	return false
}

func (s *strictDB) refuse() error {
	s.mu.Lock()
	s.refused++
	s.mu.Unlock()
	return &smithyValidation{}
}

func (s *strictDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if s.tooLong(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.Item) {
		return nil, s.refuse()
	}
	return s.DynamoDBAPI.PutItem(ctx, in, o...)
}

func (s *strictDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.tooLong(in.ExpressionAttributeNames, in.ExpressionAttributeValues, nil) {
		return nil, s.refuse()
	}
	return s.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// smithyValidation is DynamoDB's answer to an index key that is too long.
type smithyValidation struct{}

func (*smithyValidation) Error() string {
	return "ValidationException: One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of 2048 bytes"
}
func (*smithyValidation) ErrorCode() string { return "ValidationException" }
func (*smithyValidation) ErrorMessage() string {
	return "Size of hashkey has exceeded the maximum size limit of 2048 bytes"
}

// TestTooLongIDOrKeyIsDeadLetteredAtOnce: a foreign message whose id is longer than the job
// table indexes (2,048 bytes, where its record indexes it: a job with a key of its own), or whose
// kind, key and id are longer than a record keeps, is dead-lettered as malformed on its first
// delivery, with a reason that says so, instead of failing every claim with DynamoDB's
// ValidationException until SQS's redrive policy moves it. A long id that is the job's key (no
// key of its own) is not indexed, and runs.
func TestTooLongIDOrKeyIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	strict := &strictDB{DynamoDBAPI: emulatorDynamoDB(t)}
	store := newDynamoStore(t, strict)
	ctx := context.Background()
	good := `{"order":"o","amount":1}`
	longID := strings.Repeat("i", 3000)
	for _, tt := range []struct {
		name    string
		msg     events.SQSMessage
		dead    bool
		because string
	}{
		{"a long id with a key of its own", jobMessage("m1", longID, "payment.charge", "k-1", good), true, "2048 bytes"},
		{"a key longer than a record keeps", jobMessage("m2", "j-2", "payment.charge", strings.Repeat("k", idempotency.MaxIdentityBytes), good), true, "400 KB"},
		{"a long id that is the key", jobMessage("m3", longID+"-3", "payment.charge", "", good), false, ""},
	} {
		r := newRig(t, store, 3, func(c *idempotency.MiddlewareConfig) { c.Now = time.Now })
		out := r.deliver(ctx, tt.msg)
		if !tt.dead {
			if out[0].Outcome != worker.OutcomeSucceeded {
				t.Errorf("%s: outcome %+v, want succeeded", tt.name, out[0])
			}
			continue
		}
		if out[0].Outcome != worker.OutcomeDeadLettered || out[0].Reason != jobs.ReasonMalformed || out[0].Err == nil ||
			!strings.Contains(out[0].Err.Error(), tt.because) {
			t.Errorf("%s: outcome %+v (%v), want dead-lettered as malformed, saying %q", tt.name, out[0], out[0].Err, tt.because)
		}
		if r.charges.Load() != 0 {
			t.Errorf("%s: the job ran", tt.name)
		}
	}
	if strict.refused != 0 {
		t.Errorf("%d writes reached DynamoDB with a job id it refuses", strict.refused)
	}
}

// The store refuses such a claim itself, before any call.
func TestClaimRefusesWhatARecordCannotHold(t *testing.T) {
	t.Parallel()
	counter := &countingClient{DynamoDBAPI: emulatorDynamoDB(t)}
	for _, s := range []idempotency.Store{idempotency.NewMemoryStore(), newDynamoDBStore(t, counter, "never-called")} {
		now := time.Now()
		_, err := s.Claim(context.Background(), idempotency.ClaimRequest{Kind: "k", Key: "key", JobID: strings.Repeat("i", idempotency.MaxIndexedIDBytes+1),
			Token: "t", Now: now, LeaseUntil: now.Add(time.Minute)})
		if !errors.Is(err, idempotency.ErrKeyTooLong) {
			t.Errorf("%T: Claim of a too long id: %v, want ErrKeyTooLong", s, err)
		}
		marked, err := s.MarkDead(context.Background(), idempotency.DeadMark{Kind: "k", Key: strings.Repeat("k", idempotency.MaxIdentityBytes), JobID: "j",
			Reason: "unknown_kind", Now: now})
		if marked || !errors.Is(err, idempotency.ErrKeyTooLong) {
			t.Errorf("%T: MarkDead of a too long key: %v, %v; want ErrKeyTooLong", s, marked, err)
		}
	}
	if calls := counter.reset(); len(calls) != 0 {
		t.Errorf("DynamoDB calls %v, want none", calls)
	}
}
