package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// The fixture's kinds. Until the fixture is healed, report.build fails (and retries an hour
// later), image.resize fails its only attempt (dead: exhausted) and payment.refund cancels
// itself (dead: cancelled); once healed they all succeed, so that a redrive empties the DLQ.
type (
	emailArgs struct {
		To      string `json:"to"`
		Subject string `json:"subject,omitempty"`
	}
	reportArgs struct {
		Name string `json:"name"`
	}
	resizeArgs struct {
		URL string `json:"url"`
	}
	refundArgs struct {
		Order string `json:"order"`
	}
	invoiceArgs struct {
		Invoice int `json:"invoice"`
	}
)

func (emailArgs) Kind() string   { return "email.send" }
func (reportArgs) Kind() string  { return "report.build" }
func (resizeArgs) Kind() string  { return "image.resize" }
func (refundArgs) Kind() string  { return "payment.refund" }
func (invoiceArgs) Kind() string { return "invoice.render" }

// Hostile strings: job data is attacker-controlled.
const (
	hostileScript = `<script>window.__xss=1</script>`
	hostileImg    = `"'><img src=x onerror="window.__xss=2">`
	hostileUTF8   = "bad\xff\xfeutf8"
	// hostileBidi reverses what follows it (U+202E), isolates (U+2066), marks (U+200F) and
	// drives a terminal (an OSC title, a C1 CSI) when shown raw.
	hostileBidi = "\u202egnp.exe\u2066\u200f\x1b]0;pwned\x07\u009b2J"
)

var hostileLong = strings.Repeat("A-very-long-word-without-spaces-", 400) // 12,800 bytes

// fixture is a stack on the embedded emulator (queue, DLQ, job table, schedule group) with the
// library clients the console takes, a worker (the poller with the handler and the idempotency
// middleware) and jobs in every state.
type fixture struct {
	t        testing.TB
	b        *awslocal.Backend
	stack    *awslocal.Stack
	tbl      string
	sqs      *sqs.Client
	ddb      *dynamodb.Client
	sched    *schedule.Client
	schedAPI *scheduler.Client
	table    *status.Table
	dlq      *dlq.DLQ
	prod     *producer.Producer
	healed   atomic.Bool
	hostile  bool

	// jobs the fixture made, by what they are.
	ids map[string]jobRef

	stopWorker func()
}

type jobRef struct{ ID, Kind, Key string }

type fixtureOptions struct {
	// hostile puts hostile strings in args, keys, errors and attributes.
	hostile bool
	// healable leaves out the dead letters a redrive cannot heal (a body that is no envelope,
	// an unknown kind, a payload mismatch), so that a redrive of a healed fixture empties the
	// DLQ.
	healable bool
}

func newFixture(t testing.TB, o fixtureOptions) *fixture {
	t.Helper()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	f := &fixture{t: t, b: b, sqs: sqs.NewFromConfig(b.Config), ddb: b.DynamoDB(), hostile: o.hostile, ids: map[string]jobRef{}}
	name := awslocal.UniqueName("console")
	var err error
	if f.stack, err = awslocal.Provision(ctx, f.sqs, awslocal.StackOptions{Name: name, MaxReceiveCount: 50}); err != nil {
		t.Fatal(err)
	}
	f.stack.QueueURL, f.stack.DLQURL = b.QueueURL(f.stack.QueueURL), b.QueueURL(f.stack.DLQURL)
	if f.tbl, err = awslocal.ProvisionTable(ctx, f.ddb, name); err != nil {
		t.Fatal(err)
	}
	f.schedAPI = scheduler.NewFromConfig(b.Config)
	group, err := awslocal.ProvisionScheduleGroup(ctx, f.schedAPI, name)
	if err != nil {
		t.Fatal(err)
	}
	if f.sched, err = schedule.NewClient(schedule.Config{Scheduler: f.schedAPI, Group: group, QueueARN: f.stack.QueueARN,
		RoleARN: awslocal.SchedulerRoleARN(name)}); err != nil {
		t.Fatal(err)
	}
	if f.table, err = status.New(status.Config{Client: f.ddb, Table: f.tbl}); err != nil {
		t.Fatal(err)
	}
	if f.dlq, err = dlq.New(dlq.Config{SQS: f.sqs, DLQURL: f.stack.DLQURL, SourceURL: f.stack.QueueURL, Status: f.table, RatePerSecond: 500}); err != nil {
		t.Fatal(err)
	}
	if f.prod, err = producer.New(producer.Config{SQS: f.sqs, QueueURL: f.stack.QueueURL, Status: f.table, Scheduler: f.sched}); err != nil {
		t.Fatal(err)
	}
	f.startWorker()
	t.Cleanup(func() { f.stopWorker() })
	f.makeJobs(o)
	return f
}

// text returns s, or s with hostile strings around it.
func (f *fixture) text(s string) string {
	if !f.hostile {
		return s
	}
	return s + " " + hostileScript + " " + hostileImg + " " + hostileUTF8 + " " + hostileBidi + " " + hostileLong
}

// sqsText returns s without what SQS refuses in a message body or attribute (invalid UTF-8, and
// characters outside #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF): job data
// reaches SQS JSON-encoded, so such characters reach the console through the record and the
// envelope's strings, not raw bodies.
func sqsText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD, r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD && r != utf8.RuneError, r >= 0x10000:
			return r
		}
		return -1
	}, s)
}

// startWorker runs the poller with the worker until stopWorker.
func (f *fixture) startWorker() {
	t := f.t
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: f.ddb, Table: f.tbl})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	idem, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: logger, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hour := jobs.WithPolicy(jobs.PolicyFunc(func(int) time.Duration { return time.Hour }))
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[emailArgs](func(context.Context, *jobs.Job[emailArgs]) error { return nil }))
	jobs.MustRegister(reg, jobs.WorkFunc[invoiceArgs](func(context.Context, *jobs.Job[invoiceArgs]) error { return nil }))
	jobs.MustRegister(reg, jobs.WorkFunc[reportArgs](func(context.Context, *jobs.Job[reportArgs]) error {
		if f.healed.Load() {
			return nil
		}
		return errors.New(f.text("warehouse timeout after 30s"))
	}), jobs.WithMaxAttempts(5), hour)
	jobs.MustRegister(reg, jobs.WorkFunc[resizeArgs](func(_ context.Context, j *jobs.Job[resizeArgs]) error {
		if f.healed.Load() {
			return nil
		}
		return fmt.Errorf("decode %s: %s", j.Args.URL, f.text("corrupt image"))
	}), jobs.WithMaxAttempts(1), hour)
	jobs.MustRegister(reg, jobs.WorkFunc[refundArgs](func(_ context.Context, j *jobs.Job[refundArgs]) error {
		if f.healed.Load() {
			return nil
		}
		return jobs.Cancel(fmt.Errorf("order %s %s", j.Args.Order, f.text("was already refunded")))
	}), hour)
	h, err := worker.New(worker.Config{Registry: reg, SQS: f.sqs, QueueURL: f.stack.QueueURL, DLQURL: f.stack.DLQURL,
		Middleware: []worker.Middleware{idem}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	p, err := poller.New(poller.Config{SQS: f.sqs, QueueURL: f.stack.QueueURL, Handler: h, BatchSize: 10, WaitTime: time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	var once sync.Once
	f.stopWorker = func() { once.Do(func() { cancel(); <-done }) }
}

// enqueue enqueues a job and remembers it as what.
func (f *fixture) enqueue(what string, args jobs.Args, opts ...producer.Option) jobRef {
	f.t.Helper()
	res, err := f.prod.Enqueue(context.Background(), args, opts...)
	if err != nil {
		f.t.Fatalf("enqueue %s: %v", what, err)
	}
	ref := jobRef{ID: res.ID, Kind: res.Kind, Key: res.Key}
	f.ids[what] = ref
	return ref
}

// sendRaw sends a body as another language's producer would, with an attribute.
func (f *fixture) sendRaw(body, attr string) string {
	f.t.Helper()
	// SQS carries valid UTF-8 only, without most control characters: those reach the console
	// through other paths.
	body, attr = sqsText(body), sqsText(attr)
	out, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(f.stack.QueueURL), MessageBody: aws.String(body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"origin": {DataType: aws.String("String"), StringValue: aws.String(attr)},
		},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// makeJobs makes jobs in every state and waits until each has reached it.
func (f *fixture) makeJobs(o fixtureOptions) {
	t := f.t
	key := func(s string) producer.Option {
		if f.hostile {
			s += " " + hostileScript + hostileImg + hostileBidi
		}
		return producer.WithKey(s)
	}
	f.enqueue("resize", resizeArgs{URL: f.text("s3://photos/broken.jpg")}, key("resize-broken"))
	f.enqueue("refund", refundArgs{Order: "order-42"}, key("refund-order-42"))
	f.enqueue("resize2", resizeArgs{URL: "s3://photos/huge.tiff"})
	f.enqueue("succeeded", emailArgs{To: "ada@example.com", Subject: f.text("Welcome")}, key("welcome-ada"))
	f.enqueue("retrying", reportArgs{Name: f.text("monthly-sales")}, key("report-monthly"))
	f.enqueue("scheduled", invoiceArgs{Invoice: 2002}, producer.WithDelay(2*time.Hour))
	c := f.enqueue("cancelled", invoiceArgs{Invoice: 3003}, producer.WithDelay(3*time.Hour))
	if err := f.prod.Cancel(context.Background(), c.Kind, c.Key, c.ID); err != nil {
		t.Fatal(err)
	}
	if !o.healable {
		f.sendRaw(f.text("hello from a shell script"), f.text("cron"))
		unknown := jobs.Envelope{V: 1, ID: "legacy-1", Kind: "invoice.print", Key: "legacy", Args: json.RawMessage(`{"invoice":7}`)}
		if f.hostile {
			unknown.Key += " " + hostileScript + hostileImg + hostileBidi
		}
		b, err := unknown.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		f.sendRaw(string(b), "legacy")
		f.ids["unknown"] = jobRef{ID: "legacy-1", Kind: "invoice.print", Key: unknown.Key}
	}
	want := map[string]idempotency.State{"resize": idempotency.StateDead, "refund": idempotency.StateDead, "resize2": idempotency.StateDead,
		"succeeded": idempotency.StateSucceeded, "retrying": idempotency.StateRetrying, "scheduled": idempotency.StateScheduled,
		"cancelled": idempotency.StateCancelled}
	for what, st := range want {
		f.waitState(f.ids[what], st)
	}
	if !o.healable {
		// A payload mismatch: the succeeded job's key again, with other args.
		f.enqueue("mismatch", emailArgs{To: "eve@example.com"}, key("welcome-ada"))
		f.ids["mismatch"] = jobRef{ID: f.ids["mismatch"].ID, Kind: "email.send", Key: f.ids["succeeded"].Key}
		// Every dead letter in the DLQ: resize, refund, resize2, malformed, unknown, mismatch.
		f.waitDLQ(6)
	} else {
		f.waitDLQ(3)
	}
}

// waitState polls the job's record until it is in state st.
func (f *fixture) waitState(ref jobRef, st idempotency.State) {
	f.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		j, err := f.table.Get(context.Background(), ref.Kind, ref.Key)
		if err == nil && j.State == st {
			return
		}
		last = fmt.Sprintf("%.200s", fmt.Sprint(j.State, " ", err))
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Fatalf("job %s (%s/%.40q) never became %s: last %s", ref.ID, ref.Kind, ref.Key, st, last)
}

// waitDLQ polls the DLQ until it holds n dead letters.
func (f *fixture) waitDLQ(n int) {
	f.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	got := 0
	for time.Now().Before(deadline) {
		msgs, err := f.dlq.Peek(context.Background(), 50)
		if err == nil && len(msgs) == n {
			return
		}
		got = len(msgs)
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("the DLQ holds %d dead letters, want %d", got, n)
}

// token is the fixture consoles' token.
const token = "test-token-0123456789abcdef"

// console returns the console on the fixture's stack; mutate may change the config.
func (f *fixture) console(mutate func(*console.Config)) (*console.Console, *logBuffer) {
	f.t.Helper()
	logs := &logBuffer{}
	cfg := console.Config{
		Title: f.stack.Name, Status: f.table, DLQ: f.dlq, Schedules: f.sched, Producer: f.prod,
		SQS: f.sqs, QueueURL: f.stack.QueueURL, DLQURL: f.stack.DLQURL,
		Stats: &console.TableStats{DynamoDB: f.ddb, Table: f.tbl}, Token: token,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c, logs
}

// logBuffer collects log lines, safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the JSON log lines decoded.
func (l *logBuffer) lines(t testing.TB) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// client drives a console through HTTP as a browser does: cookies, and the CSRF token read from
// each page.
type client struct {
	t    testing.TB
	srv  *httptest.Server
	http *http.Client
}

func newClient(t testing.TB, h http.Handler) *client {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar := &cookieJar{}
	return &client{t: t, srv: srv, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get fetches a path and returns the status and body.
func (c *client) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.srv.URL + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// follow fetches a path, following redirects within the console.
func (c *client) follow(path string) (int, string, string) {
	c.t.Helper()
	for range 5 {
		resp, err := c.http.Get(c.srv.URL + path)
		if err != nil {
			c.t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
			path = loc
			continue
		}
		return resp.StatusCode, string(b), path
	}
	c.t.Fatalf("too many redirects from %s", path)
	return 0, "", ""
}

// post submits a form as a browser does (same origin), and returns the status, the Location
// and the body.
func (c *client) post(path string, form url.Values, headers ...string) (int, string, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// signIn signs the client in with the sign-in form, as an operator who pastes the token.
func (c *client) signIn() {
	c.t.Helper()
	code, loc, body := c.post("/signin", url.Values{"token": {token}, "next": {"/"}})
	if code != http.StatusSeeOther || loc != "/" {
		c.t.Fatalf("sign in: %d %s\n%s", code, loc, body)
	}
	if code, body := c.get("/"); code != http.StatusOK || !strings.Contains(body, `id="mode">signed in`) {
		c.t.Fatalf("after signing in: %d\n%s", code, body)
	}
}

// csrf reads the CSRF token from a page.
func (c *client) csrf(path string) string {
	c.t.Helper()
	_, body := c.get(path)
	const marker = `name="csrf" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		c.t.Fatalf("no CSRF token on %s", path)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// cookieJar is a minimal jar: the test server is one host.
type cookieJar struct {
	mu      sync.Mutex
	cookies map[string]*http.Cookie
}

func (j *cookieJar) SetCookies(_ *url.URL, cookies []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cookies == nil {
		j.cookies = map[string]*http.Cookie{}
	}
	for _, c := range cookies {
		if c.MaxAge < 0 {
			delete(j.cookies, c.Name)
			continue
		}
		j.cookies[c.Name] = c
	}
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*http.Cookie
	for _, c := range j.cookies {
		out = append(out, c)
	}
	return out
}
