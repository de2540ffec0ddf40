package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/chromedp"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/flow/esm"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// flowStack is a queue and a job table on the emulator, with limit items as workers leave them
// (a key and a holder's pause note hostile), and a console with flow control on them.
type flowStack struct {
	tbl   *flow.Table
	queue string
	c     *console.Console
	logs  *logBuffer
}

func newFlowStack(t *testing.T, readOnly bool) *flowStack {
	t.Helper()
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	sq := sqs.NewFromConfig(b.Config)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	name := awslocal.UniqueName("cflow")
	stack, err := awslocal.Provision(ctx, sq, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, r := range []flow.SlotRequest{
		{Name: "webhook.deliver", Key: "tenant-a", Limit: 2, JobID: "01JDQ3ZV5XG8K2M4N6P8R0T2V5", LeaseUntil: now.Add(time.Minute), Now: now},
		{Name: "webhook.deliver", Key: hostileScript + "\u202e", Limit: 2, JobID: "01JDQ3ZV5XG8K2M4N6P8R0T2V6", LeaseUntil: now.Add(-time.Second), Now: now.Add(-time.Minute)},
	} {
		if res, err := tbl.AcquireSlot(ctx, r); err != nil || !res.Acquired {
			t.Fatalf("acquire: %+v, %v", res, err)
		}
	}
	if err := tbl.PauseKind(ctx, flow.Pause{Kind: "report.build", By: "ops", Note: hostileImg + " \u202etxt.exe"}); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	c, err := console.New(console.Config{Title: name, SQS: sq, QueueURL: b.QueueURL(stack.QueueURL), DLQURL: b.QueueURL(stack.DLQURL),
		Flow: &flow.Control{Table: tbl, Sources: &esm.Switch{Lambda: lambda.NewFromConfig(b.Config)}}, ReadOnly: readOnly,
		Token: token, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &flowStack{tbl: tbl, queue: awslocal.QueueName(name, false), c: c, logs: logs}
}

// TestFlowPageActions: the Flow page lists the paused kinds and the limits with their holders
// (hostile keys and notes escaped, bidi overrides shown as escapes); pausing and resuming a kind
// and the queue needs the token and the form's CSRF token, and each action is logged.
func TestFlowPageActions(t *testing.T) {
	t.Parallel()
	fs := newFlowStack(t, false)
	cl := newClient(t, fs.c)
	code, body := cl.get("/flow")
	if code != http.StatusOK {
		t.Fatalf("GET /flow: %d\n%s", code, body)
	}
	for _, want := range []string{"report.build", "tenant-a", "1 of 2", "01JDQ3ZV5XG8K2M4N6P8R0T2V5", "holder died", `\u202e`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>window", "<img src=x", "\u202e"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page carries %q unescaped", bad)
		}
	}
	// Refused: no token; then a wrong CSRF token.
	if code, _, _ := cl.post("/flow/pause-kind", url.Values{"kind": {"email.send"}}); code != http.StatusUnauthorized {
		t.Errorf("pause without the token: %d, want 401", code)
	}
	cl.signIn()
	if code, _, _ := cl.post("/flow/pause-kind", url.Values{"kind": {"email.send"}, "csrf": {"nope"}}); code != http.StatusForbidden {
		t.Errorf("pause with a wrong CSRF token: %d, want 403", code)
	}
	csrf := cl.csrf("/flow")
	if code, loc, body := cl.post("/flow/pause-kind", url.Values{"kind": {"email.send"}, "note": {"outage"}, "csrf": {csrf}}); code != http.StatusSeeOther || !strings.Contains(loc, "kind-paused") {
		t.Fatalf("pause: %d %s\n%s", code, loc, body)
	}
	if code, _, body := cl.post("/flow/pause-kind", url.Values{"kind": {"Bad Kind"}, "csrf": {csrf}}); code != http.StatusBadRequest || !strings.Contains(body, "not allowed") {
		t.Errorf("pause of a bad kind: %d\n%s", code, body)
	}
	if code, loc, _ := cl.post("/flow/pause-queue", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther || !strings.Contains(loc, "queue-paused") {
		t.Fatalf("pause queue: %d %s", code, loc)
	}
	p, err := fs.tbl.Pauses(context.Background())
	if err != nil || !p.KindPaused("email.send") || !p.QueuePaused(fs.queue) {
		t.Fatalf("after the actions: %+v, %v", p, err)
	}
	for _, k := range p.Kinds {
		if k.Kind == "email.send" && (k.Note != "outage" || !strings.HasPrefix(k.By, "console: ")) {
			t.Errorf("pause record %+v", k)
		}
	}
	_, page := cl.get("/flow")
	if !strings.Contains(page, `id="resume-queue"`) || !strings.Contains(page, "email.send") {
		t.Errorf("the page does not show the paused queue and kind")
	}
	for _, a := range []struct{ path, done string }{{"/flow/resume-kind", "kind-resumed"}, {"/flow/resume-queue", "queue-resumed"}} {
		if code, loc, _ := cl.post(a.path, url.Values{"kind": {"email.send"}, "csrf": {csrf}}); code != http.StatusSeeOther || !strings.Contains(loc, a.done) {
			t.Errorf("%s: %d %s", a.path, code, loc)
		}
	}
	if p, _ := fs.tbl.Pauses(context.Background()); p.KindPaused("email.send") || p.QueuePaused(fs.queue) {
		t.Errorf("after resume: %+v", p)
	}
	logged := map[string]int{}
	for _, l := range fs.logs.lines(t) {
		if a, ok := l["action"].(string); ok && strings.HasPrefix(a, "flow.") {
			logged[a]++
		}
	}
	if logged["flow.pause_kind"] != 4 || logged["flow.pause_queue"] != 1 || logged["flow.resume_kind"] != 1 || logged["flow.resume_queue"] != 1 {
		t.Errorf("action log lines %v", logged)
	}
}

// TestFlowPageReadOnly: a read-only console shows the page without actions and refuses them.
func TestFlowPageReadOnly(t *testing.T) {
	t.Parallel()
	fs := newFlowStack(t, true)
	cl := newClient(t, fs.c)
	code, body := cl.get("/flow")
	if code != http.StatusOK || strings.Contains(body, "pause-kind-form") || !strings.Contains(body, "report.build") {
		t.Fatalf("read-only /flow: %d", code)
	}
	if code, _, _ := cl.post("/flow/resume-kind", url.Values{"kind": {"report.build"}}); code != http.StatusForbidden {
		t.Errorf("resume on a read-only console: %d, want 403", code)
	}
}

// TestBrowserFlowPage drives the Flow page in headless Chromium: nothing of the hostile data runs
// or breaks the page's policy, a kind is paused from the form and resumed from its row.
func TestBrowserFlowPage(t *testing.T) {
	path := chromium(t)
	fs := newFlowStack(t, false)
	srv := httptest.NewServer(fs.c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, fs.c))
	b.open(srv.URL + "/flow")
	b.check("/flow")
	if limits := b.text("#limits tbody"); !strings.Contains(limits, "tenant-a") || !strings.Contains(limits, `<script>window.__xss=1</script>\u202e`) {
		t.Errorf("the limits as shown: %q", limits)
	}
	b.do("pause a kind",
		chromedp.SendKeys(chromedp.CSS(`#pause-kind-form input[name="kind"]`), "email.send"),
		chromedp.SendKeys(chromedp.CSS(`#pause-kind-form input[name="note"]`), "from the browser"),
		chromedp.Click(chromedp.CSS("#pause-kind")),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(@class, "notice") and contains(., "Paused kind")]`)),
	)
	if rows := b.text("#paused-kinds tbody"); !strings.Contains(rows, "email.send") || !strings.Contains(rows, "from the browser") {
		t.Errorf("paused kinds after the form: %q", rows)
	}
	b.check("after pause")
	b.do("resume it",
		chromedp.Click(chromedp.CSS(`#paused-kinds form:has(input[value="email.send"]) button`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(@class, "notice") and contains(., "Resumed kind")]`)),
	)
	if notice := b.text(".notice"); !strings.Contains(notice, "Resumed kind email.send") {
		t.Errorf("notice %q", notice)
	}
	if p, _ := fs.tbl.Pauses(context.Background()); p.KindPaused("email.send") || !p.KindPaused("report.build") {
		t.Errorf("pauses after the browser: %+v", p)
	}
	b.check("after resume")
	if text := eval[string](b, `document.body.textContent`); strings.Contains(text, "\u202e") {
		t.Error("a bidi override reached the page's text")
	}
}

// newFlowQueuesStack is a stack of three queues (default, critical, bulk) and its job table, with
// a queue paused outside the stack, and a console with flow control over the stack's queue set.
func newFlowQueuesStack(t *testing.T) (*console.Console, *flow.Table, *queues.Set) {
	t.Helper()
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	sq := sqs.NewFromConfig(b.Config)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	name := awslocal.UniqueName("cflowq")
	set, _, err := awslocal.ProvisionQueues(ctx, sq, awslocal.StackOptions{Name: name}, queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, ddb, name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.PauseQueue(ctx, flow.Pause{Queue: "elsewhere-jobs", By: "ops", Note: hostileImg}); err != nil {
		t.Fatal(err)
	}
	def := set.Default()
	c, err := console.New(console.Config{Title: name, SQS: sq, Queues: set, QueueURL: def.URL, DLQURL: def.DLQURL,
		Flow: &flow.Control{Table: tbl, Sources: &esm.Switch{Lambda: lambda.NewFromConfig(b.Config)}}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, tbl, set
}

// pausedQueues returns the SQS names of the queues the table records as paused.
func pausedQueues(t *testing.T, tbl *flow.Table) []string {
	t.Helper()
	p, err := tbl.Pauses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, q := range p.Queues {
		out = append(out, q.Queue)
	}
	return out
}

// TestFlowPageQueuesOfAStack: with the stack's queue set, the Flow page has a row per queue, and
// each queue is paused and resumed on its own, by its name in the stack (the record under its
// SQS name, which that queue's pollers read; the other queues untouched); a queue the console does
// not have is refused; a queue paused outside the stack is shown, escaped.
func TestFlowPageQueuesOfAStack(t *testing.T) {
	t.Parallel()
	c, tbl, set := newFlowQueuesStack(t)
	bulk, _ := set.Get("bulk")
	cl := newClient(t, c)
	cl.signIn()
	code, body := cl.get("/flow")
	if code != http.StatusOK {
		t.Fatalf("GET /flow: %d\n%s", code, body)
	}
	for _, want := range []string{`id="flow-queues"`, bulk.SQSName(), set.Default().SQSName(), `name="queue" value="critical"`, "elsewhere-jobs"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<img src=x") {
		t.Error("the other queue's note is not escaped")
	}
	csrf := cl.csrf("/flow")
	if code, loc, body := cl.post("/flow/pause-queue", url.Values{"queue": {"bulk"}, "note": {"import stuck"}, "csrf": {csrf}}); code != http.StatusSeeOther || !strings.Contains(loc, "queue-paused") {
		t.Fatalf("pause bulk: %d %s\n%s", code, loc, body)
	}
	if got := strings.Join(pausedQueues(t, tbl), ","); got != "elsewhere-jobs,"+bulk.SQSName() && got != bulk.SQSName()+",elsewhere-jobs" {
		t.Errorf("paused after pausing bulk: %s, want bulk's SQS name and elsewhere-jobs", got)
	}
	if _, page := cl.get("/flow"); !strings.Contains(page, `action="/flow/resume-queue"`) || !strings.Contains(page, "import stuck") {
		t.Error("the page does not offer bulk's resume")
	}
	if code, _, body := cl.post("/flow/pause-queue", url.Values{"queue": {"urgent"}, "csrf": {csrf}}); code != http.StatusBadRequest || !strings.Contains(body, "no queue named urgent") {
		t.Errorf("pause of a queue the console lacks: %d\n%s", code, body)
	}
	if code, loc, _ := cl.post("/flow/resume-queue", url.Values{"queue": {"bulk"}, "csrf": {csrf}}); code != http.StatusSeeOther || !strings.Contains(loc, "queue-resumed") {
		t.Fatalf("resume bulk: %d %s", code, loc)
	}
	if got := strings.Join(pausedQueues(t, tbl), ","); got != "elsewhere-jobs" {
		t.Errorf("paused after resuming bulk: %s", got)
	}
}

// TestBrowserFlowPageQueuesOfAStack drives the queue rows in headless Chromium: bulk is paused
// from its row (the other queues stay receiving) and resumed from it.
func TestBrowserFlowPageQueuesOfAStack(t *testing.T) {
	path := chromium(t)
	c, tbl, set := newFlowQueuesStack(t)
	bulk, _ := set.Get("bulk")
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, c))
	b.open(srv.URL + "/flow")
	b.check("/flow")
	if n := eval[int](b, `document.querySelectorAll('#flow-queues tbody tr').length`); n != 3 {
		t.Errorf("%d queue rows, want 3", n)
	}
	b.do("pause bulk",
		chromedp.SendKeys(chromedp.CSS(`#flow-queues form:has(input[value="bulk"]) input[name="note"]`), "from the browser"),
		chromedp.Click(chromedp.CSS(`#flow-queues form:has(input[value="bulk"]) button`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(@class, "notice") and contains(., "Paused queue")]`)),
	)
	rows := b.text("#flow-queues tbody")
	if strings.Count(rows, "paused") != 1 || strings.Count(rows, "receiving") != 2 || !strings.Contains(rows, "from the browser") {
		t.Errorf("the queue rows after pausing bulk: %q", rows)
	}
	if got := pausedQueues(t, tbl); len(got) != 2 || !slices.Contains(got, bulk.SQSName()) {
		t.Errorf("paused: %v", got)
	}
	b.check("after pause")
	b.do("resume bulk",
		chromedp.Click(chromedp.CSS(`#flow-queues form:has(input[value="bulk"]) button`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(@class, "notice") and contains(., "Resumed queue")]`)),
	)
	if got := pausedQueues(t, tbl); slices.Contains(got, bulk.SQSName()) {
		t.Errorf("bulk still paused: %v", got)
	}
}
