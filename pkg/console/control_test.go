package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// controlRig is a job table on the emulator with a console on it, and the store a worker would
// write the jobs' runs with.
type controlRig struct {
	t     *testing.T
	table *status.Table
	store *idempotency.DynamoDBStore
	c     *console.Console
	logs  *logBuffer
}

func newControlRig(t *testing.T) *controlRig {
	t.Helper()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	name, err := awslocal.ProvisionTable(context.Background(), ddb, awslocal.UniqueName("ctl"))
	if err != nil {
		t.Fatal(err)
	}
	r := &controlRig{t: t, logs: &logBuffer{}}
	if r.table, err = status.New(status.Config{Client: ddb, Table: name}); err != nil {
		t.Fatal(err)
	}
	if r.store, err = idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: name}); err != nil {
		t.Fatal(err)
	}
	if r.c, err = console.New(console.Config{Status: r.table, Token: token, Logger: slog.New(slog.NewJSONHandler(r.logs, nil))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.c.Close() })
	return r
}

// run claims key as a worker does (a live lease) and, when progress is not nil, reports it.
func (r *controlRig) run(key string, progress *idempotency.Progress) {
	r.t.Helper()
	now := time.Now()
	res, err := r.store.Claim(context.Background(), idempotency.ClaimRequest{Kind: "report.build", Key: key, JobID: "job-" + key,
		Token: "tok-" + key, Now: now, LeaseUntil: now.Add(10 * time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !res.Claimed {
		r.t.Fatal(res, err)
	}
	if progress != nil {
		if _, err := r.store.Touch(context.Background(), idempotency.Touch{Kind: "report.build", Key: key, JobID: "job-" + key,
			Token: "tok-" + key, Now: now, Progress: progress}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// finish ends key's run in state st.
func (r *controlRig) finish(key string, st idempotency.State) {
	r.t.Helper()
	if err := r.store.Finish(context.Background(), idempotency.Finish{Kind: "report.build", Key: key, JobID: "job-" + key,
		Token: "tok-" + key, State: st, Error: "boom", Now: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		r.t.Fatal(err)
	}
}

// The Job page shows a running job's progress and offers Stop; Stop writes a cancellation
// request (the record stays running under its claim) that the page then shows, every job text
// escaped; a retrying job is cancelled at once; a finished one is refused.
func TestJobControlSection(t *testing.T) {
	r := newControlRig(t)
	h := hostileScript + hostileImg + hostileUTF8 + hostileBidi
	r.run("long", &idempotency.Progress{Fraction: 0.42, Message: "page 42 " + h})
	r.run("flaky", nil)
	r.finish("flaky", idempotency.StateRetrying)
	r.run("done", nil)
	r.finish("done", idempotency.StateSucceeded)

	cl := newClient(t, r.c)
	// Viewers see the progress; the action needs a sign-in.
	code, body := cl.get("/job?kind=report.build&key=long")
	if code != http.StatusOK || !strings.Contains(body, `id="progress-percent">42%`) || !strings.Contains(body, `<progress id="progress" max="100" value="42">`) {
		t.Fatalf("job page: %d\n%s", code, body)
	}
	checkSafe(t, "job page", body)
	if strings.Contains(body, `id="stop"`) {
		t.Error("Stop offered to a viewer who has not signed in")
	}
	// A fraction whose percentage is not exact in binary (0.29 × 100 = 28.999999999999996) shows
	// as the percentage reported.
	r.run("odd", &idempotency.Progress{Fraction: 0.29, Message: "29 of 100"})
	if _, body := cl.get("/job?kind=report.build&key=odd"); !strings.Contains(body, `id="progress-percent">29%`) ||
		!strings.Contains(body, `<progress id="progress" max="100" value="29">`) {
		t.Errorf("job page of a job at 0.29:\n%s", body)
	}
	cl.signIn()
	csrf := cl.csrf("/job?kind=report.build&key=long")
	if _, body := cl.get("/job?kind=report.build&key=long"); !strings.Contains(body, `id="stop" class="danger">Request cancellation`) {
		t.Fatalf("no Stop on a running job:\n%s", body)
	}
	stop := func(key, reason string) (int, string, string) {
		return cl.post("/job/stop", url.Values{"csrf": {csrf}, "kind": {"report.build"}, "key": {key}, "id": {"job-" + key}, "reason": {reason}})
	}
	code, loc, resp := stop("long", "wrong month "+hostileScript+hostileImg+hostileBidi)
	if code != http.StatusSeeOther || !strings.Contains(loc, "done=") {
		t.Fatalf("stop: %d %s\n%s", code, loc, resp)
	}
	j, err := r.table.Get(context.Background(), "report.build", "long")
	if err != nil || j.State != idempotency.StateRunning || j.Token != "tok-long" || j.CancelRequestedAt.IsZero() || !strings.HasPrefix(j.CancelReason, "wrong month ") {
		t.Fatalf("record after stop: %+v, %v; want running under its claim with the request", j, err)
	}
	_, body, _ = cl.follow(loc)
	if !strings.Contains(body, `id="cancel-requested">requested`) || !strings.Contains(body, "(its worker stops it)") || !strings.Contains(body, "Cancellation of job job-long requested") {
		t.Errorf("page after stop:\n%s", body)
	}
	checkSafe(t, "job page after stop", body)
	if strings.Contains(body, `id="stop"`) {
		t.Error("Stop still offered after the request")
	}
	if l := lastAction(t, r.logs); l["action"] != "job.stop" || l["outcome"] != "requested" || l["level"] != "INFO" {
		t.Errorf("log line %v", l)
	}

	// A retrying job is cancelled at once.
	if code, loc, _ := stop("flaky", ""); code != http.StatusSeeOther || !strings.Contains(loc, "done=") {
		t.Fatalf("stop of a retrying job: %d", code)
	}
	if j, _ := r.table.Get(context.Background(), "report.build", "flaky"); j.State != idempotency.StateCancelled {
		t.Errorf("retrying job after stop: %s, want cancelled", j.State)
	}
	// A finished job: refused, nothing written; a too long reason: refused.
	if code, _, _ := stop("done", ""); code != http.StatusConflict {
		t.Errorf("stop of a succeeded job: %d, want 409", code)
	}
	if code, _, _ := stop("long", strings.Repeat("x", 513)); code != http.StatusBadRequest {
		t.Errorf("stop with a 513-byte reason: %d, want 400", code)
	}
	if code, _, _ := stop("long", hostileUTF8); code != http.StatusBadRequest {
		t.Errorf("stop with a reason that is not UTF-8: %d, want 400", code)
	}
	// Without a CSRF token: refused.
	if code, _, _ := cl.post("/job/stop", url.Values{"kind": {"report.build"}, "key": {"long"}}); code != http.StatusForbidden {
		t.Errorf("stop without CSRF: %d, want 403", code)
	}
}

// In Chromium: an operator opens a running job, sees its progress bar, requests its
// cancellation with a reason, and sees the request; nothing of the job's text runs.
func TestBrowserStopsARunningJob(t *testing.T) {
	path := chromium(t)
	r := newControlRig(t)
	r.run("browser", &idempotency.Progress{Fraction: 0.3, Message: "step 3 " + hostileScript + hostileImg + hostileBidi})
	srv := httptest.NewServer(r.c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, r.c))
	b.open(srv.URL + "/job?kind=report.build&key=browser")
	if got := b.text("#progress-percent"); got != "30%" {
		t.Errorf("progress shown as %q", got)
	}
	if v := eval[float64](b, `document.querySelector("#progress").value`); v != 30 {
		t.Errorf("progress bar at %v, want 30", v)
	}
	if msg := b.text("#progress-message"); !strings.Contains(msg, "<script>") || !strings.Contains(msg, `\u202e`) {
		t.Errorf("progress message %q: want the hostile text shown as text, its bidi control escaped", msg)
	}
	b.do("request the cancellation", chromedp.SendKeys(chromedp.CSS(`input[name="reason"]`), "wrong month"),
		chromedp.Click(chromedp.CSS("#stop")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	b.open(eval[string](b, `location.href`))
	if got := b.text("#cancel-requested"); !strings.Contains(got, "requested") || !strings.Contains(got, "wrong month") {
		t.Errorf("cancellation shown as %q", got)
	}
	b.check("job page after the request")
	j, err := r.table.Get(context.Background(), "report.build", "browser")
	if err != nil || j.CancelRequestedAt.IsZero() || j.CancelReason != "wrong month" {
		t.Errorf("record %+v, %v", j, err)
	}
}
