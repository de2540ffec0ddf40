package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

func TestUIServesTheStack(t *testing.T) {
	b := backend(t)
	stack := newStack(t, "ui", false)
	if _, err := awslocal.ProvisionScheduleGroup(context.Background(), scheduler.NewFromConfig(b.Config), stack); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	const tok = "cli-test-token-0123456789"
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--stack", stack, "--endpoint", b.URL, "--addr", "127.0.0.1:0", "--token", tok}, &stdout, &stderr)
	}()
	re := regexp.MustCompile(`console   (http://127\.0\.0\.1:\d+/) `)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("ui exited %d\n%s\n%s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ui printed no address:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A one-time sign-in link, without the token (a browser keeps every URL in its history).
	link := regexp.MustCompile(`sign in   (` + regexp.QuoteMeta(base) + `signin\?code=[0-9a-f]{64}) `).FindStringSubmatch(stdout.String())
	if link == nil || strings.Contains(link[1], tok) {
		t.Fatalf("no one-time sign-in link:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "; --read-only turns actions off") {
		t.Errorf("ui does not name its --read-only flag:\n%s", stdout.String())
	}
	if code, cookie := uiSignIn(t, link[1]); code != http.StatusSeeOther || cookie == nil {
		t.Errorf("the sign-in link: %d, cookie %v", code, cookie)
	}
	if code, cookie := uiSignIn(t, link[1]); code != http.StatusUnauthorized || cookie != nil {
		t.Errorf("the sign-in link a second time: %d, cookie %v; want 401 and no session", code, cookie)
	}
	for _, p := range []string{"", "jobs?state=dead", "schedules", "enqueue"} {
		if code, body := uiGet(t, base+p, ""); code != 200 || !strings.Contains(body, stack) {
			t.Errorf("GET /%s: %d\n%s", p, code, body)
		}
	}
	// The Dead letters page peeks at the DLQ: it needs the token.
	if code, body := uiGet(t, base+"dlq", ""); code != http.StatusUnauthorized || !strings.Contains(body, "Sign in") {
		t.Errorf("GET /dlq without the token: %d", code)
	}
	if code, body := uiGet(t, base+"dlq", tok); code != 200 || !strings.Contains(body, "The DLQ is empty") {
		t.Errorf("GET /dlq with the token: %d\n%s", code, body)
	}
	// An action with the token, as a script would send it.
	if code := uiPost(t, base+"enqueue", tok, url.Values{
		"kind": {"email.send"}, "args": {`{"to":"ada@example.com"}`}, "key": {"from-the-console"}}); code != http.StatusSeeOther {
		t.Fatalf("enqueue: %d", code)
	}
	table, err := status.New(status.Config{Client: b.DynamoDB(), Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := table.Get(context.Background(), "email.send", "from-the-console"); err != nil || j.State != idempotency.StateQueued {
		t.Errorf("the enqueued job: %v %v", j.State, err)
	}
	if !strings.Contains(stderr.String(), `"action":"job.enqueue"`) {
		t.Errorf("no action log line on stderr:\n%s", stderr.String())
	}
	// DNS rebinding: another host name gets nothing.
	req, _ := http.NewRequest(http.MethodGet, base, nil)
	req.Host = "rebind.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %v %v", resp, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("ui exited %d after Ctrl-C\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ui did not stop")
	}
}

// uiGet fetches a console page, with the token as a bearer header when tok is not empty.
func uiGet(t *testing.T, url, tok string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// uiPost posts a console form with the token as a bearer header, without following the
// redirect, and returns the status (303 for an action done).
func uiPost(t *testing.T, target, tok string, form url.Values) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// uiSignIn opens a sign-in link and returns the status and the session cookie it set, if any.
func uiSignIn(t *testing.T, link string) (int, *http.Cookie) {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if strings.HasPrefix(c.Name, "sqsworker_console_") && c.Value != "" {
			return resp.StatusCode, c
		}
	}
	return resp.StatusCode, nil
}

var consoleLine = regexp.MustCompile(`console   (http://127\.0\.0\.1:\d+/) \(stack (\S+) `)

// TestRunUIServesTheConsole: `sqsworker run --ui` serves the console of its stack beside the
// local worker, and stops with it, cleanly.
func TestRunUIServesTheConsole(t *testing.T) {
	bootstrap := buildEchoFn(t)
	stack := awslocal.UniqueName("cli-run-ui")
	const tok = "run-ui-test-token-0123456789"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	running := startRun(t, ctx, 60*time.Second, "--stack", stack, "--bootstrap", bootstrap, "--timeout", "10s",
		"--ui", "--ui-addr", "127.0.0.1:0", "--ui-token", tok)
	var m []string
	waitFor(t, 30*time.Second, "the console's address", func() bool {
		running.alive()
		m = consoleLine.FindStringSubmatch(running.stdout.String())
		return m != nil
	})
	base := m[1]
	if m[2] != stack || !strings.Contains(running.stdout.String(), "sign in   "+base+"signin?code=") || strings.Contains(running.stdout.String(), "?token=") {
		t.Errorf("the console's lines:\n%s", running.stdout.String())
	}
	// run has no --read-only: the console's line names the flag run has (issue 24.12).
	if !strings.Contains(running.stdout.String(), "; --ui-read-only turns actions off") {
		t.Errorf("the console's lines do not name run's --ui-read-only:\n%s", running.stdout.String())
	}
	for _, p := range []string{"", "jobs?state=dead", "schedules", "enqueue"} {
		if code, body := uiGet(t, base+p, ""); code != 200 || !strings.Contains(body, stack) {
			t.Errorf("GET /%s: %d\n%s", p, code, body)
		}
	}
	if code, body := uiGet(t, base+"dlq", tok); code != 200 || !strings.Contains(body, awslocal.DLQName(stack, false)) {
		t.Errorf("GET /dlq: %d\n%s", code, body)
	}
	running.stopCleanly()
	if _, err := http.Get(base); err == nil {
		t.Error("the console still answers after run stopped")
	}
}

// TestDemoUIServesTheConsole: `sqsworker demo --ui` runs the demo, then keeps its stack and
// worker and serves the console on them (the demo's dead letters are on its Dead letters page)
// until Ctrl-C, and exits 0.
func TestDemoUIServesTheConsole(t *testing.T) {
	t.Parallel()
	const tok = "demo-ui-test-token-0123456789"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--ui", "--ui-addr", "127.0.0.1:0", "--ui-token", tok}, &stdout, &stderr)
	}()
	var m []string
	waitFor(t, 3*time.Minute, "the demo's console", func() bool {
		select {
		case code := <-done:
			t.Fatalf("demo exited %d before serving the console:\n%s\n%s", code, stdout.String(), stderr.String())
		default:
		}
		m = consoleLine.FindStringSubmatch(stdout.String())
		return m != nil
	})
	base, stack := m[1], m[2]
	report := regexp.MustCompile(`(?s)DLQ: (\d+) messages.*all \d+ jobs settled in .*keeps running`).FindStringSubmatch(stdout.String())
	if report == nil {
		t.Fatalf("the demo's report is not before the console:\n%s", stdout.String())
	}
	if code, body := uiGet(t, base, ""); code != 200 || !strings.Contains(body, stack) {
		t.Errorf("GET /: %d\n%s", code, body)
	}
	// The console's producer routes the demo's kinds as the demo does: email to critical.
	if code, body := uiGet(t, base+"enqueue?kind="+examplejobs.EmailArgs{}.Kind(), tok); code != 200 || !strings.Contains(body, "goes to queue <strong>critical</strong>") {
		t.Errorf("the Enqueue page of the demo's email kind: %d\n%s", code, body)
	}
	if code, body := uiGet(t, base+"jobs?state=dead", ""); code != 200 || !strings.Contains(body, "image.resize") || !strings.Contains(body, "payment.refund") {
		t.Errorf("the demo's dead jobs: %d\n%s", code, body)
	}
	// The demo's own read of the DLQ hides its messages for a second: peek until they are back.
	var code int
	var body string
	waitFor(t, 30*time.Second, "the demo's "+report[1]+" dead letters on the Dead letters page", func() bool {
		code, body = uiGet(t, base+"dlq", tok)
		return code == 200 && strings.Contains(body, report[1]+" dead letters")
	})
	if !strings.Contains(body, "unknown_kind") || !strings.Contains(body, "exhausted") {
		t.Errorf("the demo's dead letters: %d\n%s", code, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("demo --ui exited %d after Ctrl-C\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo --ui did not stop within 30 s of Ctrl-C")
	}
	if _, err := http.Get(base); err == nil {
		t.Error("the console still answers after demo stopped")
	}
}

func TestUIUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"ui"},
		{"ui", "--stack", "x", "--addr", "nope"},
		{"ui", "--stack", "x", "--token", "short"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want 2\n%s", args, code, errb.String())
		}
	}
}
