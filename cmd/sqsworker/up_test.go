package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUpAnswersOnlyThisMachine: the emulator `up` serves (on any port, --port 0 included)
// refuses a request addressed to another host, as a DNS-rebinding page sends it, with 403 and
// the reason, and serves the same request addressed to localhost.
func TestUpAnswersOnlyThisMachine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"up", "--stack", "cli-up-host", "--port", "0"}, &out, &errOut) }()
	waitFor(t, 30*time.Second, "up's serving line", func() bool {
		select {
		case code := <-done:
			t.Fatalf("up exited with %d:\n%s%s", code, out.String(), errOut.String())
		default:
		}
		return strings.Contains(out.String(), "until Ctrl-C")
	})
	m := regexp.MustCompile(`(?m)^endpoint  (\S+) \(embedded\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no endpoint line:\n%s", out.String())
	}
	u, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	listQueues := func(host string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, m[1]+"/", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := listQueues("evil.example"); code != http.StatusForbidden || !strings.Contains(body, "HostNotAllowed") {
		t.Errorf("Host evil.example: %d %s, want 403 HostNotAllowed", code, body)
	}
	if code, body := listQueues("localhost:" + u.Port()); code != http.StatusOK || !strings.Contains(body, "cli-up-host-jobs") {
		t.Errorf("Host localhost: %d %s, want the stack's queues", code, body)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d after cancel: %s", code, errOut.String())
	}
}
