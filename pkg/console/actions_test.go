package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// lastAction returns the last action log line, failing when there is none.
func lastAction(t *testing.T, logs *logBuffer) map[string]any {
	t.Helper()
	lines := logs.lines(t)
	for i := len(lines) - 1; i >= 0; i-- {
		if _, ok := lines[i]["action"]; ok {
			return lines[i]
		}
	}
	t.Fatal("no action log line")
	return nil
}

// countActions counts the action log lines.
func countActions(t *testing.T, logs *logBuffer) int {
	n := 0
	for _, l := range logs.lines(t) {
		if _, ok := l["action"]; ok && l["msg"] != "console redrive finished" {
			n++
		}
	}
	return n
}

func TestActionsChangeTheStack(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c, logs := f.console(nil)
	cl := newClient(t, c)
	cl.signIn()
	ctx := context.Background()
	csrf := cl.csrf("/dlq")
	before := countActions(t, logs)
	act := func(path string, form url.Values) string {
		t.Helper()
		form.Set("csrf", csrf)
		code, loc, body := cl.post(path, form)
		if code != http.StatusSeeOther {
			t.Fatalf("POST %s: %d\n%s", path, code, body)
		}
		return loc
	}

	t.Run("redrive one", func(t *testing.T) {
		f.healed.Store(true)
		defer f.healed.Store(false)
		r := f.ids["resize"]
		loc := act("/job/redrive", url.Values{"id": {r.ID}})
		if !strings.Contains(loc, "done=redriven") {
			t.Errorf("redirect %s", loc)
		}
		f.waitState(r, idempotency.StateSucceeded)
		if l := lastAction(t, logs); l["action"] != "job.redrive" || l["job_id"] != r.ID || l["who"] != "token" || l["level"] != "INFO" {
			t.Errorf("log line %v", l)
		}
	})
	t.Run("cancel scheduled", func(t *testing.T) {
		r := f.ids["scheduled"]
		act("/job/cancel", url.Values{"id": {r.ID}, "kind": {r.Kind}, "key": {r.Key}})
		j, err := f.table.Get(ctx, r.Kind, r.Key)
		if err != nil || j.State != idempotency.StateCancelled {
			t.Fatalf("after cancel: %v %v", j.State, err)
		}
		if _, err := f.sched.GetJob(ctx, r.ID); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("the job's schedule is still there: %v", err)
		}
		// Cancelling again is refused: the job is no longer scheduled.
		form := url.Values{"id": {r.ID}, "kind": {r.Kind}, "key": {r.Key}, "csrf": {csrf}}
		if code, _, _ := cl.post("/job/cancel", form); code != http.StatusConflict {
			t.Errorf("second cancel: %d, want 409", code)
		}
		if l := lastAction(t, logs); l["level"] != "ERROR" || l["job_id"] != r.ID {
			t.Errorf("log line of the refused cancel %v", l)
		}
	})
	t.Run("cancel queued", func(t *testing.T) {
		counts := func() (visible, delayed, inFlight int, err error) {
			out, err := f.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(f.stack.QueueURL),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
					sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err != nil {
				return 0, 0, 0, err
			}
			n := func(k string) int { v, _ := strconv.Atoi(out.Attributes[k]); return v }
			return n("ApproximateNumberOfMessages"), n("ApproximateNumberOfMessagesDelayed"), n("ApproximateNumberOfMessagesNotVisible"), nil
		}
		_, _, inFlight0, err := counts() // the retrying job waits in flight for its next attempt
		if err != nil {
			t.Fatal(err)
		}
		// Queued with an SQS delay: the job is on the queue, not yet delivered.
		r := f.enqueue("queued", invoiceArgs{Invoice: 4004}, producer.WithDelay(6*time.Second))
		if j, err := f.table.Get(ctx, r.Kind, r.Key); err != nil || j.State != idempotency.StateQueued {
			t.Fatalf("before the cancel: %v %v", j.State, err)
		}
		_, page := cl.get("/job?id=" + r.ID)
		if !strings.Contains(page, `id="cancel"`) {
			t.Fatalf("the queued job's page offers no cancel:\n%s", page)
		}
		loc := act("/job/cancel", url.Values{"id": {r.ID}, "kind": {r.Kind}, "key": {r.Key}})
		if !strings.Contains(loc, "done=cancelled") {
			t.Errorf("redirect %s", loc)
		}
		if j, err := f.table.Get(ctx, r.Kind, r.Key); err != nil || j.State != idempotency.StateCancelled {
			t.Fatalf("after the cancel: %v %v", j.State, err)
		}
		// Its delivery is acknowledged without running: the queue empties, the job never runs.
		deadline := time.Now().Add(60 * time.Second)
		for {
			visible, delayed, inFlight, err := counts()
			if err == nil && visible == 0 && delayed == 0 && inFlight <= inFlight0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cancelled job's message was never settled: %d visible, %d delayed, %d in flight (%d before), %v", visible, delayed, inFlight, inFlight0, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if j, err := f.table.Get(ctx, r.Kind, r.Key); err != nil || j.State != idempotency.StateCancelled || j.Runs != 0 {
			t.Errorf("after its delivery: %s, %d runs, %v; want cancelled, never run", j.State, j.Runs, err)
		}
		if l := lastAction(t, logs); l["action"] != "job.cancel" || l["job_id"] != r.ID || l["level"] != "INFO" {
			t.Errorf("log line %v", l)
		}
	})
	t.Run("copy", func(t *testing.T) {
		r := f.ids["refund"]
		f.healed.Store(true)
		defer f.healed.Store(false)
		loc := act("/job/copy", url.Values{"id": {r.ID}})
		u, _ := url.Parse(loc)
		q := u.Query()
		if q.Get("kind") != "payment.refund" || q.Get("id") == "" || q.Get("id") == r.ID {
			t.Fatalf("copy redirect %s", loc)
		}
		f.waitState(jobRef{ID: q.Get("id"), Kind: q.Get("kind"), Key: q.Get("key")}, idempotency.StateSucceeded)
		// The original stays dead, its dead letter in the DLQ.
		if j, _ := f.table.Get(ctx, r.Kind, r.Key); j.State != idempotency.StateDead {
			t.Errorf("the original is %s", j.State)
		}
	})
	t.Run("enqueue", func(t *testing.T) {
		loc := act("/enqueue", url.Values{"kind": {"email.send"}, "args": {`{"to": "lin@example.com"}`}, "key": {"console-key"}})
		if !strings.Contains(loc, "done=enqueued") {
			t.Errorf("redirect %s", loc)
		}
		f.waitState(jobRef{Kind: "email.send", Key: "console-key"}, idempotency.StateSucceeded)
		loc = act("/enqueue", url.Values{"kind": {"invoice.render"}, "args": {`{"invoice":9}`}, "delay": {"48h"}})
		if !strings.Contains(loc, "done=scheduled") {
			t.Errorf("a 48h delay: redirect %s", loc)
		}
		// The CLI's checks, before any AWS call.
		for _, bad := range []struct{ form url.Values }{
			{url.Values{"kind": {"Bad Kind"}, "args": {"{}"}}},
			{url.Values{"kind": {"email.send"}, "args": {"[1,2]"}}},
			{url.Values{"kind": {"email.send"}, "args": {"{"}}},
			{url.Values{"kind": {"email.send"}, "args": {""}}},
			{url.Values{"kind": {"email.send"}, "args": {"{}"}, "delay": {"-1s"}}},
			{url.Values{"kind": {"email.send"}, "args": {"{}"}, "max_attempts": {"0"}}},
		} {
			bad.form.Set("csrf", csrf)
			code, _, body := cl.post("/enqueue", bad.form)
			if code != http.StatusBadRequest || !strings.Contains(body, `class="error"`) {
				t.Errorf("enqueue %v: %d", bad.form, code)
			}
		}
		_, _, body := cl.post("/enqueue", url.Values{"kind": {"email.send"}, "args": {"[1]"}, "csrf": {csrf}})
		if !strings.Contains(body, "args is a JSON array: want a JSON object") {
			t.Errorf("the args error is not the CLI's:\n%s", body)
		}
	})
	t.Run("schedules", func(t *testing.T) {
		loc := act("/schedules/create", url.Values{"name": {"nightly"}, "expression": {"cron(0 2 * * ? *)"}, "timezone": {"Europe/Paris"},
			"kind": {"report.build"}, "args": {`{"name":"daily"}`}})
		if !strings.Contains(loc, "done=created") {
			t.Errorf("redirect %s", loc)
		}
		_, body := cl.get("/schedules")
		if !strings.Contains(body, "nightly") || !strings.Contains(body, "cron(0 2 * * ? *)") || strings.Count(body, `class="run"`) != 5 {
			t.Errorf("the schedule and its five next runs are not listed:\n%s", body)
		}
		act("/schedules/disable", url.Values{"name": {"nightly"}})
		if r, err := f.sched.Get(ctx, "nightly"); err != nil || !r.Disabled || r.Timezone != "Europe/Paris" {
			t.Errorf("after disable: %+v %v", r, err)
		}
		act("/schedules/enable", url.Values{"name": {"nightly"}})
		if r, err := f.sched.Get(ctx, "nightly"); err != nil || r.Disabled {
			t.Errorf("after enable: %+v %v", r, err)
		}
		act("/schedules/delete", url.Values{"name": {"nightly"}})
		if _, err := f.sched.Get(ctx, "nightly"); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("after delete: %v", err)
		}
		code, _, body := cl.post("/schedules/create", url.Values{"name": {"x"}, "expression": {"cron(0 2 * * * *)"}, "kind": {"a.b"}, "csrf": {csrf}})
		if code != http.StatusBadRequest || !strings.Contains(body, "expression") {
			t.Errorf("a bad expression: %d", code)
		}
	})
	t.Run("purge", func(t *testing.T) {
		code, _, _ := cl.post("/dlq/purge", url.Values{"confirm": {"wrong"}, "csrf": {csrf}})
		if code != http.StatusBadRequest {
			t.Errorf("purge with the wrong name: %d", code)
		}
		if msgs, _ := f.dlq.Peek(ctx, 50); len(msgs) == 0 {
			t.Fatal("the DLQ is empty before the purge")
		}
		act("/dlq/purge", url.Values{"confirm": {f.stack.Name + "-jobs-dlq"}})
		deadline := time.Now().Add(30 * time.Second)
		for {
			msgs, err := f.dlq.Peek(ctx, 50)
			if err == nil && len(msgs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the DLQ still holds %d messages", len(msgs))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	// One log line per action: 1 redrive + 3 cancels + 1 copy + 2 enqueues + 7 bad enqueues
	// + 5 schedule actions + 2 purges.
	if got := countActions(t, logs) - before; got != 21 {
		t.Errorf("%d action log lines, want 21", got)
	}
}

func TestRedriveAllWithProgress(t *testing.T) {
	f := newFixture(t, fixtureOptions{healable: true})
	c, logs := f.console(nil)
	cl := newClient(t, c)
	cl.signIn()
	f.healed.Store(true)
	code, loc, body := cl.post("/dlq/redrive-all", url.Values{"csrf": {cl.csrf("/dlq")}})
	if code != http.StatusSeeOther || loc != "/dlq/redrive" {
		t.Fatalf("redrive all: %d %s\n%s", code, loc, body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, js := cl.get("/api/redrive")
		if strings.Contains(js, `"running":false`) {
			if !strings.Contains(js, `"moved":3`) || !strings.Contains(js, `"total":3`) || !strings.Contains(js, `"error":""`) {
				t.Errorf("finished redrive: %s", js)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the redrive did not finish: %s", js)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, what := range []string{"resize", "refund", "resize2"} {
		f.waitState(f.ids[what], idempotency.StateSucceeded)
	}
	_, page := cl.get("/dlq/redrive")
	if !strings.Contains(page, `<progress id="redrive-bar" max="3" value="3">`) {
		t.Errorf("the progress page:\n%s", page)
	}
	var finished bool
	for _, l := range logs.lines(t) {
		if l["msg"] == "console redrive finished" && l["moved"] == float64(3) {
			finished = true
		}
	}
	if !finished {
		t.Error("no log line for the finished redrive")
	}
}

// moveTaskDLQ is the fixture's DLQ on a backend with move tasks (the emulator has none): its
// RedriveAll starts a task, and WaitMoveTask reports it moving 2, then 4 of 4, then COMPLETED.
type moveTaskDLQ struct {
	*dlq.DLQ
	waits chan string // the handles WaitMoveTask was asked to follow
}

func (m *moveTaskDLQ) RedriveAll(context.Context, dlq.RedriveOptions) (dlq.RedriveResult, error) {
	return dlq.RedriveResult{Method: dlq.MethodMoveTask, TaskHandle: "AQEB-task-1", Total: 4}, nil
}

func (m *moveTaskDLQ) WaitMoveTask(_ context.Context, handle string, opts dlq.WaitOptions) (dlq.MoveTask, error) {
	m.waits <- handle
	t := dlq.MoveTask{Handle: handle, Status: dlq.MoveTaskRunning, ToMove: 4}
	for _, moved := range []int{2, 4} {
		t.Moved = moved
		if moved == 4 {
			t.Status = dlq.MoveTaskCompleted
		}
		opts.Progress(t)
	}
	return t, nil
}

// TestRedriveAllFollowsAMoveTask: where SQS runs the redrive as a move task, the console follows
// it with dlq.WaitMoveTask, and the redrive's state shows the task's progress and end.
func TestRedriveAllFollowsAMoveTask(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	md := &moveTaskDLQ{DLQ: f.dlq, waits: make(chan string, 1)}
	c, _ := f.console(func(cfg *console.Config) { cfg.DLQ = md })
	cl := newClient(t, c)
	cl.signIn()
	if code, loc, body := cl.post("/dlq/redrive-all", url.Values{"csrf": {cl.csrf("/dlq")}}); code != http.StatusSeeOther || loc != "/dlq/redrive" {
		t.Fatalf("redrive all: %d %s\n%s", code, loc, body)
	}
	select {
	case h := <-md.waits:
		if h != "AQEB-task-1" {
			t.Errorf("followed the task %q, want AQEB-task-1", h)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the console did not follow the move task")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, js := cl.get("/api/redrive")
		if strings.Contains(js, `"running":false`) {
			for _, want := range []string{`"moved":4`, `"total":4`, `"method":"move-task"`, `"task_handle":"AQEB-task-1"`, `"task_status":"COMPLETED"`, `"error":""`} {
				if !strings.Contains(js, want) {
					t.Errorf("finished redrive %s lacks %s", js, want)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the redrive did not finish: %s", js)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestActionsRefused(t *testing.T) {
	f := sharedHostile(t)
	ctx := context.Background()
	dead := f.ids["resize"]
	stillDead := func(t *testing.T) {
		t.Helper()
		if j, err := f.table.Get(ctx, dead.Kind, dead.Key); err != nil || j.State != idempotency.StateDead {
			t.Fatalf("a refused redrive changed the job: %v %v", j.State, err)
		}
	}
	c, logs := f.console(nil)
	cl := newClient(t, c)
	// Not signed in: no page has an action form, or a CSRF token.
	for _, p := range []string{"/", "/jobs?state=dead", "/job?id=" + dead.ID, "/schedules", "/enqueue"} {
		if _, body := cl.get(p); strings.Contains(body, `method="post" action="/job`) || strings.Contains(body, `name="csrf"`) {
			t.Errorf("%s offers an action or a CSRF token to a viewer who has not signed in", p)
		}
	}
	form := url.Values{"id": {dead.ID}}

	// Without the token.
	if code, _, body := cl.post("/job/redrive", form); code != http.StatusUnauthorized || !strings.Contains(body, "needs the console") {
		t.Errorf("without the token: %d", code)
	}
	if l := lastAction(t, logs); l["why"] != "no token" || l["who"] != "anonymous" || l["level"] != "WARN" {
		t.Errorf("log line %v", l)
	}
	// A wrong token in the sign-in link signs nothing in.
	if code, _, _ := cl.follow("/?token=wrong-token-123456789"); code != 200 {
		t.Errorf("wrong token link: %d", code)
	}
	if code, _, _ := cl.post("/job/redrive", form); code != http.StatusUnauthorized {
		t.Errorf("after a wrong token: %d", code)
	}
	cl.signIn()
	form.Set("csrf", cl.csrf("/enqueue"))
	// A missing or wrong CSRF token.
	if code, _, _ := cl.post("/job/redrive", url.Values{"id": {dead.ID}, "csrf": {"nope"}}); code != http.StatusForbidden {
		t.Errorf("wrong CSRF token: %d", code)
	}
	if code, _, _ := cl.post("/job/redrive", url.Values{"id": {dead.ID}}); code != http.StatusForbidden {
		t.Errorf("no CSRF token: %d", code)
	}
	// A cross-site request, even with the cookie and the form's token.
	if code, _, _ := cl.post("/job/redrive", form, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-site: %d", code)
	}
	// A GET never acts.
	if code, _ := cl.get("/job/redrive?id=" + dead.ID); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("GET an action: %d", code)
	}
	stillDead(t)

	// Read-only: no action form, every action refused, even with the token.
	ro, roLogs := f.console(func(c *console.Config) { c.ReadOnly = true; c.Token = "" })
	rcl := newClient(t, ro)
	for _, p := range []string{"/dlq", "/job?id=" + dead.ID, "/schedules", "/enqueue"} {
		_, body := rcl.get(p)
		if strings.Contains(body, `method="post"`) || !strings.Contains(body, "read-only") {
			t.Errorf("read-only %s shows an action form", p)
		}
	}
	code, _, body := rcl.post("/job/redrive", url.Values{"id": {dead.ID}}, "Authorization", "Bearer "+token)
	if code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("read-only redrive: %d", code)
	}
	if l := lastAction(t, roLogs); l["why"] != "read-only" {
		t.Errorf("read-only log line %v", l)
	}
	stillDead(t)
}

func TestBearerTokenActsWithoutCookie(t *testing.T) {
	f := sharedHostile(t)
	c, logs := f.console(func(c *console.Config) {
		c.Identity = func(r *http.Request) string { return r.Header.Get("X-User") }
	})
	cl := newClient(t, c)
	code, _, _ := cl.post("/schedules/create", url.Values{"name": {"bearer-made"}, "expression": {"rate(1 hour)"}, "kind": {"report.build"}},
		"Authorization", "Bearer "+token, "X-User", "ada@example.com")
	if code != http.StatusSeeOther {
		t.Fatalf("bearer: %d", code)
	}
	if l := lastAction(t, logs); l["who"] != "ada@example.com" || l["schedule"] != "bearer-made" {
		t.Errorf("log line %v", l)
	}
	if err := f.sched.Delete(context.Background(), "bearer-made"); err != nil {
		t.Error(err)
	}
	_ = status.ErrNotFound
}
