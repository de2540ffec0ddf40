package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// stack is a queue and a job table on the embedded emulator, and an API on them.
type stack struct {
	api      *API
	sqs      *sqs.Client
	queueURL string
	table    *status.Table
	store    *idempotency.DynamoDBStore
	failSend *atomic.Int32 // SendMessageBatch calls left to fail
}

// flakySQS fails the next n SendMessageBatch calls, as an SQS outage would.
type flakySQS struct {
	*sqs.Client
	fail *atomic.Int32
}

func (f flakySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("dial tcp: connection refused")
	}
	return f.Client.SendMessageBatch(ctx, in, o...)
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	backend := awslocaltest.Backend(t)
	name := awslocal.UniqueName("api")
	client := sqs.NewFromConfig(backend.Config)
	st, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	ddb := backend.DynamoDB()
	tableName, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := status.New(status.Config{Client: ddb, Table: tableName})
	if err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: tableName})
	if err != nil {
		t.Fatal(err)
	}
	fail := &atomic.Int32{}
	prod, err := producer.New(producer.Config{SQS: flakySQS{client, fail}, QueueURL: st.QueueURL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Producer: prod, Policy: testPolicy(t, testKinds), Status: tbl, Reserver: tbl,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &stack{api: api, sqs: client, queueURL: st.QueueURL, table: tbl, store: store, failSend: fail}
}

// post sends POST /jobs with body and, when not empty, an Idempotency-Key.
func (s *stack) post(t *testing.T, key, body string) events.LambdaFunctionURLResponse {
	t.Helper()
	h := map[string]string{"content-type": "application/json"}
	if key != "" {
		h["idempotency-key"] = key
	}
	resp, err := s.api.Handle(context.Background(), request("POST", "/jobs", body, h))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// accepted checks a 202 and returns its id.
func accepted(t *testing.T, resp events.LambdaFunctionURLResponse) enqueueResponse {
	t.Helper()
	var r enqueueResponse
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d (%s), want 202", resp.StatusCode, resp.Body)
	}
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil || r.ID == "" {
		t.Fatalf("body %s: %v", resp.Body, err)
	}
	return r
}

// drain receives every message on the queue (deleting them) and returns their job ids.
func (s *stack) drain(t *testing.T) []string {
	t.Helper()
	var ids []string
	for {
		out, err := s.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &s.queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return ids
		}
		for _, m := range out.Messages {
			env, err := jobs.ParseEnvelope(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, env.ID)
			if _, err := s.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &s.queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestIdempotentRequests runs repeated requests through the handler against the embedded
// emulator's SQS and DynamoDB: a repeated Idempotency-Key with the same body gets the first
// answer (202, same id) — sent once more by the first repeat while the job is queued, then
// marked sent, so that later repeats send nothing — and with another body 409, with nothing
// sent.
func TestIdempotentRequests(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const body = `{"kind":"email.send","args":{"to":"ada@example.com","subject":"welcome"}}`

	first := accepted(t, s.post(t, "welcome-ada", body))
	if first.Key != "welcome-ada" {
		t.Errorf("key %q, want welcome-ada", first.Key)
	}
	rec, err := s.table.Get(context.Background(), "email.send", "welcome-ada")
	if err != nil || rec.State != idempotency.StateQueued || rec.JobID != first.ID || rec.PayloadHash == "" {
		t.Fatalf("the reservation: %+v, %v", rec.Record, err)
	}
	if ids := s.drain(t); len(ids) != 1 || ids[0] != first.ID {
		t.Fatalf("queue holds %v, want [%s]", ids, first.ID)
	}

	// Same key, same body (other key order and spacing): the first answer, marked as a replay;
	// still queued, so the job is sent again with the same id.
	resp := s.post(t, "welcome-ada", `{"args":{ "subject":"welcome", "to":"ada@example.com" },"kind":"email.send"}`)
	if again := accepted(t, resp); again.ID != first.ID || again.Key != "welcome-ada" {
		t.Fatalf("repeat: %+v, want id %s", again, first.ID)
	}
	if resp.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("headers %v: want Idempotent-Replayed: true", resp.Headers)
	}
	if ids := s.drain(t); len(ids) != 1 || ids[0] != first.ID {
		t.Fatalf("after the repeat the queue holds %v, want the same job again [%s]", ids, first.ID)
	}
	if rec, err := s.table.Get(context.Background(), "email.send", "welcome-ada"); err != nil || rec.SentAt.IsZero() || rec.State != idempotency.StateQueued {
		t.Fatalf("after the repeat's send the record is %+v (sent at %v), %v; want it queued and marked sent", rec.Record, rec.SentAt, err)
	}

	// Later repeats, while the job still waits in the queue (a delay, a backlog): the first
	// answer, and nothing more sent.
	for range 3 {
		resp := s.post(t, "welcome-ada", body)
		if again := accepted(t, resp); again.ID != first.ID || resp.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("later repeat: %+v %v, want id %s replayed", again, resp.Headers, first.ID)
		}
	}
	if ids := s.drain(t); len(ids) != 0 {
		t.Fatalf("repeats of a job marked sent sent %v, want nothing", ids)
	}

	// Another body with that key — other args, or the same args with a delay or a group the
	// first request did not have: 409, nothing sent, the record unchanged.
	for _, other := range []string{
		`{"kind":"email.send","args":{"to":"bob@example.com"}}`,
		`{"kind":"email.send","args":{"to":"ada@example.com","subject":"welcome"},"delay":"30s"}`,
		`{"kind":"email.send","args":{"to":"ada@example.com","subject":"welcome"},"group":"tenant-1"}`,
	} {
		resp = s.post(t, "welcome-ada", other)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(resp.Body, `Idempotency-Key \"welcome-ada\" was already used for a email.send job with another request (args, delay or group)`) {
			t.Fatalf("other body %s: %d %s, want 409", other, resp.StatusCode, resp.Body)
		}
	}
	if ids := s.drain(t); len(ids) != 0 {
		t.Fatalf("a refused request sent %v", ids)
	}

	// A worker claims the job and finishes it: repeats still get the first answer, and nothing
	// more is sent.
	now := time.Now()
	cr, err := s.store.Claim(context.Background(), idempotency.ClaimRequest{Kind: "email.send", Key: "welcome-ada", JobID: first.ID,
		PayloadHash: rec.PayloadHash, Token: "tok", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !cr.Claimed {
		t.Fatalf("the worker's claim of the API's record: %+v, %v", cr, err)
	}
	if err := s.store.Finish(context.Background(), idempotency.Finish{Kind: "email.send", Key: "welcome-ada", Token: "tok",
		State: idempotency.StateSucceeded, Now: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if again := accepted(t, s.post(t, "welcome-ada", body)); again.ID != first.ID {
		t.Fatalf("repeat after success: id %s, want %s", again.ID, first.ID)
	}
	if ids := s.drain(t); len(ids) != 0 {
		t.Fatalf("a repeat of a job the worker has sent %v", ids)
	}

	// GET shows the job, from the same table.
	got, err := s.api.Handle(context.Background(), request("GET", "/jobs/"+first.ID, "", nil))
	if err != nil || got.StatusCode != http.StatusOK || !strings.Contains(got.Body, `"state":"succeeded","attempts":1`) {
		t.Fatalf("GET: %d %s %v", got.StatusCode, got.Body, err)
	}

	// Without a key, each request is a job of its own.
	a := accepted(t, s.post(t, "", body))
	b := accepted(t, s.post(t, "", body))
	if a.ID == b.ID || a.Key != a.ID || b.Key != b.ID {
		t.Fatalf("unkeyed requests: %+v and %+v, want two jobs keyed by their ids", a, b)
	}
	if ids := s.drain(t); len(ids) != 2 {
		t.Fatalf("unkeyed requests sent %v, want 2", ids)
	}
}

// TestIdempotentRequestSendFails: when SQS refuses the send, the caller gets 502 and the key is
// free again (the reservation released), so a retry, even with another body, is a new job; the
// job that was never sent is unknown to GET.
func TestIdempotentRequestSendFails(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.failSend.Store(1)
	resp := s.post(t, "report-q4", `{"kind":"report.build","args":{"name":"q4"}}`)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d (%s), want 502", resp.StatusCode, resp.Body)
	}
	rec, err := s.table.Get(context.Background(), "report.build", "report-q4")
	if err != nil || !rec.Expired {
		t.Fatalf("after the failed send the record is %+v (expired %v), %v; want it released", rec.Record, rec.Expired, err)
	}
	if got, err := s.api.Handle(context.Background(), request("GET", "/jobs/"+rec.JobID, "", nil)); err != nil || got.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of the job never sent: %d %s %v, want 404", got.StatusCode, got.Body, err)
	}
	retry := accepted(t, s.post(t, "report-q4", `{"kind":"report.build","args":{"name":"q4-final"}}`))
	if ids := s.drain(t); len(ids) != 1 || ids[0] != retry.ID {
		t.Fatalf("queue holds %v, want [%s]", ids, retry.ID)
	}
}

// TestIdempotentRequestLostSend: a reservation whose message never reached SQS (the function
// died between the two) is completed by the next repeat of the request.
func TestIdempotentRequestLostSend(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	hash, err := jobs.PayloadHash("report.build", []byte(`{"name":"q4"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.table.ReserveQueued(context.Background(), status.QueuedJob{Kind: "report.build", Key: "report-q4",
		JobID: "01LOSTSEND", PayloadHash: hash}); err != nil || !created {
		t.Fatal(created, err)
	}
	if r := accepted(t, s.post(t, "report-q4", `{"kind":"report.build","args":{"name":"q4"}}`)); r.ID != "01LOSTSEND" {
		t.Fatalf("id %s, want the reserved job 01LOSTSEND", r.ID)
	}
	if ids := s.drain(t); len(ids) != 1 || ids[0] != "01LOSTSEND" {
		t.Fatalf("queue holds %v, want the reserved job sent", ids)
	}
}

// TestIdempotentRequestWholeBody: what makes a repeat the same request is the whole body — kind,
// args (canonical), delay (as a duration) and group; the first request's delay counts too.
func TestIdempotentRequestWholeBody(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	first := accepted(t, s.post(t, "digest-7", `{"kind":"metrics.rollup","args":{"day":7},"delay":"30s"}`))
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"kind":"metrics.rollup","args":{ "day":7 },"delay":"30000ms"}`, http.StatusAccepted}, // the same delay
		{`{"kind":"metrics.rollup","args":{"day":7}}`, http.StatusConflict},                     // no delay
		{`{"kind":"metrics.rollup","args":{"day":7},"delay":"45s"}`, http.StatusConflict},
		{`{"kind":"metrics.rollup","args":{"day":7},"delay":"30s","group":"g-1"}`, http.StatusConflict},
		{`{"kind":"metrics.rollup","args":{"day":8},"delay":"30s"}`, http.StatusConflict},
	} {
		resp := s.post(t, "digest-7", tc.body)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.body, resp.StatusCode, resp.Body, tc.want)
		}
		if tc.want == http.StatusAccepted {
			if again := accepted(t, resp); again.ID != first.ID {
				t.Errorf("%s: id %s, want the first job %s", tc.body, again.ID, first.ID)
			}
		}
	}
	// No delay either time: the same request.
	a := accepted(t, s.post(t, "digest-8", `{"kind":"metrics.rollup","args":{"day":8}}`))
	if b := accepted(t, s.post(t, "digest-8", `{"kind":"metrics.rollup","args":{"day":8},"delay":"0s"}`)); b.ID != a.ID {
		t.Errorf("a zero delay: id %s, want %s", b.ID, a.ID)
	}
}

// TestIdempotentRequestRecordOfTheProducer: a key whose record another producer wrote (no
// request hash) is judged by its payload hash: the same args replay, others are 409.
func TestIdempotentRequestRecordOfTheProducer(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	hash, err := jobs.PayloadHash("report.build", []byte(`{"name":"q1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.table.RecordQueued(context.Background(), status.QueuedJob{Kind: "report.build", Key: "report-q1", JobID: "01BYPRODUCER",
		PayloadHash: hash, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r := accepted(t, s.post(t, "report-q1", `{"kind":"report.build","args":{"name":"q1"},"delay":"10s"}`)); r.ID != "01BYPRODUCER" {
		t.Errorf("id %s, want the producer's job", r.ID)
	}
	if resp := s.post(t, "report-q1", `{"kind":"report.build","args":{"name":"q2"}}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("other args: %d %s, want 409", resp.StatusCode, resp.Body)
	}
}

// signed returns req as it arrives through a function URL with AWS_IAM auth, signed by arn.
func signed(req events.LambdaFunctionURLRequest, arn string) events.LambdaFunctionURLRequest {
	req.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
		IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{AccountID: "123456789012", UserARN: arn, AccessKey: "ASIAEXAMPLE"},
	}
	return req
}

// TestKeysScopedByCaller: with AWS_IAM auth, an Idempotency-Key belongs to the caller's IAM
// principal. Caller B using caller A's key first does not make A's request a 409, and B
// repeating A's body with A's key gets a job of its own, not A's id; B cannot read A's job by
// its id. Two sessions of one role are one caller. With auth NONE (no identity) keys are shared.
func TestKeysScopedByCaller(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const (
		roleA  = "arn:aws:sts::123456789012:assumed-role/web/i-0aaa"
		roleA2 = "arn:aws:sts::123456789012:assumed-role/web/i-0bbb" // another session of A's role
		userB  = "arn:aws:iam::123456789012:user/mallory"
		bodyA  = `{"kind":"email.send","args":{"to":"ada@example.com","subject":"welcome"}}`
		bodyB  = `{"kind":"email.send","args":{"to":"mallory@example.com"}}`
	)
	post := func(arn, key, body string) events.LambdaFunctionURLResponse {
		t.Helper()
		req := request("POST", "/jobs", body, map[string]string{"content-type": "application/json", "idempotency-key": key})
		if arn != "" {
			req = signed(req, arn)
		}
		resp, err := s.api.Handle(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	get := func(arn, id string) events.LambdaFunctionURLResponse {
		t.Helper()
		req := request("GET", "/jobs/"+id, "", nil)
		if arn != "" {
			req = signed(req, arn)
		}
		resp, err := s.api.Handle(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// B takes the key first, with its own body: A's request is still A's first.
	b := accepted(t, post(userB, "welcome-ada", bodyB))
	a := accepted(t, post(roleA, "welcome-ada", bodyA))
	if a.ID == b.ID || a.Key != "welcome-ada" || b.Key != "welcome-ada" {
		t.Fatalf("A %+v and B %+v: want two jobs, each answered with the key as its caller sent it", a, b)
	}
	// B repeats A's (guessed) body with A's key: B's key already holds B's other body, 409,
	// and nothing about A's job.
	if resp := post(userB, "welcome-ada", bodyA); resp.StatusCode != http.StatusConflict || strings.Contains(resp.Body, a.ID) {
		t.Fatalf("B replaying A's body: %d %s, want 409 without A's id", resp.StatusCode, resp.Body)
	}
	// B with a fresh key A used: a new job of B's, never A's id or a replay.
	a2 := accepted(t, post(roleA, "invoice-7", bodyA))
	resp := post(userB, "invoice-7", bodyA)
	if b2 := accepted(t, resp); b2.ID == a2.ID || resp.Headers["Idempotent-Replayed"] == "true" {
		t.Fatalf("B's guess of A's key and body answered %+v %v: A's job is %s", b2, resp.Headers, a2.ID)
	}
	// Another session of A's role is A: the first answer.
	resp = post(roleA2, "welcome-ada", bodyA)
	if again := accepted(t, resp); again.ID != a.ID || resp.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("A's other session: %+v %v, want A's job %s replayed", again, resp.Headers, a.ID)
	}
	// The records: one per caller, under the scoped keys.
	for _, tc := range []struct{ key, id string }{
		{"arn:aws:sts::123456789012:assumed-role/web welcome-ada", a.ID},
		{"arn:aws:iam::123456789012:user/mallory welcome-ada", b.ID},
	} {
		if rec, err := s.table.Get(context.Background(), "email.send", tc.key); err != nil || rec.JobID != tc.id {
			t.Errorf("record of %q: %+v, %v; want job %s", tc.key, rec.Record, err, tc.id)
		}
	}

	// GET: each caller reads its own jobs; another caller's id is unknown to it.
	if got := get(roleA, a.ID); got.StatusCode != http.StatusOK {
		t.Errorf("A reading its job: %d %s", got.StatusCode, got.Body)
	}
	if got := get(roleA2, a.ID); got.StatusCode != http.StatusOK {
		t.Errorf("A's other session reading A's job: %d %s", got.StatusCode, got.Body)
	}
	if got := get(userB, a.ID); got.StatusCode != http.StatusNotFound || got.Body != `{"error":"no job with id \"`+a.ID+`\""}` {
		t.Errorf("B reading A's job: %d %s, want 404 as for an unknown id", got.StatusCode, got.Body)
	}
	if got := get(roleA, b.ID); got.StatusCode != http.StatusNotFound {
		t.Errorf("A reading B's job: %d %s, want 404", got.StatusCode, got.Body)
	}
	// With details, the key shown is the caller's own.
	s.api.ShowDetails = true
	if got := get(roleA, a.ID); !strings.Contains(got.Body, `"key":"welcome-ada"`) {
		t.Errorf("A reading its job with details: %s, want its key as it sent it", got.Body)
	}
	s.api.ShowDetails = false

	// Auth NONE: no identity, one key space shared by every caller (as before).
	n1 := accepted(t, post("", "shared-1", bodyA))
	resp = post("", "shared-1", bodyA)
	if n2 := accepted(t, resp); n2.ID != n1.ID || resp.Headers["Idempotent-Replayed"] != "true" {
		t.Errorf("unsigned repeat: %+v, want %s replayed", n2, n1.ID)
	}
	if got := get("", n1.ID); got.StatusCode != http.StatusOK {
		t.Errorf("unsigned GET: %d %s", got.StatusCode, got.Body)
	}
}
