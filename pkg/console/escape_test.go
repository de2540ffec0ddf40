package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

var tags = regexp.MustCompile(`<[^>]*>`)

// pageText returns what a page shows: its HTML without the tags (attribute values, such as a
// form's hidden id, go with them: html/template escapes '>' in them), unescaped.
func pageText(body string) string { return html.UnescapeString(tags.ReplaceAllString(body, " ")) }

// hiddenRune returns the first character of s a page must not show raw: a control character but
// tab and newline (C0, DEL, C1), a bidirectional control, a line or paragraph separator.
func hiddenRune(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return r, true
		}
	}
	return 0, false
}

// checkEscaped fails when a page shows a hidden character raw; wantEscaped says it must show
// hostileBidi's U+202E as the text \u202e (so that the check saw the hostile data).
func checkEscaped(t *testing.T, what, body string, wantEscaped bool) {
	t.Helper()
	text := pageText(body)
	if r, ok := hiddenRune(text); ok {
		i := strings.IndexRune(text, r)
		t.Errorf("%s shows %U raw: %q", what, r, text[max(0, i-40):min(len(text), i+40)])
	}
	if wantEscaped && !strings.Contains(text, `\u202e`) {
		t.Errorf("%s does not show the hostile U+202E as \\u202e", what)
	}
}

// TestEveryPageEscapesHiddenCharacters: bidirectional controls and control characters in job
// ids, keys, errors, bodies and attributes are shown as visible escapes (\u202e, \x1b) on every
// page, in the page's title and in the hover titles too: a U+202E would reverse what follows it
// ("exe.png" shown for "gnp.exe"), a newline would hide in HTML's whitespace.
func TestEveryPageEscapesHiddenCharacters(t *testing.T) {
	f := sharedHostile(t)
	c, _ := f.console(func(c *console.Config) { c.ShowArgs = true })
	cl := newClient(t, c)
	cl.signIn()
	cl.get("/dlq") // a peek: the pages of dead letters without a record read it
	jobURL := func(r jobRef) string { return "/job?" + url.Values{"kind": {r.Kind}, "key": {r.Key}}.Encode() }
	_, dlqBody := cl.get("/dlq")
	m := regexp.MustCompile(`href="(/dlq/message\?id=[^"]+)"`).FindStringSubmatch(dlqBody)
	if m == nil {
		t.Fatalf("no dead letter without a job links to its page:\n%s", dlqBody)
	}
	for _, p := range []struct {
		path    string
		escaped bool
	}{
		{"/", false}, {"/jobs?state=dead", true}, {"/jobs?state=retrying", true}, {"/jobs?state=cancelled", false},
		{jobURL(f.ids["resize"]), true}, {jobURL(f.ids["refund"]), true}, {jobURL(f.ids["retrying"]), true}, {jobURL(f.ids["succeeded"]), true},
		{"/job?id=legacy-1", true}, {"/dlq", true}, {html.UnescapeString(m[1]), true}, {"/schedules", false}, {"/enqueue", false},
	} {
		_, body := cl.get(p.path)
		checkEscaped(t, p.path, body, p.escaped)
	}
	// A record from any store, its every field hostile (the job id too).
	fc, err := console.New(console.Config{Status: fakeStatus{}, Token: token, Title: "x" + hostileBidi})
	if err != nil {
		t.Fatal(err)
	}
	fcl := newClient(t, fc)
	for _, p := range []string{"/jobs?state=dead", "/job?kind=x.y&key=k", "/job?id=x"} {
		_, body := fcl.get(p)
		checkEscaped(t, p, body, true)
	}
}

// TestDeadLetterIDsEscaped: a dead letter whose job id and error hold bidirectional controls is
// listed, shown and redriven: the pages show the id escaped, the forms post it whole.
func TestDeadLetterIDsEscaped(t *testing.T) {
	s := newBareStack(t)
	id := "invoice-\u202efdp.exe\u2066-1"
	env := jobs.Envelope{V: 1, ID: id, Kind: "invoice.render", Key: "k\u200f", Args: json.RawMessage(`{}`)}
	body, err := env.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	failure, _ := json.Marshal(worker.Failure{Reason: jobs.ReasonExhausted, Error: "boom\u202e\x1b[2J\r\nsecond line", Attempts: 3,
		Kind: env.Kind, JobID: id, FailedAt: "2026-11-29T10:00:00.000Z"})
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.stack.DLQURL), MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			worker.FailureAttribute: {DataType: aws.String("String"), StringValue: aws.String(string(failure))},
			"origin":                {DataType: aws.String("String"), StringValue: aws.String("shell\u202e")},
		}}); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, s.console(s.dlq, nil))
	cl.signIn()
	_, page := cl.get("/dlq")
	checkEscaped(t, "/dlq", page, true)
	if !strings.Contains(pageText(page), `invoice-\u202efdp.exe\u2066-1`) {
		t.Errorf("the Dead letters page does not show the id escaped:\n%s", pageText(page))
	}
	_, job := cl.get("/job?" + url.Values{"id": {id}}.Encode())
	checkEscaped(t, "the job page", job, true)
	if !strings.Contains(pageText(job), `boom\u202e\x1b[2J\x0d`) {
		t.Errorf("the job page does not show the error's controls escaped:\n%s", pageText(job))
	}
	code, loc, _ := cl.post("/job/redrive", url.Values{"id": {id}, "csrf": {cl.csrf("/dlq")}})
	if code != 303 {
		t.Fatalf("redrive of the id the form posts: %d", code)
	}
	_, after := cl.get(loc)
	checkEscaped(t, "after the redrive", after, true)
	if !strings.Contains(pageText(after), fmt.Sprintf("Redrove job %s", `invoice-\u202efdp.exe\u2066-1`)) {
		t.Errorf("the notice does not name the job escaped:\n%s", pageText(after))
	}
}
