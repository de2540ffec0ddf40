package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// fakeSQS records SendMessage calls; fail makes them fail.
type fakeSQS struct {
	mu   sync.Mutex
	sent []*sqs.SendMessageInput
	fail error
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	f.sent = append(f.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("msg-%d", len(f.sent)))}, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		// Copies: the producer reuses its entries once the call returns.
		f.sent = append(f.sent, &sqs.SendMessageInput{QueueUrl: aws.String(aws.ToString(in.QueueUrl)), MessageBody: aws.String(aws.ToString(e.MessageBody)),
			DelaySeconds: e.DelaySeconds, MessageGroupId: aws.String(aws.ToString(e.MessageGroupId))})
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("msg-%d", len(f.sent)))})
	}
	return out, nil
}

// fakeStatus answers GetByID from a map; err, when set, is returned for every id.
type fakeStatus struct {
	jobs map[string]status.Job
	err  error
}

func (f *fakeStatus) GetByID(_ context.Context, id string) (status.Job, error) {
	if f.err != nil {
		return status.Job{}, f.err
	}
	j, ok := f.jobs[id]
	if !ok {
		return status.Job{}, fmt.Errorf("status: get job %s: %w", id, status.ErrNotFound)
	}
	return j, nil
}

func request(method, path, body string, headers map[string]string) events.LambdaFunctionURLRequest {
	r := events.LambdaFunctionURLRequest{RawPath: path, Body: body, Headers: headers}
	r.RequestContext.HTTP.Method = method
	r.RequestContext.HTTP.Path = path
	return r
}

// testKinds is the allow-list of the handler tests: email.send with a schema, report.build with
// a small limit, metrics.rollup with neither.
var testKinds = map[string]string{
	"SQSWORKER_QUEUE_URL":          "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
	"SQSWORKER_API_KINDS":          "email.send,report.build=64,metrics.rollup",
	"SQSWORKER_API_MAX_ARGS_BYTES": "4KiB",
	"SQSWORKER_API_SCHEMAS":        emailSchemaEnv,
}

const emailSchemaEnv = `{"email.send": {"type":"object","required":["to"],"additionalProperties":false,
	"properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string","maxLength":20}}}}`

// testPolicy builds the policy of the handler tests from their environment, as setup does.
func testPolicy(t *testing.T, env map[string]string) *Policy {
	t.Helper()
	cfg, err := config.LoadAPI(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(cfg, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHandle(t *testing.T) {
	t.Parallel()
	policy := testPolicy(t, testKinds)
	at := time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC)
	known := status.Job{Record: idempotency.Record{
		Kind: "email.send", Key: "welcome-ada", JobID: "01JOB", State: idempotency.StateDead, Runs: 3, Reason: "exhausted",
		Token: "secret-claim-token", Result: `{"sent":false}`, LastError: "smtp: 550 mailbox unavailable for ada@example.com",
		FirstAttemptAt: at, LastAttemptAt: at, UpdatedAt: at,
	}}
	other := status.Job{Record: idempotency.Record{Kind: "payment.refund", Key: "order-42", JobID: "01REFUND", State: idempotency.StateSucceeded, Runs: 1, UpdatedAt: at}}
	// Expired records: a reservation released after its send failed (never sent, never run), a
	// scheduled job that no worker took before its record expired, and a job that ran.
	released := status.Job{Record: idempotency.Record{Kind: "email.send", Key: "k-released", JobID: "01RELEASED", State: idempotency.StateQueued,
		UpdatedAt: at, ExpiresAt: at}, Expired: true}
	lapsed := status.Job{Record: idempotency.Record{Kind: "email.send", Key: "k-lapsed", JobID: "01LAPSED", State: idempotency.StateScheduled,
		UpdatedAt: at, ExpiresAt: at}, Expired: true}
	ran := status.Job{Record: idempotency.Record{Kind: "email.send", Key: "k-ran", JobID: "01RAN", State: idempotency.StateSucceeded, Runs: 1,
		UpdatedAt: at, ExpiresAt: at}, Expired: true}
	const summary = `{"id":"01JOB","kind":"email.send","state":"dead","attempts":3,"first_attempt_at":"2026-11-29T10:00:00.123Z","last_attempt_at":"2026-11-29T10:00:00.123Z","updated_at":"2026-11-29T10:00:00.123Z"}`
	tests := []struct {
		name        string
		req         events.LambdaFunctionURLRequest
		noStatus    bool
		noPolicy    bool
		showDetails bool
		fifo        bool
		statusErr   error
		sqsErr      error
		wantCode    int
		wantBody    string // substring of the body
		check       func(t *testing.T, sent []*sqs.SendMessageInput, body string)
	}{
		{
			name:     "enqueue",
			req:      request("POST", "/jobs", `{"kind":"email.send","args":{"to":"ada@example.com"}}`, map[string]string{"content-type": "application/json"}),
			wantCode: http.StatusAccepted, wantBody: `"status_url":"/jobs/`,
			check: func(t *testing.T, sent []*sqs.SendMessageInput, body string) {
				var r enqueueResponse
				if err := json.Unmarshal([]byte(body), &r); err != nil || r.ID == "" || r.Key != r.ID || r.StatusURL != "/jobs/"+r.ID {
					t.Errorf("response %s: want an id, key = id and status_url /jobs/<id> (err %v)", body, err)
				}
				if len(sent) != 1 || !strings.Contains(aws.ToString(sent[0].MessageBody), `"args":{"to":"ada@example.com"}`) {
					t.Errorf("sent %d messages; want one carrying the args", len(sent))
				}
			},
		},
		{
			name: "enqueue with key, delay, compacted args and base64 body",
			req: func() events.LambdaFunctionURLRequest {
				r := request("POST", "/jobs/", base64.StdEncoding.EncodeToString([]byte(`{"kind":"report.build","args":{ "name" : "q4" },"delay":"30s"}`)), map[string]string{"Idempotency-Key": "report-q4"})
				r.IsBase64Encoded = true
				return r
			}(),
			wantCode: http.StatusAccepted, wantBody: `"key":"report-q4"`,
			check: func(t *testing.T, sent []*sqs.SendMessageInput, body string) {
				if len(sent) != 1 || sent[0].DelaySeconds != 30 || !strings.Contains(aws.ToString(sent[0].MessageBody), `"key":"report-q4"`) ||
					!strings.Contains(aws.ToString(sent[0].MessageBody), `"args":{"name":"q4"}`) {
					t.Errorf("want one message delayed 30 s with key report-q4 and compacted args, got %+v", sent)
				}
			},
		},
		{name: "args default to {}", req: request("POST", "/jobs", `{"kind":"metrics.rollup"}`, nil), wantCode: http.StatusAccepted, wantBody: `"id":"`},
		{name: "kind not on the allow-list", req: request("POST", "/jobs", `{"kind":"payment.refund","args":{"order":"42"}}`, nil), wantCode: http.StatusForbidden,
			wantBody: `kind \"payment.refund\" may not be enqueued through this API: it is not on its allow-list (SQSWORKER_API_KINDS)`,
			check: func(t *testing.T, sent []*sqs.SendMessageInput, _ string) {
				if len(sent) != 0 {
					t.Errorf("a refused kind sent %d messages", len(sent))
				}
			}},
		{name: "no policy: nothing is enqueued", noPolicy: true, req: request("POST", "/jobs", `{"kind":"email.send","args":{"to":"a@b.co"}}`, nil), wantCode: http.StatusForbidden, wantBody: "allow-list"},
		{name: "args over the kind's limit", req: request("POST", "/jobs", `{"kind":"report.build","args":{"name":"`+strings.Repeat("x", 60)+`"}}`, nil), wantCode: http.StatusRequestEntityTooLarge,
			wantBody: `the args of report.build are 71 bytes (compacted JSON), above this kind's limit of 64`},
		{name: "args at the kind's limit", req: request("POST", "/jobs", `{"kind":"report.build","args":{"name":"`+strings.Repeat("x", 53)+`"}}`, nil), wantCode: http.StatusAccepted},
		{name: "args over the default limit", req: request("POST", "/jobs", `{"kind":"metrics.rollup","args":{"pad":"`+strings.Repeat("x", 4096)+`"}}`, nil), wantCode: http.StatusRequestEntityTooLarge, wantBody: "limit of 4096"},
		{name: "whitespace does not count", req: request("POST", "/jobs", `{"kind":"report.build","args":{"name":   `+strings.Repeat(" ", 200)+`"q4"}}`, nil), wantCode: http.StatusAccepted},
		{name: "schema: wrong type names the field", req: request("POST", "/jobs", `{"kind":"email.send","args":{"to":42}}`, nil), wantCode: http.StatusBadRequest,
			wantBody: `"fields":[{"field":"/to","error":"got number, want string"}]`,
			check: func(t *testing.T, sent []*sqs.SendMessageInput, body string) {
				if !strings.Contains(body, `the args do not match the schema of email.send: at /to: got number, want string`) || len(sent) != 0 {
					t.Errorf("body %s, %d sent", body, len(sent))
				}
			}},
		{name: "schema: missing property", req: request("POST", "/jobs", `{"kind":"email.send","args":{"subject":"hi"}}`, nil), wantCode: http.StatusBadRequest,
			wantBody: `at (the args object): missing property 'to'`},
		{name: "schema: format asserted", req: request("POST", "/jobs", `{"kind":"email.send","args":{"to":"not-an-address"}}`, nil), wantCode: http.StatusBadRequest,
			wantBody: `"field":"/to","error":"'not-an-address' is not valid email`},
		{name: "schema: several violations, sorted", req: request("POST", "/jobs", `{"kind":"email.send","args":{"to":"a@b.co","subject":"`+strings.Repeat("s", 21)+`","cc":1}}`, nil), wantCode: http.StatusBadRequest,
			wantBody: `"fields":[{"field":"","error":"additional properties 'cc' not allowed"},{"field":"/subject","error":"maxLength: got 21, want 20"}]`},
		{name: "not JSON", req: request("POST", "/jobs", `kind=email.send`, nil), wantCode: http.StatusBadRequest, wantBody: "the body is not a job"},
		{name: "unknown field", req: request("POST", "/jobs", `{"kind":"email.send","argz":{}}`, nil), wantCode: http.StatusBadRequest, wantBody: `unknown field \"argz\"`},
		{name: "trailing data", req: request("POST", "/jobs", `{"kind":"email.send"} {}`, nil), wantCode: http.StatusBadRequest, wantBody: "data after the JSON object"},
		{name: "kind missing", req: request("POST", "/jobs", `{"args":{}}`, nil), wantCode: http.StatusBadRequest, wantBody: `\"kind\" is required`},
		{name: "bad kind", req: request("POST", "/jobs", `{"kind":"Email Send"}`, nil), wantCode: http.StatusBadRequest, wantBody: `character 'E' at 0 is not allowed`},
		{name: "args not an object", req: request("POST", "/jobs", `{"kind":"metrics.rollup","args":[1]}`, nil), wantCode: http.StatusBadRequest, wantBody: "must be a JSON object"},
		{name: "bad delay", req: request("POST", "/jobs", `{"kind":"metrics.rollup","delay":"soon"}`, nil), wantCode: http.StatusBadRequest, wantBody: `\"delay\" \"soon\"`},
		{name: "delay beyond SQS", req: request("POST", "/jobs", `{"kind":"metrics.rollup","delay":"1h"}`, nil), wantCode: http.StatusBadRequest, wantBody: "15-minute maximum"},
		{name: "FIFO: delay refused", fifo: true, req: request("POST", "/jobs", `{"kind":"metrics.rollup","delay":"1s","group":"g"}`, nil), wantCode: http.StatusBadRequest, wantBody: "FIFO queue"},
		{name: "FIFO: group required", fifo: true, req: request("POST", "/jobs", `{"kind":"metrics.rollup"}`, nil), wantCode: http.StatusBadRequest, wantBody: "no message group id"},
		{name: "FIFO: group", fifo: true, req: request("POST", "/jobs", `{"kind":"metrics.rollup","group":"tenant-1"}`, nil), wantCode: http.StatusAccepted,
			check: func(t *testing.T, sent []*sqs.SendMessageInput, _ string) {
				if len(sent) != 1 || aws.ToString(sent[0].MessageGroupId) != "tenant-1" {
					t.Errorf("want one message in group tenant-1, got %+v", sent)
				}
			}},
		{name: "bad key", req: request("POST", "/jobs", `{"kind":"metrics.rollup"}`, map[string]string{"idempotency-key": strings.Repeat("k", 2000)}), wantCode: http.StatusBadRequest, wantBody: "key"},
		{name: "bad base64", req: func() events.LambdaFunctionURLRequest {
			r := request("POST", "/jobs", "%%%", nil)
			r.IsBase64Encoded = true
			return r
		}(), wantCode: http.StatusBadRequest, wantBody: "base64"},
		{name: "body too large", req: request("POST", "/jobs", strings.Repeat(" ", maxBodyBytes+1), nil), wantCode: http.StatusRequestEntityTooLarge, wantBody: "above the limit"},
		{name: "wrong content type", req: request("POST", "/jobs", `{}`, map[string]string{"content-type": "text/plain"}), wantCode: http.StatusUnsupportedMediaType},
		{name: "SQS down", req: request("POST", "/jobs", `{"kind":"metrics.rollup"}`, nil), sqsErr: errors.New("connection refused"), wantCode: http.StatusBadGateway, wantBody: "could not be enqueued"},
		{name: "GET /jobs not allowed", req: request("GET", "/jobs", "", nil), wantCode: http.StatusMethodNotAllowed},
		{name: "POST /jobs/x not allowed", req: request("POST", "/jobs/x", "", nil), wantCode: http.StatusMethodNotAllowed},
		{name: "unknown route", req: request("GET", "/health", "", nil), wantCode: http.StatusNotFound, wantBody: "no route for GET /health"},
		{
			name: "get: details hidden by default", req: request("GET", "/jobs/01JOB", "", nil), wantCode: http.StatusOK, wantBody: summary,
			check: func(t *testing.T, _ []*sqs.SendMessageInput, body string) {
				if body != summary {
					t.Errorf("body %s, want exactly %s", body, summary)
				}
			},
		},
		{
			name: "get: details when enabled", showDetails: true, req: request("GET", "/jobs/01JOB", "", nil), wantCode: http.StatusOK,
			wantBody: `"attempts":3,`,
			check: func(t *testing.T, _ []*sqs.SendMessageInput, body string) {
				for _, want := range []string{`"key":"welcome-ada"`, `"reason":"exhausted"`, `"last_error":"smtp: 550 mailbox unavailable for ada@example.com"`, `"result":{"sent":false}`} {
					if !strings.Contains(body, want) {
						t.Errorf("body %s lacks %s", body, want)
					}
				}
				if strings.Contains(body, "secret-claim-token") {
					t.Errorf("the claim token leaked: %s", body)
				}
			},
		},
		{name: "get: a kind not on the list is unknown", req: request("GET", "/jobs/01REFUND", "", nil), wantCode: http.StatusNotFound, wantBody: `no job with id \"01REFUND\"`},
		{name: "get unknown", req: request("GET", "/jobs/nope", "", nil), wantCode: http.StatusNotFound, wantBody: `no job with id \"nope\"`},
		{name: "get: a released reservation is no job", req: request("GET", "/jobs/01RELEASED", "", nil), wantCode: http.StatusNotFound, wantBody: `no job with id \"01RELEASED\"`},
		{name: "get: a scheduled job that expired unrun is no job", req: request("GET", "/jobs/01LAPSED", "", nil), wantCode: http.StatusNotFound, wantBody: `no job with id \"01LAPSED\"`},
		{name: "get: an expired record of a job that ran is shown", req: request("GET", "/jobs/01RAN", "", nil), wantCode: http.StatusOK,
			wantBody: `"state":"succeeded","attempts":1,"updated_at":"2026-11-29T10:00:00.123Z","expires_at":"2026-11-29T10:00:00.123Z","expired":true`},
		{name: "get without table", req: request("GET", "/jobs/01JOB", "", nil), noStatus: true, wantCode: http.StatusNotImplemented, wantBody: "SQSWORKER_TABLE"},
		{name: "get, DynamoDB down", req: request("GET", "/jobs/01JOB", "", nil), statusErr: errors.New("timeout"), wantCode: http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := &fakeSQS{fail: tt.sqsErr}
			queue := "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
			if tt.fifo {
				queue += ".fifo"
			}
			prod, err := producer.New(producer.Config{SQS: fs, QueueURL: queue, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			api := &API{Producer: prod, Policy: policy, ShowDetails: tt.showDetails, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tt.noPolicy {
				api.Policy = nil
			}
			if !tt.noStatus {
				api.Status = &fakeStatus{jobs: map[string]status.Job{"01JOB": known, "01REFUND": other, "01RELEASED": released, "01LAPSED": lapsed, "01RAN": ran},
					err: tt.statusErr}
			}
			resp, err := api.Handle(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Handle error: %v", err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d (body %s)", resp.StatusCode, tt.wantCode, resp.Body)
			}
			if resp.Headers["Content-Type"] != "application/json" || !json.Valid([]byte(resp.Body)) {
				t.Errorf("want a JSON body, got %q (%v)", resp.Body, resp.Headers)
			}
			if !strings.Contains(resp.Body, tt.wantBody) {
				t.Errorf("body %s, want it to contain %s", resp.Body, tt.wantBody)
			}
			if tt.check != nil {
				fs.mu.Lock()
				defer fs.mu.Unlock()
				tt.check(t, fs.sent, resp.Body)
			}
		})
	}
}

func TestSetupReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, _, err := setup(context.Background(), func(k string) string {
		return map[string]string{"SQSWORKER_TABLE": "x", "SQSWORKER_LOG_LEVEL": "loud", "SQSWORKER_API_KINDS": "email.send,report.build",
			"SQSWORKER_API_SCHEMAS": `{"email.send": {"type": 12}, "report.build": "/nonexistent/report.json"}`}[k]
	})
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{"SQSWORKER_QUEUE_URL is required", "SQSWORKER_TABLE=\"x\"", "SQSWORKER_LOG_LEVEL=\"loud\"",
		`kind "email.send": the schema does not compile`, `kind "report.build": read the schema: open /nonexistent/report.json`}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got:\n%v", len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
}

func TestPrincipal(t *testing.T) {
	t.Parallel()
	iam := func(d events.LambdaFunctionURLRequestContextAuthorizerIAMDescription) events.LambdaFunctionURLRequest {
		var r events.LambdaFunctionURLRequest
		r.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &d}
		return r
	}
	for _, tc := range []struct {
		name string
		req  events.LambdaFunctionURLRequest
		want string
	}{
		{"auth NONE", events.LambdaFunctionURLRequest{}, ""},
		{"assumed role: the role, not the session", iam(events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			UserARN: "arn:aws:sts::123456789012:assumed-role/web/i-0abc", UserID: "AROAEXAMPLE:i-0abc"}), "arn:aws:sts::123456789012:assumed-role/web"},
		{"another partition", iam(events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			UserARN: "arn:aws-us-gov:sts::123456789012:assumed-role/web/s"}), "arn:aws-us-gov:sts::123456789012:assumed-role/web"},
		{"IAM user with a path", iam(events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			UserARN: "arn:aws:iam::123456789012:user/ops/ada"}), "arn:aws:iam::123456789012:user/ops/ada"},
		{"root", iam(events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:root"}), "arn:aws:iam::123456789012:root"},
		{"federated user", iam(events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			UserARN: "arn:aws:sts::123456789012:federated-user/ada"}), "arn:aws:sts::123456789012:federated-user/ada"},
		{"no ARN: the role's unique id", iam(events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			AccountID: "123456789012", UserID: "AROAEXAMPLE:i-0abc"}), "iam:123456789012:AROAEXAMPLE"},
	} {
		if got := principal(tc.req); got != tc.want {
			t.Errorf("%s: principal = %q, want %q", tc.name, got, tc.want)
		}
	}
	if a, b := callerTag("arn:aws:iam::1:user/a"), callerTag("arn:aws:iam::1:user/b"); a == b || len(a) != 16 {
		t.Errorf("tags %q and %q: want two different 16-character tags", a, b)
	}
}

// A signed caller's key is scoped by its principal, within the producer's key limit: the
// limit the caller has is said.
func TestScopedKeyLimit(t *testing.T) {
	t.Parallel()
	fs := &fakeSQS{}
	prod, err := producer.New(producer.Config{SQS: fs, QueueURL: testKinds["SQSWORKER_QUEUE_URL"], MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Producer: prod, Policy: testPolicy(t, testKinds), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const arn = "arn:aws:sts::123456789012:assumed-role/web/s1"
	room := 1024 - len("arn:aws:sts::123456789012:assumed-role/web ") // 981
	req := func(key string) events.LambdaFunctionURLRequest {
		r := request("POST", "/jobs", `{"kind":"metrics.rollup"}`, map[string]string{"idempotency-key": key})
		r.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: arn}}
		return r
	}
	resp, _ := api.Handle(context.Background(), req(strings.Repeat("k", room)))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a key at the caller's limit: %d %s", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(aws.ToString(fs.sent[0].MessageBody), `"key":"arn:aws:sts::123456789012:assumed-role/web kkk`) {
		t.Errorf("sent %s, want the key scoped by the principal", aws.ToString(fs.sent[0].MessageBody))
	}
	resp, _ = api.Handle(context.Background(), req(strings.Repeat("k", room+1)))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "Idempotency-Key is 982 bytes long; the limit is 981 for this caller") {
		t.Errorf("a key over the caller's limit: %d %s", resp.StatusCode, resp.Body)
	}
}
