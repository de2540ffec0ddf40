package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// spyWaiter tells when a wait starts.
type spyWaiter struct {
	*status.Table
	waiting chan struct{}
}

func (w spyWaiter) Wait(ctx context.Context, id string, o status.WaitOptions) (status.Job, error) {
	w.waiting <- struct{}{}
	return w.Table.Wait(ctx, id, o)
}

// getWait sends GET /jobs/{id} with a query string.
func (s *stack) getWait(t *testing.T, ctx context.Context, id, wait string) (events.LambdaFunctionURLResponse, jobResponse) {
	t.Helper()
	req := request("GET", "/jobs/"+id, "", nil)
	if wait != "" {
		req.QueryStringParameters = map[string]string{"wait": wait}
		req.RawQueryString = "wait=" + wait
	}
	resp, err := s.api.Handle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var j jobResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(resp.Body), &j); err != nil {
			t.Fatal(err)
		}
	}
	return resp, j
}

// TestGetWaitsForTheFinalState enqueues through the API, claims the job as a worker does, and
// long-polls GET /jobs/{id}?wait=…: it answers with the final state once the job finishes, with
// the current state (and its progress) when the wait or the function's deadline ends first, and
// refuses a bad wait parameter.
func TestGetWaitsForTheFinalState(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id := accepted(t, s.post(t, "", `{"kind":"metrics.rollup","args":{"day":"2026-12-01"}}`)).ID
	ctx := context.Background()
	now := time.Now()
	hash, err := jobs.PayloadHash("metrics.rollup", []byte(`{"day":"2026-12-01"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.store.Claim(ctx, idempotency.ClaimRequest{Kind: "metrics.rollup", Key: id, JobID: id, Token: "t1", PayloadHash: hash,
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !res.Claimed {
		t.Fatal(res, err)
	}
	if _, err := s.store.Touch(ctx, idempotency.Touch{Kind: "metrics.rollup", Key: id, JobID: id, Token: "t1", Now: now,
		Progress: &idempotency.Progress{Fraction: 0.25, Message: "day 1 of 4"}}); err != nil {
		t.Fatal(err)
	}

	// The function's deadline ends the wait first (a second before it): the current state.
	dctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	resp, j := s.getWait(t, dctx, id, "20s")
	if resp.StatusCode != http.StatusOK || j.State != "running" || j.Progress == nil || j.Progress.Fraction != 0.25 || j.Progress.Message != "" {
		t.Errorf("GET ?wait=20s under a 1.5 s deadline: %d %+v; want 200 running with the fraction (no message without details)", resp.StatusCode, j)
	}
	// The wait ends first: the current state.
	if resp, j := s.getWait(t, ctx, id, "300ms"); resp.StatusCode != http.StatusOK || j.State != "running" {
		t.Errorf("GET ?wait=300ms: %d %+v; want 200 running", resp.StatusCode, j)
	}

	// The job finishes while a GET waits: it answers with the final state.
	waiting := make(chan struct{}, 1)
	s.api.Status = spyWaiter{Table: s.table, waiting: waiting}
	done := make(chan jobResponse, 1)
	go func() {
		_, j := s.getWait(t, ctx, id, "15")
		done <- j
	}()
	<-waiting // the GET is in its wait
	if err := s.store.Finish(ctx, idempotency.Finish{Kind: "metrics.rollup", Key: id, JobID: id, Token: "t1",
		State: idempotency.StateSucceeded, Now: time.Now(), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-done:
		if j.State != "succeeded" || j.Attempts != 1 {
			t.Errorf("GET ?wait=15 while it finished: %+v, want succeeded", j)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting GET never answered")
	}

	for _, bad := range []string{"soon", "-1s", "21s", "100", strings.Repeat("9", 40)} {
		resp, _ := s.getWait(t, ctx, id, bad)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "wait=") {
			t.Errorf("GET ?wait=%s: %d %s, want 400 naming the parameter", bad[:min(len(bad), 8)], resp.StatusCode, resp.Body)
		}
	}
	// An unknown job with a wait: 404 at once.
	if resp, _ := s.getWait(t, ctx, "01NOSUCHJOB", "20s"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET ?wait of an unknown job: %d, want 404", resp.StatusCode)
	}
}
