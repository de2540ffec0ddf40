package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// bareStack is a queue and its DLQ on the embedded emulator, with no worker: what the tests put
// in the DLQ stays there.
type bareStack struct {
	t     *testing.T
	sqs   *sqs.Client
	stack *awslocal.Stack
	dlq   *dlq.DLQ
}

func newBareStack(t *testing.T) *bareStack {
	t.Helper()
	b := awslocaltest.Backend(t)
	s := &bareStack{t: t, sqs: sqs.NewFromConfig(b.Config)}
	var err error
	if s.stack, err = awslocal.Provision(context.Background(), s.sqs, awslocal.StackOptions{Name: awslocal.UniqueName("console-bare")}); err != nil {
		t.Fatal(err)
	}
	s.stack.QueueURL, s.stack.DLQURL = b.QueueURL(s.stack.QueueURL), b.QueueURL(s.stack.DLQURL)
	if s.dlq, err = dlq.New(dlq.Config{SQS: s.sqs, DLQURL: s.stack.DLQURL, SourceURL: s.stack.QueueURL}); err != nil {
		t.Fatal(err)
	}
	return s
}

// deadLetter puts a job's envelope straight into the DLQ, as the worker leaves an exhausted job.
func (s *bareStack) deadLetter(id string) {
	s.t.Helper()
	env := jobs.Envelope{V: 1, ID: id, Kind: "email.send", Key: "k-" + strconv.Itoa(len(id)), Args: json.RawMessage(`{"to":"ada@example.com"}`)}
	body, err := env.MarshalJSON()
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.stack.DLQURL), MessageBody: aws.String(string(body))}); err != nil {
		s.t.Fatal(err)
	}
}

// console returns a console on the stack's queues with d as its DLQ.
func (s *bareStack) console(d console.DLQAPI, mutate func(*console.Config)) *console.Console {
	s.t.Helper()
	cfg := console.Config{Title: s.stack.Name, DLQ: d, SQS: s.sqs, QueueURL: s.stack.QueueURL, DLQURL: s.stack.DLQURL,
		Token: token, Logger: slog.New(slog.DiscardHandler)}
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

// receiveCount receives the DLQ's message (there is one), returns its ApproximateReceiveCount
// (this receive included) and makes it visible again.
func (s *bareStack) receiveCount() int {
	s.t.Helper()
	ctx := context.Background()
	out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.stack.DLQURL), MaxNumberOfMessages: 1,
		WaitTimeSeconds: 1, VisibilityTimeout: 30,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil || len(out.Messages) != 1 {
		s.t.Fatalf("receive the dead letter: %v, %d messages", err, len(out.Messages))
	}
	m := out.Messages[0]
	if _, err := s.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(s.stack.DLQURL),
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		s.t.Fatal(err)
	}
	n, err := strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil {
		s.t.Fatalf("ApproximateReceiveCount: %v", err)
	}
	return n
}

// countingDLQ counts the console's reads of the DLQ.
type countingDLQ struct {
	console.DLQAPI
	peeks, shows atomic.Int32
}

func (d *countingDLQ) Peek(ctx context.Context, limit int) ([]dlq.Message, error) {
	d.peeks.Add(1)
	return d.DLQAPI.Peek(ctx, limit)
}

func (d *countingDLQ) Show(ctx context.Context, jobID string) (dlq.Message, error) {
	d.shows.Add(1)
	return d.DLQAPI.Show(ctx, jobID)
}

// getWith fetches a path with extra headers (name, value pairs).
func (c *client) getWith(path string, headers ...string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRedriveLongJobIDFromTheList: the Dead letters page clips a long job id for display, but its
// redrive form posts the whole id, and the redrive moves the dead letter.
func TestRedriveLongJobIDFromTheList(t *testing.T) {
	s := newBareStack(t)
	long := strings.Repeat("j", 60) + "-" + strings.Repeat("0123456789", 4)[:39] // 100 characters
	if len(long) != 100 {
		t.Fatalf("id of %d characters", len(long))
	}
	s.deadLetter(long)
	cl := newClient(t, s.console(s.dlq, nil))
	cl.signIn()
	_, page := cl.get("/dlq")
	const marker = `<input type="hidden" name="id" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("no redrive form on the Dead letters page:\n%s", page)
	}
	value := page[i+len(marker):]
	value = value[:strings.IndexByte(value, '"')]
	if value != long {
		t.Errorf("the redrive form posts id %q (%d characters), want the whole id %q", value, len(value), long)
	}
	if !strings.Contains(page, long[:79]+"…") {
		t.Errorf("the table does not show the id clipped to 80 characters")
	}
	code, loc, body := cl.post("/job/redrive", url.Values{"id": {value}, "csrf": {cl.csrf("/dlq")}})
	if code != http.StatusSeeOther {
		t.Fatalf("redrive with the form's id: %d\n%s", code, body)
	}
	if u, _ := url.Parse(loc); u.Query().Get("id") != long {
		t.Errorf("redirect %s", loc)
	}
	out, err := s.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.stack.QueueURL), WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 || !strings.Contains(aws.ToString(out.Messages[0].Body), long) {
		t.Errorf("the job queue after the redrive: %v %+v", err, out)
	}
}

// TestAnonymousGetsDoNotReceiveDeadLetters: GET requests of someone who has not signed in never
// make the console receive a dead letter (its ApproximateReceiveCount stays), and a job id
// without a record does not scan the DLQ.
func TestAnonymousGetsDoNotReceiveDeadLetters(t *testing.T) {
	s := newBareStack(t)
	s.deadLetter("dead-1")
	counting := &countingDLQ{DLQAPI: s.dlq}
	cl := newClient(t, s.console(counting, nil))
	before := s.receiveCount()
	for i := range 10 {
		code, body := cl.get("/dlq")
		if i == 0 && (code != http.StatusUnauthorized || !strings.Contains(body, "Sign in") || strings.Contains(body, "dead-1")) {
			t.Errorf("anonymous /dlq: %d, want 401 and a sign-in link, not the dead letters", code)
		}
		if code, _ := cl.get("/job?id=x"); i == 0 && code != http.StatusNotFound {
			t.Errorf("anonymous /job?id=x: %d", code)
		}
	}
	if after := s.receiveCount(); after != before+1 {
		t.Errorf("10 anonymous GETs of /dlq and /job?id=x: ApproximateReceiveCount %d → %d, want only this test's own receive (%d)", before, after, before+1)
	}
	if p, sh := counting.peeks.Load(), counting.shows.Load(); p+sh != 0 {
		t.Errorf("anonymous GETs made %d peeks and %d scans of the DLQ", p, sh)
	}
	// Signed in, an unknown id still reads nothing from the DLQ.
	cl.signIn()
	if code, _ := cl.get("/job?id=no-such-job"); code != http.StatusNotFound || counting.peeks.Load()+counting.shows.Load() != 0 {
		t.Errorf("signed in, /job?id=no-such-job: %d after %d peeks and %d scans", code, counting.peeks.Load(), counting.shows.Load())
	}
}

// TestOnePeekServesEveryViewer: concurrent and repeated views of the Dead letters page share one
// peek until PeekCacheFor has passed.
func TestOnePeekServesEveryViewer(t *testing.T) {
	s := newBareStack(t)
	s.deadLetter("dead-1")
	counting := &countingDLQ{DLQAPI: s.dlq}
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	c := s.console(counting, func(cfg *console.Config) {
		cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	cl := newClient(t, c)
	cl.signIn()
	before := s.receiveCount()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if code, body := cl.get("/dlq"); code != http.StatusOK || !strings.Contains(body, "dead-1") {
				t.Errorf("/dlq: %d", code)
			}
		})
	}
	wg.Wait()
	for range 5 {
		cl.get("/dlq") // reloads within PeekCacheFor
	}
	if n := counting.peeks.Load(); n != 1 {
		t.Errorf("8 concurrent views and 5 reloads took %d peeks, want 1", n)
	}
	if after := s.receiveCount(); after != before+2 {
		t.Errorf("ApproximateReceiveCount %d → %d, want one peek and this test's receive (%d)", before, after, before+2)
	}
	now.Add(int64(11 * time.Second)) // past the default 10 s
	cl.get("/dlq")
	if n := counting.peeks.Load(); n != 2 {
		t.Errorf("after PeekCacheFor: %d peeks, want 2", n)
	}
}

// TestCrossSiteDLQPagesRefused: a page of another site (or of another port of the same host)
// cannot make the console peek at the DLQ, even where reading needs no sign-in (read-only).
func TestCrossSiteDLQPagesRefused(t *testing.T) {
	s := newBareStack(t)
	s.deadLetter("dead-1")
	counting := &countingDLQ{DLQAPI: s.dlq}
	ro := s.console(counting, func(cfg *console.Config) { cfg.ReadOnly, cfg.Token = true, "" })
	cl := newClient(t, ro)
	for _, tc := range []struct {
		headers []string
		code    int
	}{
		{[]string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{[]string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{[]string{"Sec-Fetch-Site", "none"}, http.StatusOK},
		{nil, http.StatusOK},
	} {
		if code, _ := cl.getWith("/dlq", tc.headers...); code != tc.code {
			t.Errorf("GET /dlq with %q: %d, want %d", tc.headers, code, tc.code)
		}
	}
	if n := counting.peeks.Load(); n != 1 {
		t.Errorf("%d peeks, want 1 (the same-origin views share it; the cross-site ones take none)", n)
	}
}

// TestJobPageReadsTheDLQForDeadRecordsOnly: on the fixture, the job page of a dead job shows its
// dead letter (from the shared peek), that of a job in any other state reads nothing from the
// DLQ, and a cross-site request for a dead job's page is refused.
func TestJobPageReadsTheDLQForDeadRecordsOnly(t *testing.T) {
	f := sharedHostile(t)
	counting := &countingDLQ{DLQAPI: f.dlq}
	c, _ := f.console(func(cfg *console.Config) { cfg.DLQ = counting })
	cl := newClient(t, c)
	cl.signIn()
	for _, what := range []string{"succeeded", "retrying", "scheduled", "cancelled"} {
		if code, _ := cl.get("/job?id=" + f.ids[what].ID); code != http.StatusOK {
			t.Errorf("%s job: %d", what, code)
		}
	}
	if p, sh := counting.peeks.Load(), counting.shows.Load(); p+sh != 0 {
		t.Errorf("the pages of jobs that are not dead made %d peeks and %d scans", p, sh)
	}
	dead := f.ids["resize"]
	if code, _ := cl.getWith("/job?id="+dead.ID, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("cross-site dead job page: %d, want 403", code)
	}
	if code, body := cl.get("/job?id=" + dead.ID); code != http.StatusOK || !strings.Contains(body, `id="dl-reason">exhausted`) {
		t.Errorf("dead job page: %d, no dead letter", code)
	}
	cl.get("/job?id=" + f.ids["resize2"].ID)
	if p, sh := counting.peeks.Load(), counting.shows.Load(); p != 1 || sh != 0 {
		t.Errorf("two dead jobs' pages: %d peeks and %d scans, want one shared peek", p, sh)
	}
	// Not signed in: the record, and a sign-in link instead of the dead letter and the redrive.
	anon := newClient(t, c)
	if code, body := anon.get("/job?id=" + dead.ID); code != http.StatusOK || !strings.Contains(body, `id="signin-to-see"`) || strings.Contains(body, `id="redrive"`) {
		t.Errorf("anonymous dead job page: %d", code)
	}
	if p := counting.peeks.Load(); p != 1 {
		t.Errorf("an anonymous view peeked: %d peeks", p)
	}
}

// TestEmptyPeekNotReused: a peek that found nothing received nothing, so the next view peeks
// again (a dead letter that arrives meanwhile is shown at once); one that found the DLQ's
// messages all in flight says so instead of calling the DLQ empty.
func TestEmptyPeekNotReused(t *testing.T) {
	s := newBareStack(t)
	counting := &countingDLQ{DLQAPI: s.dlq}
	cl := newClient(t, s.console(counting, nil))
	cl.signIn()
	if _, body := cl.get("/dlq"); !strings.Contains(body, `id="empty"`) {
		t.Errorf("an empty DLQ:\n%s", body)
	}
	s.deadLetter("dead-1")
	// Held by another reader: in flight, invisible to a peek.
	out, err := s.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.stack.DLQURL), VisibilityTimeout: 60, WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("hold the dead letter: %v %+v", err, out)
	}
	if _, body := cl.get("/dlq"); !strings.Contains(body, `id="in-flight"`) || strings.Contains(body, `id="empty"`) {
		t.Errorf("a DLQ whose message is in flight:\n%s", body)
	}
	if _, err := s.sqs.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(s.stack.DLQURL),
		ReceiptHandle: out.Messages[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	if _, body := cl.get("/dlq"); !strings.Contains(body, "dead-1") {
		t.Errorf("the dead letter, visible again, is not shown at once:\n%s", body)
	}
	if n := counting.peeks.Load(); n != 3 {
		t.Errorf("%d peeks, want 3 (the empty ones are not reused)", n)
	}
}
