//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/functions/internal/rietest"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

// The bootstrap and the RIE are built once for the tests of this package.
var build = rietest.Once{RIE: true}

func TestMain(m *testing.M) {
	code := m.Run()
	build.Remove()
	os.Exit(code)
}

func built(t *testing.T) (bootstrapPath, rie string) {
	t.Helper()
	return build.Build(t)
}

// urlEvent is the function URL event (payload format 2.0) Lambda sends for an HTTP request, as a
// SigV4-signed caller's request arrives: its IAM identity in requestContext.authorizer.iam.
func urlEvent(t *testing.T, method, path, body string, headers map[string]string) []byte {
	t.Helper()
	h := map[string]string{"host": "abcdefghij.lambda-url.us-east-1.on.aws", "x-amzn-trace-id": "Root=1-67a0b1c2-0123456789abcdef01234567"}
	if body != "" {
		h["content-type"] = "application/json"
	}
	for k, v := range headers {
		h[k] = v
	}
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: path, Headers: h, Body: body,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "123456789012", RequestID: "c0ffee00-0000-4000-8000-000000000000", DomainName: h["host"], DomainPrefix: "abcdefghij",
			TimeEpoch: time.Now().UnixMilli(), APIID: "abcdefghij",
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				AccessKey: "AKIAEXAMPLE", AccountID: "123456789012", CallerID: "AROAEXAMPLE:web", UserARN: "arn:aws:sts::123456789012:assumed-role/web/session",
				UserID: "AROAEXAMPLE:web",
			}},
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.7", UserAgent: "curl/8.5.0"},
		},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invoke sends one event to the bootstrap under the RIE and decodes the function URL response.
func invoke(t *testing.T, ctx context.Context, r *rietest.RIE, event []byte) events.LambdaFunctionURLResponse {
	t.Helper()
	code, out, err := r.Invoke(ctx, event)
	if err != nil || code != 200 {
		t.Fatalf("invoke: HTTP %d %s %v\n%s", code, out, err, r.Output())
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		t.Fatalf("response %s is not a function URL response (%v)\n%s", out, err, r.Output())
	}
	return resp
}

// TestURLEventsUnderRIE runs the real bootstrap under the Lambda Runtime Interface Emulator
// against the embedded emulator's SQS and DynamoDB (over loopback), with a function URL event
// for each case of the deny-by-default policy and of idempotent requests.
func TestURLEventsUnderRIE(t *testing.T) {
	bootstrapPath, rie := built(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	backend := awslocaltest.Backend(t)
	if backend.Kind != awslocal.Embedded {
		t.Skipf("the RIE test runs against the embedded emulator (backend is %s)", backend.Kind)
	}
	name := awslocal.UniqueName("rie-api")
	client := sqs.NewFromConfig(backend.Config)
	st, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, backend.DynamoDB(), name)
	if err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(t.TempDir(), "email.send.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","required":["to"],"properties":{"to":{"type":"string","format":"email"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"AWS_ENDPOINT_URL=" + backend.URL, "AWS_REGION=us-east-1", "AWS_MAX_ATTEMPTS=1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_LAMBDA_FUNCTION_NAME=sqsworker-api", "SQSWORKER_LOG_LEVEL=debug",
		"SQSWORKER_QUEUE_URL=" + st.QueueURL, "SQSWORKER_TABLE=" + table,
		"SQSWORKER_API_KINDS=email.send,report.build=64",
		`SQSWORKER_API_SCHEMAS={"email.send":"` + schema + `","report.build":{"type":"object","properties":{"name":{"type":"string"}}}}`,
	}
	r, err := rietest.Start(ctx, rie, bootstrapPath, env)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()

	var firstID string
	for _, tc := range []struct {
		name     string
		event    []byte
		wantCode int
		wantBody string
		check    func(t *testing.T, resp events.LambdaFunctionURLResponse)
	}{
		{"allowed kind → 202", urlEvent(t, "POST", "/jobs", `{"kind":"report.build","args":{"name":"q4"}}`, nil), 202, `"status_url":"/jobs/`, nil},
		{"kind not on the list → 403", urlEvent(t, "POST", "/jobs", `{"kind":"payment.refund","args":{"order":"42"}}`, nil), 403,
			`kind \"payment.refund\" may not be enqueued through this API`, nil},
		{"args over the limit → 413", urlEvent(t, "POST", "/jobs", `{"kind":"report.build","args":{"name":"`+strings.Repeat("x", 80)+`"}}`, nil), 413,
			"above this kind's limit of 64", nil},
		{"args fail the schema (file) → 400 naming the field", urlEvent(t, "POST", "/jobs", `{"kind":"email.send","args":{"to":["a@b.co"]}}`, nil), 400,
			`"fields":[{"field":"/to","error":"got array, want string"}]`, nil},
		{"args fail the schema (inline) → 400", urlEvent(t, "POST", "/jobs", `{"kind":"report.build","args":{"name":4}}`, nil), 400, `"field":"/name"`, nil},
		{"unknown field → 400", urlEvent(t, "POST", "/jobs", `{"kind":"report.build","priority":1}`, nil), 400, `unknown field \"priority\"`, nil},
		{"Idempotency-Key → 202", urlEvent(t, "POST", "/jobs", `{"kind":"email.send","args":{"to":"ada@example.com"}}`, map[string]string{"idempotency-key": "welcome-ada"}), 202,
			`"key":"welcome-ada"`, func(t *testing.T, resp events.LambdaFunctionURLResponse) {
				var r enqueueResponse
				_ = json.Unmarshal([]byte(resp.Body), &r)
				firstID = r.ID
			}},
		{"repeated Idempotency-Key → the same id", urlEvent(t, "POST", "/jobs", `{"kind":"email.send","args":{"to":"ada@example.com"}}`, map[string]string{"idempotency-key": "welcome-ada"}), 202,
			`"key":"welcome-ada"`, func(t *testing.T, resp events.LambdaFunctionURLResponse) {
				var r enqueueResponse
				if err := json.Unmarshal([]byte(resp.Body), &r); err != nil || r.ID != firstID || resp.Headers["Idempotent-Replayed"] != "true" {
					t.Errorf("repeat answered %s %v, want id %s replayed", resp.Body, resp.Headers, firstID)
				}
			}},
		{"different body with that key → 409", urlEvent(t, "POST", "/jobs", `{"kind":"email.send","args":{"to":"bob@example.com"}}`, map[string]string{"idempotency-key": "welcome-ada"}), 409,
			"was already used for a email.send job with another request (args, delay or group)", nil},
		{"a key differing from the schema's only by case → 400", urlEvent(t, "POST", "/jobs", `{"kind":"email.send","args":{"to":"ada@example.com","TO":"x"}}`, nil), 400,
			`"fields":[{"field":"/TO","error":"'TO' differs from the property 'to' only by case`, nil},
		{"args nested 65 deep → 400", urlEvent(t, "POST", "/jobs", `{"kind":"report.build","args":{"n":`+strings.Repeat("[", 64)+strings.Repeat("]", 64)+`}}`, nil), 400,
			`\"args\" may nest at most 64`, nil},
		{"GET → no details", nil, 200, `"state":"queued"`, func(t *testing.T, resp events.LambdaFunctionURLResponse) {
			if strings.Contains(resp.Body, "welcome-ada") {
				t.Errorf("GET shows the key without SQSWORKER_API_SHOW_DETAILS: %s", resp.Body)
			}
		}},
		{"GET by another caller → 404", []byte("another caller"), 404, `no job with id`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			event := tc.event
			switch string(event) {
			case "":
				event = urlEvent(t, "GET", "/jobs/"+firstID, "", nil)
			case "another caller":
				event = urlEvent(t, "GET", "/jobs/"+firstID, "", nil)
				event = []byte(strings.ReplaceAll(string(event), "assumed-role/web/session", "assumed-role/reports/session"))
			}
			resp := invoke(t, ctx, r, event)
			if resp.StatusCode != tc.wantCode || !strings.Contains(resp.Body, tc.wantBody) {
				t.Errorf("%d %s, want %d with %s\n%s", resp.StatusCode, resp.Body, tc.wantCode, tc.wantBody, r.Output())
			}
			if tc.check != nil {
				tc.check(t, resp)
			}
		})
	}
	// Three messages reached the queue: report.build, and the keyed job twice (once per 202;
	// the worker runs its key once).
	n := 0
	for range 10 {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &st.QueueURL, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		n += len(out.Messages)
	}
	if n != 3 {
		t.Errorf("%d messages on the queue, want 3", n)
	}

	// With SQSWORKER_API_SHOW_DETAILS the same lookup shows the key.
	r.Stop()
	r2, err := rietest.Start(ctx, rie, bootstrapPath, append(env, "SQSWORKER_API_SHOW_DETAILS=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Stop()
	if resp := invoke(t, ctx, r2, urlEvent(t, "GET", "/jobs/"+firstID, "", nil)); resp.StatusCode != 200 || !strings.Contains(resp.Body, `"key":"welcome-ada"`) {
		t.Errorf("GET with details: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestBadConfigurationExits runs the real bootstrap with bad settings: one line per problem on
// stderr (the missing allow-list among them) and exit status 1, before any Lambda call.
func TestBadConfigurationExits(t *testing.T) {
	bootstrapPath, _ := built(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrapPath)
	cmd.Env = []string{"SQSWORKER_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/jobs", "SQSWORKER_API_SHOW_DETAILS=yes please", "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "SQSWORKER_API_KINDS is required") || !strings.Contains(lines[1], "SQSWORKER_API_SHOW_DETAILS") {
		t.Errorf("output:\n%s\nwant two lines: the allow-list is required, SHOW_DETAILS is not a boolean", out)
	}
}
