package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"

	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// queueDLQStack is a stack of three queues (default, critical, bulk) on the embedded emulator,
// each with its DLQ and a *dlq.DLQ on it (counted), and no worker: what a test puts in a DLQ
// stays there.
type queueDLQStack struct {
	t    *testing.T
	sqs  *sqs.Client
	set  *queues.Set
	dlqs map[string]*countingDLQ
}

func newQueueDLQStack(t *testing.T) *queueDLQStack {
	t.Helper()
	b := awslocaltest.Backend(t)
	s := &queueDLQStack{t: t, sqs: sqs.NewFromConfig(b.Config), dlqs: map[string]*countingDLQ{}}
	var err error
	s.set, _, err = awslocal.ProvisionQueues(context.Background(), s.sqs, awslocal.StackOptions{Name: awslocal.UniqueName("console-qdlq")},
		queues.Spec{Name: "critical"}, queues.Spec{Name: "bulk"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range s.set.All() {
		d, err := dlq.New(dlq.Config{SQS: s.sqs, DLQURL: q.DLQURL, SourceURL: q.URL}) // as `sqsworker dlq --queue` builds it
		if err != nil {
			t.Fatal(err)
		}
		s.dlqs[q.Name] = &countingDLQ{DLQAPI: d}
	}
	return s
}

func (s *queueDLQStack) queue(name string) queues.Queue {
	s.t.Helper()
	q, err := s.set.Get(name)
	if err != nil {
		s.t.Fatal(err)
	}
	return q
}

// deadLetter puts a job's envelope into queue's DLQ, as the worker leaves an exhausted job.
func (s *queueDLQStack) deadLetter(queue, id string) {
	s.t.Helper()
	env := jobs.Envelope{V: 1, ID: id, Kind: "import.run", Key: "k-" + id, Args: json.RawMessage(`{"file":"a.csv"}`)}
	body, err := env.MarshalJSON()
	if err != nil {
		s.t.Fatal(err)
	}
	s.send(s.queue(queue).DLQURL, string(body))
}

func (s *queueDLQStack) send(url, body string) {
	s.t.Helper()
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		s.t.Fatal(err)
	}
}

// depth returns a queue's visible + in-flight messages.
func (s *queueDLQStack) depth(url string) int {
	s.t.Helper()
	out, err := s.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
		v, _ := strconv.Atoi(out.Attributes[k])
		n += v
	}
	return n
}

// jobIDsOn receives every message of a queue (for a test that is done with it) and returns
// the job ids of its envelopes.
func (s *queueDLQStack) jobIDsOn(url string) map[string]bool {
	s.t.Helper()
	ids := map[string]bool{}
	out, err := s.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		WaitTimeSeconds: 1, VisibilityTimeout: 60})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, m := range out.Messages {
		if env, err := jobs.ParseEnvelope(aws.ToString(m.Body)); err == nil {
			ids[env.ID] = true
		}
	}
	return ids
}

// console returns a console over the set: DLQ is the default queue's, QueueDLQs the others'.
func (s *queueDLQStack) console(mutate func(*console.Config)) *console.Console {
	s.t.Helper()
	def := s.set.Default()
	cfg := console.Config{Title: "qdlq", SQS: s.sqs, Queues: s.set, QueueURL: def.URL, DLQURL: def.DLQURL, DLQ: s.dlqs[def.Name],
		QueueDLQs: map[string]console.DLQAPI{"critical": s.dlqs["critical"], "bulk": s.dlqs["bulk"]},
		Token:     token, Logger: slog.New(slog.DiscardHandler), PeekCacheFor: 10 * time.Minute}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, what, cond)
}

// TestDeadLettersOfEveryQueue: the Dead letters page lists, redrives (one and all), deletes and
// purges the DLQ of the queue its parameter names, each action on that queue's DLQ only, and an
// action forgets that queue's peek only.
func TestDeadLettersOfEveryQueue(t *testing.T) {
	s := newQueueDLQStack(t)
	s.deadLetter("default", "job-default-1")
	s.deadLetter("bulk", "job-bulk-1")
	s.deadLetter("bulk", "job-bulk-2")
	s.send(s.queue("bulk").DLQURL, "not an envelope")
	c := s.console(nil)
	cl := newClient(t, c)
	cl.signIn()
	bulk, def, crit := s.queue("bulk"), s.set.Default(), s.queue("critical")

	// The default page: the default queue's DLQ, with a selector of the three.
	code, page := cl.get("/dlq")
	if code != 200 || !strings.Contains(page, "job-default-1") || strings.Contains(page, "job-bulk-1") {
		t.Fatalf("/dlq: %d, want the default DLQ's dead letter only\n%s", code, page)
	}
	for _, want := range []string{`id="dlq-queues"`, `href="/dlq?queue=bulk"`, `href="/dlq?queue=critical"`, `data-queue="default" class="active"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/dlq lacks %s", want)
		}
	}
	// The bulk page: bulk's DLQ, its forms naming bulk, its rows linking to bulk's job pages.
	code, page = cl.get("/dlq?queue=bulk")
	if code != 200 || !strings.Contains(page, "job-bulk-1") || !strings.Contains(page, "job-bulk-2") || strings.Contains(page, "job-default-1") {
		t.Fatalf("/dlq?queue=bulk: %d, want bulk's dead letters only\n%s", code, page)
	}
	for _, want := range []string{bulk.SQSName() + "-dlq", `name="queue" value="bulk"`, `/job?id=job-bulk-1&amp;queue=bulk`, `data-queue="bulk" class="active"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/dlq?queue=bulk lacks %s", want)
		}
	}
	if got := [2]int32{s.dlqs["default"].peeks.Load(), s.dlqs["bulk"].peeks.Load()}; got != [2]int32{1, 1} {
		t.Fatalf("peeks of default, bulk = %v, want one each", got)
	}
	// bulk's job page finds the dead letter in bulk's DLQ (the last peek of it), and offers its redrive
	if code, page := cl.get("/job?id=job-bulk-1&queue=bulk"); code != 200 || !strings.Contains(page, `id="redrive"`) || !strings.Contains(page, `name="queue" value="bulk"`) {
		t.Errorf("bulk's job page: %d, want its dead letter with a redrive on bulk\n%s", code, page)
	}

	csrf := cl.csrf("/dlq?queue=bulk")
	act := func(path string, form url.Values) string {
		t.Helper()
		form.Set("csrf", csrf)
		code, loc, body := cl.post(path, form)
		if code != http.StatusSeeOther {
			t.Fatalf("POST %s %v: %d\n%s", path, form, code, body)
		}
		return loc
	}

	t.Run("redrive one", func(t *testing.T) {
		loc := act("/job/redrive", url.Values{"id": {"job-bulk-1"}, "queue": {"bulk"}})
		if !strings.Contains(loc, "queue=bulk") {
			t.Errorf("redirect %s does not keep the queue", loc)
		}
		if got := s.jobIDsOn(bulk.URL); !got["job-bulk-1"] {
			t.Errorf("bulk's queue holds %v after the redrive, want job-bulk-1", got)
		}
		if s.depth(def.URL) != 0 {
			t.Errorf("the default queue got a message from bulk's redrive")
		}
		// bulk's peek is forgotten, the default's kept (PeekCacheFor is 10 minutes).
		if _, page := cl.get("/dlq?queue=bulk"); strings.Contains(page, "job-bulk-1") || !strings.Contains(page, "job-bulk-2") {
			t.Errorf("bulk's page after the redrive:\n%s", page)
		}
		cl.get("/dlq")
		if got := [2]int32{s.dlqs["default"].peeks.Load(), s.dlqs["bulk"].peeks.Load()}; got != [2]int32{1, 2} {
			t.Errorf("peeks of default, bulk = %v, want 1 (kept) and 2 (forgotten by bulk's redrive)", got)
		}
	})
	t.Run("delete one", func(t *testing.T) {
		msgs, err := s.dlqs["bulk"].Peek(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		for _, m := range msgs {
			if m.JobID == "" {
				id = m.MessageID
			}
		}
		if id == "" {
			t.Fatalf("no malformed dead letter in bulk's DLQ: %+v", msgs)
		}
		// Named with the default queue, the delete does not find it: it works on that DLQ.
		form := url.Values{"message_id": {id}, "csrf": {csrf}}
		if code, _, _ := cl.post("/dlq/delete", form); code != http.StatusNotFound {
			t.Errorf("delete of bulk's dead letter on the default DLQ: %d, want 404", code)
		}
		act("/dlq/delete", url.Values{"message_id": {id}, "queue": {"bulk"}})
		waitFor(t, "bulk's DLQ to hold one message", func() bool { return s.depth(bulk.DLQURL) == 1 })
	})
	t.Run("redrive all", func(t *testing.T) {
		s.deadLetter("critical", "job-critical-1")
		loc := act("/dlq/redrive-all", url.Values{"queue": {"critical"}})
		if loc != "/dlq/redrive?queue=critical" {
			t.Errorf("redirect %s", loc)
		}
		var st struct {
			Running bool `json:"running"`
			Moved   int  `json:"moved"`
			Error   string
		}
		waitFor(t, "critical's redrive to finish", func() bool {
			code, body := cl.get("/api/redrive?queue=critical")
			if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
				t.Fatalf("/api/redrive?queue=critical: %d %s", code, body)
			}
			return !st.Running && st.Moved > 0
		})
		if st.Moved != 1 || st.Error != "" {
			t.Errorf("critical's redrive: %+v, want 1 moved", st)
		}
		if got := s.jobIDsOn(crit.URL); !got["job-critical-1"] {
			t.Errorf("critical's queue holds %v, want job-critical-1", got)
		}
		// The other queues' redrives have not run.
		if _, body := cl.get("/api/redrive?queue=bulk"); !strings.Contains(body, `"running":false,"started":""`) {
			t.Errorf("bulk's redrive state %s, want none", body)
		}
		if _, page := cl.get("/dlq/redrive?queue=critical"); !strings.Contains(page, crit.SQSName()+"-dlq → "+crit.SQSName()) {
			t.Errorf("critical's redrive page does not name its queues:\n%s", page)
		}
	})
	t.Run("purge", func(t *testing.T) {
		// The default DLQ's name does not confirm bulk's purge.
		form := url.Values{"queue": {"bulk"}, "confirm": {queues.NameOf(def.DLQURL)}, "csrf": {csrf}}
		if code, _, _ := cl.post("/dlq/purge", form); code != http.StatusBadRequest {
			t.Errorf("purge of bulk confirmed with the default DLQ's name: %d, want 400", code)
		}
		loc := act("/dlq/purge", url.Values{"queue": {"bulk"}, "confirm": {queues.NameOf(bulk.DLQURL)}})
		if !strings.HasPrefix(loc, "/dlq?") || !strings.Contains(loc, "queue=bulk") {
			t.Errorf("redirect %s", loc)
		}
		waitFor(t, "bulk's DLQ to be empty", func() bool { return s.depth(bulk.DLQURL) == 0 })
		if n := s.depth(def.DLQURL); n != 1 {
			t.Errorf("the default DLQ holds %d after bulk's purge, want 1", n)
		}
		// bulk's page says a purge is under way and offers no action; the default's still does.
		if _, page := cl.get("/dlq?queue=bulk"); !strings.Contains(page, `id="purging"`) {
			t.Errorf("bulk's page after its purge lacks the purge note")
		}
		if _, page := cl.get("/dlq"); strings.Contains(page, `id="purging"`) || !strings.Contains(page, `id="purge"`) {
			t.Errorf("the default DLQ's page after bulk's purge:\n%s", page)
		}
	})
}

// TestUnknownQueueRefused: a queue parameter that names no DLQ of the console is a 404 on every
// page and action, and never falls back to the default queue's DLQ: nothing is read, moved or
// purged.
func TestUnknownQueueRefused(t *testing.T) {
	s := newQueueDLQStack(t)
	s.deadLetter("default", "job-default-1")
	c := s.console(nil)
	cl := newClient(t, c)
	cl.signIn()
	def := s.set.Default()
	csrf := cl.csrf("/dlq")
	peeks := s.dlqs["default"].peeks.Load()
	for _, name := range []string{"nope", "DEFAULT", "bulk ", "<b>x</b>", strings.Repeat("q", 300)} {
		for _, p := range []string{"/dlq", "/dlq/message?id=m", "/dlq/redrive", "/job?id=job-default-1"} {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			code, body := cl.get(p + sep + url.Values{"queue": {name}}.Encode())
			if code != http.StatusNotFound || !strings.Contains(body, "no dead-letter queue for a queue named") || strings.Contains(body, "<b>x</b>") {
				t.Errorf("GET %s with queue %.20q: %d, want 404 naming the queue\n%.400s", p, name, code, body)
			}
		}
		if code, _ := cl.get("/api/redrive?" + url.Values{"queue": {name}}.Encode()); code != http.StatusNotFound {
			t.Errorf("/api/redrive with queue %.20q: %d, want 404", name, code)
		}
		for path, form := range map[string]url.Values{
			"/dlq/purge":       {"confirm": {queues.NameOf(def.DLQURL)}},
			"/dlq/redrive-all": {},
			"/job/redrive":     {"id": {"job-default-1"}},
			"/dlq/delete":      {"message_id": {"m-1"}},
		} {
			form.Set("queue", name)
			form.Set("csrf", csrf)
			if code, _, body := cl.post(path, form); code != http.StatusNotFound || !strings.Contains(body, "nothing was done") {
				t.Errorf("POST %s with queue %.20q: %d, want 404\n%.400s", path, name, code, body)
			}
		}
	}
	if got := s.dlqs["default"].peeks.Load(); got != peeks {
		t.Errorf("the refused requests peeked at the default DLQ (%d peeks, want %d)", got, peeks)
	}
	if n := s.depth(def.DLQURL); n != 1 {
		t.Errorf("the default DLQ holds %d after the refused actions, want 1", n)
	}
	if n := s.depth(def.URL); n != 0 {
		t.Errorf("the default queue holds %d after the refused actions, want 0", n)
	}
	// The checks every action has come first: read-only, CSRF.
	form := url.Values{"queue": {"bulk"}, "confirm": {queues.NameOf(s.queue("bulk").DLQURL)}}
	if code, _, _ := cl.post("/dlq/purge", form); code != http.StatusForbidden {
		t.Errorf("purge of bulk without the CSRF token: %d, want 403", code)
	}
	ro := newClient(t, s.console(func(cfg *console.Config) { cfg.ReadOnly, cfg.Token = true, "" }))
	if code, _, _ := ro.post("/dlq/purge", form); code != http.StatusForbidden {
		t.Errorf("purge of bulk on a read-only console: %d, want 403", code)
	}
	if _, page := ro.get("/dlq?queue=bulk"); strings.Contains(page, `id="purge"`) || strings.Contains(page, `id="redrive-all"`) {
		t.Errorf("the read-only console offers actions on bulk's DLQ")
	}
}

// TestOverviewLinksEachDLQ: the overview's DLQ rows link to their queue's Dead letters page.
func TestOverviewLinksEachDLQ(t *testing.T) {
	s := newQueueDLQStack(t)
	c := s.console(nil)
	code, body := newClient(t, c).get("/api/overview")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var doc struct {
		Queues []struct{ Role, Href string } `json:"queues"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"job queue default": "", "dead-letter queue default": "/dlq", "job queue critical": "",
		"dead-letter queue critical": "/dlq?queue=critical", "job queue bulk": "", "dead-letter queue bulk": "/dlq?queue=bulk"}
	if len(doc.Queues) != len(want) {
		t.Fatalf("%d rows: %+v", len(doc.Queues), doc.Queues)
	}
	for _, q := range doc.Queues {
		if h, ok := want[q.Role]; !ok || h != q.Href {
			t.Errorf("row %s links %q, want %q", q.Role, q.Href, h)
		}
	}
	if _, page := newClient(t, c).get("/"); !strings.Contains(page, `<a href="/dlq?queue=bulk" class="dlq-link">`) {
		t.Errorf("the overview page does not link bulk's DLQ")
	}
}

// TestQueueDLQsConfig: QueueDLQs names queues of the set that have a DLQ, other than the
// default's.
func TestQueueDLQsConfig(t *testing.T) {
	s := newQueueDLQStack(t)
	def := s.set.Default()
	noDLQ, err := queues.New(queues.Queue{Name: "default", URL: def.URL, DLQURL: def.DLQURL}, queues.Queue{Name: "bulk", URL: s.queue("bulk").URL})
	if err != nil {
		t.Fatal(err)
	}
	d := s.dlqs["bulk"]
	for name, mutate := range map[string]func(*console.Config){
		"unknown queue":   func(c *console.Config) { c.QueueDLQs = map[string]console.DLQAPI{"nope": d} },
		"no queue set":    func(c *console.Config) { c.Queues = nil },
		"no default DLQ":  func(c *console.Config) { c.DLQ = nil },
		"nil DLQ":         func(c *console.Config) { c.QueueDLQs = map[string]console.DLQAPI{"bulk": nil} },
		"default's again": func(c *console.Config) { c.QueueDLQs = map[string]console.DLQAPI{"default": d} },
		"queue has no DLQ": func(c *console.Config) {
			c.Queues = noDLQ
			c.QueueDLQs = map[string]console.DLQAPI{"bulk": d}
		},
	} {
		def := s.set.Default()
		cfg := console.Config{SQS: s.sqs, Queues: s.set, QueueURL: def.URL, DLQURL: def.DLQURL, DLQ: s.dlqs["default"],
			QueueDLQs: map[string]console.DLQAPI{"bulk": d}, ReadOnly: true}
		mutate(&cfg)
		if _, err := console.New(cfg); !errors.Is(err, console.ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
}

// TestBrowserBulkDeadLetters: in headless Chromium an operator follows the overview's link to the
// bulk queue's dead letters, sees them (and not the default queue's), and redrives one from its
// row: the job is back on bulk's queue, and the page names that queue.
func TestBrowserBulkDeadLetters(t *testing.T) {
	path := chromium(t)
	s := newQueueDLQStack(t)
	s.deadLetter("default", "job-default-1")
	s.deadLetter("bulk", "job-bulk-1")
	s.deadLetter("bulk", "job-bulk-2")
	c := s.console(func(cfg *console.Config) { cfg.Refresh = time.Second })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, c))
	if mode := b.text("#mode"); mode != "signed in" {
		t.Fatalf("after the sign-in link: %q", mode)
	}
	b.do("open bulk's dead letters from the overview",
		chromedp.Click(chromedp.CSS(`a.dlq-link[href="/dlq?queue=bulk"]`)),
		chromedp.WaitVisible(chromedp.CSS("#dead-letters")))
	if cur := b.text(`#dlq-queues a[aria-current="page"]`); cur != "bulk" {
		t.Errorf("the queue selector marks %q, want bulk", cur)
	}
	list := b.text("#dead-letters")
	if !strings.Contains(list, "job-bulk-1") || !strings.Contains(list, "job-bulk-2") || strings.Contains(list, "job-default-1") {
		t.Fatalf("bulk's dead letters: %s", list)
	}
	b.shot("dlq-bulk")
	clicked := eval[bool](b, `(() => { const tr = [...document.querySelectorAll("#dead-letters tbody tr")].find(r => r.textContent.includes("job-bulk-1"));
		const btn = tr && [...tr.querySelectorAll("button")].find(x => x.textContent === "Redrive"); if (!btn) { return false; } btn.click(); return true; })()`)
	if !clicked {
		t.Fatal("job-bulk-1's row has no Redrive button")
	}
	b.do("the redrive's notice", chromedp.WaitVisible(chromedp.CSS("#notice")))
	if n := b.text("#notice"); !strings.Contains(n, "Redrove job job-bulk-1") || !strings.Contains(n, s.queue("bulk").SQSName()) {
		t.Errorf("the notice after the redrive says %q", n)
	}
	// The job's page it lands on answers 404: this console has no job table, and the dead letter
	// is gone from bulk's DLQ.
	b.expectOnly("the job page after the redrive", "404")
	if got := s.jobIDsOn(s.queue("bulk").URL); !got["job-bulk-1"] {
		t.Errorf("bulk's queue holds %v after the redrive, want job-bulk-1", got)
	}
	if n := s.depth(s.set.Default().DLQURL); n != 1 {
		t.Errorf("the default DLQ holds %d, want its 1 dead letter untouched", n)
	}
	b.open(srv.URL + "/dlq?queue=bulk")
	if list := b.text("#dead-letters"); strings.Contains(list, "job-bulk-1") || !strings.Contains(list, "job-bulk-2") {
		t.Errorf("bulk's dead letters after the redrive: %s", list)
	}
	b.check("bulk dead letters")
}

// TestEnqueueGoesToTheKindsQueue: a job enqueued from the console goes to its kind's queue (the
// producer's routes), or to the queue the form names; the page says where a kind goes, and a
// queue the stack lacks is refused without sending anything.
func TestEnqueueGoesToTheKindsQueue(t *testing.T) {
	s := newQueueDLQStack(t)
	prod, err := producer.New(producer.Config{SQS: s.sqs, Queues: s.set, Routes: queues.Routes{"import.run": "bulk"}})
	if err != nil {
		t.Fatal(err)
	}
	c := s.console(func(cfg *console.Config) { cfg.Producer = prod })
	cl := newClient(t, c)
	cl.signIn()
	if _, page := cl.get("/enqueue?kind=import.run"); !strings.Contains(page, "Kind import.run goes to queue <strong>bulk</strong>") ||
		!strings.Contains(page, `<option value="critical">critical</option>`) {
		t.Errorf("the Enqueue page does not say where import.run goes:\n%s", page)
	}
	csrf := cl.csrf("/enqueue")
	enqueue := func(kind, key, queue string) (int, string) {
		t.Helper()
		code, loc, body := cl.post("/enqueue", url.Values{"kind": {kind}, "args": {`{}`}, "key": {key}, "queue": {queue}, "csrf": {csrf}})
		if code == http.StatusSeeOther {
			_, body = cl.get(loc)
		}
		return code, body
	}
	if code, page := enqueue("import.run", "routed", ""); code != http.StatusSeeOther || !strings.Contains(page, "on queue bulk") {
		t.Errorf("enqueue of import.run: %d\n%s", code, page)
	}
	if code, _ := enqueue("report.build", "unrouted", ""); code != http.StatusSeeOther {
		t.Errorf("enqueue of report.build: %d", code)
	}
	if code, _ := enqueue("report.build", "picked", "critical"); code != http.StatusSeeOther {
		t.Errorf("enqueue of report.build on critical: %d", code)
	}
	if code, page := enqueue("report.build", "nowhere", "nope"); code != http.StatusBadRequest || !strings.Contains(page, "the stack has no such queue") {
		t.Errorf("enqueue on a queue the stack lacks: %d\n%s", code, page)
	}
	want := map[string]string{"routed": "bulk", "unrouted": "default", "picked": "critical"}
	for _, q := range s.set.All() {
		got := map[string]bool{}
		out, err := s.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if env, err := jobs.ParseEnvelope(aws.ToString(m.Body)); err == nil {
				got[env.Key] = true
			}
		}
		for key, wq := range want {
			if got[key] != (wq == q.Name) {
				t.Errorf("queue %s holds %v: job %s belongs on %s", q.Name, got, key, wq)
			}
		}
		if got["nowhere"] {
			t.Errorf("the refused job reached queue %s", q.Name)
		}
	}
}
