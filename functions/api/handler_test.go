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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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

func (f *fakeSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("not used")
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

func TestHandle(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC)
	known := status.Job{Record: idempotency.Record{
		Kind: "email.send", Key: "welcome-ada", JobID: "01JOB", State: idempotency.StateSucceeded, Runs: 1,
		Token: "secret-claim-token", Result: `{"sent":true}`, FirstAttemptAt: at, LastAttemptAt: at, UpdatedAt: at,
	}}
	tests := []struct {
		name      string
		req       events.LambdaFunctionURLRequest
		noStatus  bool
		statusErr error
		sqsErr    error
		wantCode  int
		wantBody  string // substring of the body
		check     func(t *testing.T, sent []*sqs.SendMessageInput, body string)
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
			name: "enqueue with key, delay and base64 body",
			req: func() events.LambdaFunctionURLRequest {
				r := request("POST", "/jobs/", base64.StdEncoding.EncodeToString([]byte(`{"kind":"report.build","args":{"name":"q4"},"delay":"30s"}`)), map[string]string{"Idempotency-Key": "report-q4"})
				r.IsBase64Encoded = true
				return r
			}(),
			wantCode: http.StatusAccepted, wantBody: `"key":"report-q4"`,
			check: func(t *testing.T, sent []*sqs.SendMessageInput, body string) {
				if len(sent) != 1 || sent[0].DelaySeconds != 30 || !strings.Contains(aws.ToString(sent[0].MessageBody), `"key":"report-q4"`) {
					t.Errorf("want one message delayed 30 s with key report-q4, got %+v", sent)
				}
			},
		},
		{name: "args default to {}", req: request("POST", "/jobs", `{"kind":"metrics.rollup"}`, nil), wantCode: http.StatusAccepted, wantBody: `"id":"`},
		{name: "not JSON", req: request("POST", "/jobs", `kind=email.send`, nil), wantCode: http.StatusBadRequest, wantBody: "the body is not a job"},
		{name: "unknown field", req: request("POST", "/jobs", `{"kind":"email.send","argz":{}}`, nil), wantCode: http.StatusBadRequest, wantBody: `unknown field \"argz\"`},
		{name: "trailing data", req: request("POST", "/jobs", `{"kind":"email.send"} {}`, nil), wantCode: http.StatusBadRequest, wantBody: "data after the JSON object"},
		{name: "kind missing", req: request("POST", "/jobs", `{"args":{}}`, nil), wantCode: http.StatusBadRequest, wantBody: `\"kind\" is required`},
		{name: "bad kind", req: request("POST", "/jobs", `{"kind":"Email Send"}`, nil), wantCode: http.StatusBadRequest, wantBody: "producer: enqueue job"},
		{name: "args not an object", req: request("POST", "/jobs", `{"kind":"email.send","args":[1]}`, nil), wantCode: http.StatusBadRequest, wantBody: "args must be a JSON object"},
		{name: "bad delay", req: request("POST", "/jobs", `{"kind":"email.send","delay":"soon"}`, nil), wantCode: http.StatusBadRequest, wantBody: `\"delay\" \"soon\"`},
		{name: "delay beyond SQS without scheduler", req: request("POST", "/jobs", `{"kind":"email.send","delay":"1h"}`, nil), wantCode: http.StatusBadRequest, wantBody: "15-minute maximum"},
		{name: "bad base64", req: func() events.LambdaFunctionURLRequest {
			r := request("POST", "/jobs", "%%%", nil)
			r.IsBase64Encoded = true
			return r
		}(), wantCode: http.StatusBadRequest, wantBody: "base64"},
		{name: "wrong content type", req: request("POST", "/jobs", `{}`, map[string]string{"content-type": "text/plain"}), wantCode: http.StatusUnsupportedMediaType},
		{name: "SQS down", req: request("POST", "/jobs", `{"kind":"email.send"}`, nil), sqsErr: errors.New("connection refused"), wantCode: http.StatusBadGateway, wantBody: "could not be enqueued"},
		{name: "GET /jobs not allowed", req: request("GET", "/jobs", "", nil), wantCode: http.StatusMethodNotAllowed},
		{name: "POST /jobs/x not allowed", req: request("POST", "/jobs/x", "", nil), wantCode: http.StatusMethodNotAllowed},
		{name: "unknown route", req: request("GET", "/health", "", nil), wantCode: http.StatusNotFound, wantBody: "no route for GET /health"},
		{
			name: "get", req: request("GET", "/jobs/01JOB", "", nil), wantCode: http.StatusOK,
			wantBody: `{"id":"01JOB","kind":"email.send","key":"welcome-ada","state":"succeeded","runs":1,"result":{"sent":true},"first_attempt_at":"2026-11-29T10:00:00.123Z","last_attempt_at":"2026-11-29T10:00:00.123Z","updated_at":"2026-11-29T10:00:00.123Z"}`,
			check: func(t *testing.T, _ []*sqs.SendMessageInput, body string) {
				if strings.Contains(body, "secret-claim-token") {
					t.Errorf("the claim token leaked: %s", body)
				}
			},
		},
		{name: "get unknown", req: request("GET", "/jobs/nope", "", nil), wantCode: http.StatusNotFound, wantBody: `no job with id \"nope\"`},
		{name: "get without table", req: request("GET", "/jobs/01JOB", "", nil), noStatus: true, wantCode: http.StatusNotImplemented, wantBody: "SQSWORKER_TABLE"},
		{name: "get, DynamoDB down", req: request("GET", "/jobs/01JOB", "", nil), statusErr: errors.New("timeout"), wantCode: http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := &fakeSQS{fail: tt.sqsErr}
			prod, err := producer.New(producer.Config{SQS: fs, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs", MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			api := &API{Producer: prod, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if !tt.noStatus {
				api.Status = &fakeStatus{jobs: map[string]status.Job{"01JOB": known}, err: tt.statusErr}
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
		return map[string]string{"SQSWORKER_TABLE": "x", "SQSWORKER_LOG_LEVEL": "loud"}[k]
	})
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("want three lines (queue required, table, log level), got %v", err)
	}
}
