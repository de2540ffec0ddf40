package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// downConsole is a console whose backend does not answer: every client points at a port nothing
// listens on, as `sqsworker ui --endpoint` once the emulator has stopped.
func downConsole(t *testing.T) *console.Console {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close()
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	sq := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, RetryMaxAttempts: 1})
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: creds, RetryMaxAttempts: 1})
	table, err := status.New(status.Config{Client: ddb, Table: "down-jobs"})
	if err != nil {
		t.Fatal(err)
	}
	queueURL, dlqURL := endpoint+"/000000000000/down-jobs", endpoint+"/000000000000/down-jobs-dlq"
	d, err := dlq.New(dlq.Config{SQS: sq, DLQURL: dlqURL, SourceURL: queueURL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Config{Title: "down", Status: table, DLQ: d, SQS: sq, QueueURL: queueURL, DLQURL: dlqURL,
		Stats: &console.TableStats{DynamoDB: ddb, Table: "down-jobs"}, Token: token, Emulator: true, Refresh: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestBrowserBackendDown: with the backend down, every page says once that it is unreachable and
// what to check, instead of the SDK's errors, an empty "From ;" and "No job ran in this window",
// and the overview keeps saying it once as it refreshes.
func TestBrowserBackendDown(t *testing.T) {
	path := chromium(t)
	c := downConsole(t)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, c))
	check := func(where string) {
		t.Helper()
		text := eval[string](b, `document.querySelector("main").innerText`)
		if n := strings.Count(text, "The backend is unreachable"); n != 1 {
			t.Errorf("%s says the backend is unreachable %d times, want once:\n%s", where, n, text)
		}
		for _, bad := range []string{"operation error", "dial tcp", "connection refused", "StatusCode", "From ;", "From  ", "No job ran in this window"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s shows %q:\n%s", where, bad, text)
			}
		}
		if !strings.Contains(text, "Check that the emulator is running") {
			t.Errorf("%s does not say what to check:\n%s", where, text)
		}
	}
	b.do("overview refreshed", chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(chromedp.CSS(`body[data-refreshed]`)))
	check("the overview")
	first := eval[string](b, `document.body.getAttribute("data-refreshed")`)
	b.do("a second refresh", chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-refreshed") !== `+strconv.Quote(first),
		chromedp.WithPollingTimeout(30*time.Second)))
	check("the refreshed overview")
	for _, p := range []string{"/jobs?state=dead", "/dlq", "/job?id=some-job"} {
		b.open(srv.URL + p)
		check(p)
	}
	b.expectOnly("backend down", "502") // the pages that failed answer 502 Bad Gateway
}

// TestBrowserReadableOverview: the overview and the lists say times, durations and counts as a
// person reads them: relative times with the exact time on hover, "refreshes every 5 s",
// buckets of "5 min", and per kind counts that add up to its jobs (two dead jobs read as two,
// not as "failed 2 … dead-lettered 2"). On the emulator the in-flight counts are labelled.
func TestBrowserReadableOverview(t *testing.T) {
	path := chromium(t)
	f := sharedHostile(t)
	c, _ := f.console(func(c *console.Config) { c.Emulator = true })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	aws, _ := f.console(nil)
	awsSrv := httptest.NewServer(aws)
	t.Cleanup(awsSrv.Close)
	b := newBrowser(t, path)
	b.do("overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(chromedp.CSS(`body[data-refreshed]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rates svg`)))
	meta := b.text("main > p.meta")
	if !strings.Contains(meta, "refreshes every 5 s") || strings.Contains(meta, "ms") {
		t.Errorf("the overview says %q, want \"refreshes every 5 s\"", meta)
	}
	if rates := b.text("#rates-meta"); !strings.Contains(rates, "buckets of 5 min") || !strings.Contains(rates, "Jobs, each counted once") {
		t.Errorf("the charts' legend says %q", rates)
	}
	// Each kind's numbers add up to its jobs: image.resize has two, both dead.
	totals := eval[map[string][]string](b, `(() => { const out = {}; document.querySelectorAll("#rates .kind").forEach(k => {
		out[k.querySelector("h3").textContent] = Array.from(k.querySelectorAll("figcaption")).map(f => f.textContent); }); return out; })()`)
	sum := func(kind string) (int, []string) {
		n := 0
		for _, cap := range totals[kind] {
			if m := regexp.MustCompile(`(\d+) jobs?$`).FindStringSubmatch(cap); m != nil {
				v, _ := strconv.Atoi(m[1])
				n += v
			}
		}
		return n, totals[kind]
	}
	for kind, want := range map[string]int{"image.resize": 2, "report.build": 1, "payment.refund": 1} {
		if got, caps := sum(kind); got != want {
			t.Errorf("%s: the captions %q add up to %d, want its %d jobs", kind, caps, got, want)
		}
	}
	if caps := totals["image.resize"]; !contains(caps, "dead-lettered: 2 jobs") {
		t.Errorf("image.resize: %q, want \"dead-lettered: 2 jobs\"", caps)
	}
	// The emulator's counts are labelled; AWS's are not.
	if note := b.text("#approximate"); !strings.Contains(note, "the emulator does not refresh these two counts") {
		t.Errorf("the emulator's note says %q", note)
	}
	b.open(awsSrv.URL + "/")
	if n := eval[int](b, `document.querySelectorAll("#approximate, #queues sup").length`); n != 0 {
		t.Errorf("on AWS the overview labels the counts (%d marks)", n)
	}
	// Times: relative, the exact time on hover.
	b.open(srv.URL + "/jobs?state=dead")
	cells := eval[[][]string](b, `Array.from(document.querySelectorAll("#jobs td.time")).map(td => {
		const t = td.querySelector("time"); return t ? [td.textContent.trim(), t.getAttribute("title"), t.getAttribute("datetime")] : [td.textContent.trim(), "", ""]; })`)
	iso := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	if len(cells) == 0 {
		t.Fatal("no time in the dead jobs' list")
	}
	for _, cell := range cells {
		if !regexp.MustCompile(`^(just now|\d+ (s|min|h|days) ago|\d+ h \d+ min ago)$`).MatchString(cell[0]) || !iso.MatchString(cell[1]) || cell[1] != cell[2] {
			t.Errorf("a time cell says %q (title %q, datetime %q), want a relative time with the exact one on hover", cell[0], cell[1], cell[2])
		}
	}
	b.check("readable")
}

// TestBrowserDeadLettersLayout: with a long stack name, long job ids and long errors, the Dead
// letters page breaks no button mid-word ("Redriv/e") and shows each id on one line, cut with an
// ellipsis, the whole id on hover, at a wide and a narrow window.
func TestBrowserDeadLettersLayout(t *testing.T) {
	path := chromium(t)
	ctx := context.Background()
	be := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(be.Config)
	name := awslocal.UniqueName("console-a-rather-long-stack-name-for-the-layout")
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	stack.QueueURL, stack.DLQURL = be.QueueURL(stack.QueueURL), be.QueueURL(stack.DLQURL)
	d, err := dlq.New(dlq.Config{SQS: client, DLQURL: stack.DLQURL, SourceURL: stack.QueueURL})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("%s-%s-%d", name, strings.Repeat("0123456789", 4), i)
		ids = append(ids, id)
		env := jobs.Envelope{V: 1, ID: id, Kind: "report.build-monthly-for-every-tenant", Key: id, Args: json.RawMessage(`{}`)}
		body, _ := env.MarshalJSON()
		failure, _ := json.Marshal(worker.Failure{Reason: jobs.ReasonExhausted, Attempts: 5, Kind: env.Kind, JobID: id,
			Error: "render: " + strings.Repeat("template-execution-failed-at-a-very-deep-level/", 6), FailedAt: time.Now().UTC().Format(time.RFC3339Nano)})
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(stack.DLQURL), MessageBody: aws.String(string(body)),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(failure))}}}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := console.New(console.Config{Title: name, DLQ: d, SQS: client, QueueURL: stack.QueueURL, DLQURL: stack.DLQURL, Token: token,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + signInLink(t, c))
	for _, width := range []int64{1280, 900} {
		b.do("resize", chromedp.EmulateViewport(width, 900))
		b.open(srv.URL + "/dlq")
		// Each button's text and each id's text on one line.
		broken := eval[[]string](b, `(() => { const lines = el => { const r = document.createRange(); r.selectNodeContents(el);
			return new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top))).size; };
			const out = [];
			document.querySelectorAll("main button").forEach(b => { if (lines(b) !== 1) out.push("button " + b.textContent); });
			document.querySelectorAll("#dead-letters td.id > a").forEach(a => { if (lines(a) !== 1) out.push("id " + a.textContent); });
			return out; })()`)
		if len(broken) > 0 {
			t.Errorf("at %d px these break over lines: %q", width, broken)
		}
		titles := eval[[]string](b, `Array.from(document.querySelectorAll("#dead-letters td.id > a")).map(a => a.title)`)
		if len(titles) != len(ids) {
			t.Fatalf("at %d px: %d ids with a title, want %d", width, len(titles), len(ids))
		}
		for _, title := range titles {
			if !contains(ids, title) || len(title) != len(ids[0]) {
				t.Errorf("an id's hover shows %q, want the whole id", title)
			}
		}
		if cut := eval[bool](b, `Array.from(document.querySelectorAll("#dead-letters td.id > a")).every(a => a.scrollWidth > a.clientWidth)`); !cut {
			t.Errorf("at %d px the long ids are not cut (with an ellipsis)", width)
		}
		if wide := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`); wide {
			t.Errorf("at %d px the page scrolls sideways", width)
		}
	}
	b.check("layout")
}

// TestBrowserSignInLeavesNoTokenInHistory: signing in with the one-time link `sqsworker ui`
// prints, or with the form, leaves the token in no file of the browser's profile — its History
// database holds the link, whose code is used up — and signing out ends the session.
func TestBrowserSignInLeavesNoTokenInHistory(t *testing.T) {
	path := chromium(t)
	now := clockAt(time.Now())
	c := sessionConsole(t, token, now)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	link := signInLink(t, c)
	b.open(srv.URL + link)
	if mode := b.text("#mode"); mode != "signed in" {
		t.Fatalf("after the one-time link: %q", mode)
	}
	b.open(srv.URL + "/jobs?state=dead")
	b.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	if mode, notice := b.text("#mode"), b.text("#notice"); mode != "view only" || notice != "Signed out." {
		t.Errorf("after signing out: %q, %q", mode, notice)
	}
	// The form, as an operator who pastes the token.
	b.open(srv.URL + "/signin")
	b.do("sign in with the form", chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), token),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)), chromedp.WaitVisible(chromedp.CSS(`#signout`)))
	b.open(srv.URL + "/enqueue")
	b.check("signed in")
	// Close the browser: it writes its History database.
	cctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Cancel(cctx); err != nil {
		t.Fatalf("close Chromium: %v", err)
	}
	var history []byte
	err := filepath.WalkDir(b.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if bytes.Contains(data, []byte(token)) {
			t.Errorf("the token is in the browser's file %s", strings.TrimPrefix(p, b.dir))
		}
		if filepath.Base(p) == "History" {
			history = data
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(history, []byte(link)) {
		t.Fatalf("the browser's History (%d bytes) does not hold the sign-in link: the check read the wrong file", len(history))
	}
	// What the History holds is used up.
	if r := rawRequest(t, http.MethodGet, srv.URL+link, "", nil); r.code != http.StatusUnauthorized {
		t.Errorf("the link from the History signs in again: %d", r.code)
	}
}
