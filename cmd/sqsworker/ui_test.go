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
	if !strings.Contains(stdout.String(), "sign in   "+base+"?token="+tok) {
		t.Errorf("no sign-in link:\n%s", stdout.String())
	}
	for _, p := range []string{"", "jobs?state=dead", "dlq", "schedules", "enqueue"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), stack) {
			t.Errorf("GET /%s: %d\n%s", p, resp.StatusCode, body)
		}
	}
	// An action with the token, as a script would send it.
	req, _ := http.NewRequest(http.MethodPost, base+"enqueue", strings.NewReader(url.Values{
		"kind": {"email.send"}, "args": {`{"to":"ada@example.com"}`}, "key": {"from-the-console"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("enqueue: %d", resp.StatusCode)
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
	req, _ = http.NewRequest(http.MethodGet, base, nil)
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
