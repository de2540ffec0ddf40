package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// recordStatus is a job table of the records it holds, by job id.
type recordStatus struct {
	console.StatusAPI
	jobs map[string]status.Job
}

func (s recordStatus) GetByID(_ context.Context, id string) (status.Job, error) {
	if j, ok := s.jobs[id]; ok {
		return j, nil
	}
	return status.Job{}, status.ErrNotFound
}

func (s recordStatus) Get(_ context.Context, kind, key string) (status.Job, error) {
	for _, j := range s.jobs {
		if j.Kind == kind && j.Key == key {
			return j, nil
		}
	}
	return status.Job{}, status.ErrNotFound
}

func deadRecord(id string, updated time.Time) status.Job {
	var j status.Job
	j.JobID, j.Kind, j.Key, j.State, j.Reason, j.UpdatedAt = id, "email.send", "k-"+id, idempotency.StateDead, "exhausted", updated
	return j
}

// TestPeeksCappedWhateverARecordSays: a dead record whose time is ahead of the console's clock
// (a writer's clock ahead) does not make every view of its page peek at the DLQ: on a read-only
// console, where anyone may read, ten anonymous views of it take one peek, one receive of each
// dead letter.
func TestPeeksCappedWhateverARecordSays(t *testing.T) {
	s := newBareStack(t)
	s.deadLetter("other-1") // its dead letter is not in the DLQ; another one is
	counting := &countingDLQ{DLQAPI: s.dlq}
	st := recordStatus{jobs: map[string]status.Job{"dead-1": deadRecord("dead-1", time.Now().Add(time.Hour))}}
	c := s.console(counting, func(cfg *console.Config) { cfg.ReadOnly, cfg.Token, cfg.Status = true, "", st })
	cl := newClient(t, c)
	before := s.receiveCount()
	for i := range 10 {
		code, body := cl.get("/job?id=dead-1")
		if code != http.StatusOK {
			t.Fatalf("view %d: %d\n%s", i, code, body)
		}
		if i == 9 && !strings.Contains(body, "The console peeks at most once every 10 s") {
			t.Errorf("the page does not say why it shows no dead letter:\n%s", body)
		}
	}
	if n := counting.peeks.Load() + counting.shows.Load(); n != 1 {
		t.Errorf("10 views of a dead job whose record is an hour ahead took %d reads of the DLQ, want 1", n)
	}
	if after := s.receiveCount(); after != before+2 {
		t.Errorf("ApproximateReceiveCount %d → %d, want one peek and this test's receive (%d)", before, after, before+2)
	}
}

// forms returns the action of every POST form of a page, and the hidden id each posts.
func forms(body string) []string {
	var out []string
	re := regexp.MustCompile(`(?s)<form method="post" action="([^"]+)"(.*?)</form>`)
	idRe := regexp.MustCompile(`name="(?:id|message_id)" value="([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		f := m[1]
		if id := idRe.FindStringSubmatch(m[2]); id != nil {
			f += " " + html.UnescapeString(id[1])
		}
		if f != "/signout" {
			out = append(out, f)
		}
	}
	return out
}

// TestActionsOfferedOnlyWhereTheyWork: no page offers an action that would end in a 404: no
// Redrive where the dead letter is not in the DLQ, none for what a redrive or a purge removed
// (they drop the shared peek), none while a purge may still be deleting (SQS takes up to 60 s),
// and a dead letter that is no job gets a Delete instead.
func TestActionsOfferedOnlyWhereTheyWork(t *testing.T) {
	s := newBareStack(t)
	for _, id := range []string{"dead-a", "dead-b", "dead-c"} {
		s.deadLetter(id)
	}
	if _, err := s.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(s.stack.DLQURL),
		MessageBody: aws.String("hello from a shell script <img src=x onerror=alert(1)> \u202e")}); err != nil {
		t.Fatal(err)
	}
	now := clockAt(time.Now())
	slow := &slowPurgeDLQ{DLQAPI: s.dlq}
	st := recordStatus{jobs: map[string]status.Job{"gone-1": deadRecord("gone-1", time.Now().Add(-time.Hour))}}
	c := s.console(slow, func(cfg *console.Config) {
		cfg.Status, cfg.Now = st, func() time.Time { return time.Unix(0, now.Load()) }
	})
	cl := newClient(t, c)
	cl.signIn()
	csrf := cl.csrf("/enqueue")

	// A dead record whose dead letter is not in the DLQ: no Redrive.
	_, page := cl.get("/job?id=gone-1")
	if !strings.Contains(page, "Its dead letter is not in the DLQ") || len(forms(page)) != 0 {
		t.Errorf("a dead job without a dead letter offers %q", forms(page))
	}

	// The Dead letters page: Redrive for the jobs, Delete for the body that is no job.
	_, page = cl.get("/dlq")
	var malformedID string
	for _, f := range forms(page) {
		if id, ok := strings.CutPrefix(f, "/dlq/delete "); ok {
			malformedID = id
		}
	}
	got := strings.Join(forms(page), ", ")
	for _, want := range []string{"/job/redrive dead-a", "/job/redrive dead-b", "/job/redrive dead-c", "/dlq/delete ", "/dlq/redrive-all", "/dlq/purge"} {
		if !strings.Contains(got, want) {
			t.Errorf("the Dead letters page offers %s, want %s among them", got, want)
		}
	}
	if strings.Count(got, "/job/redrive") != 3 || malformedID == "" {
		t.Errorf("the Dead letters page offers %s: want a Redrive for each job and a Delete for the body that is no job", got)
	}

	// The dead letter that is no job: its page shows the body, escaped, to a signed-in operator.
	_, msg := cl.get("/dlq/message?" + url.Values{"id": {malformedID}}.Encode())
	if !strings.Contains(msg, `hello from a shell script &lt;img src=x onerror=alert(1)&gt; \u202e`) || !strings.Contains(msg, `id="delete-message"`) {
		t.Errorf("the page of the dead letter that is no job:\n%s", msg)
	}
	checkSafe(t, "the dead letter's page", msg)
	anon := newClient(t, c)
	if code, body := anon.get("/dlq/message?" + url.Values{"id": {malformedID}}.Encode()); code != http.StatusUnauthorized || strings.Contains(body, "shell script") {
		t.Errorf("an anonymous viewer of the dead letter's page: %d", code)
	}
	// Delete it: gone from the DLQ and from the page.
	code, loc, body := cl.post("/dlq/delete", url.Values{"message_id": {malformedID}, "csrf": {csrf}})
	if code != http.StatusSeeOther {
		t.Fatalf("delete: %d\n%s", code, body)
	}
	if _, page := cl.get(loc); strings.Contains(page, "shell script") || !strings.Contains(page, "Deleted dead letter "+malformedID) {
		t.Errorf("after the delete the page still lists the dead letter, or says nothing:\n%s", page)
	}
	if code, _, _ := cl.post("/dlq/delete", url.Values{"message_id": {malformedID}, "csrf": {csrf}}); code != http.StatusNotFound {
		t.Errorf("deleting it again: %d, want 404", code)
	}

	// Redrive one: the next view no longer offers it (the shared peek was dropped).
	if code, _, body := cl.post("/job/redrive", url.Values{"id": {"dead-a"}, "csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("redrive: %d\n%s", code, body)
	}
	_, page = cl.get("/dlq")
	if got := strings.Join(forms(page), ", "); strings.Contains(got, "dead-a") || !strings.Contains(got, "/job/redrive dead-b") {
		t.Errorf("after redriving dead-a the page offers %s", got)
	}

	// A purge SQS has not finished (it takes up to 60 s): the page may still list the dead
	// letters, with no action, until then.
	if code, _, body := cl.post("/dlq/purge", url.Values{"confirm": {s.stack.Name + "-jobs-dlq"}, "csrf": {csrf}}); code != http.StatusSeeOther {
		t.Fatalf("purge: %d\n%s", code, body)
	}
	_, page = cl.get("/dlq")
	if !strings.Contains(page, `id="purging"`) || !strings.Contains(page, "dead-b") || len(forms(page)) != 0 {
		t.Errorf("during the purge the page offers %q (purging note: %v)", forms(page), strings.Contains(page, `id="purging"`))
	}
	if _, page := cl.get("/job?id=dead-b"); len(forms(page)) != 0 {
		t.Errorf("during the purge a dead job's page offers %q", forms(page))
	}
	if code, _, _ := cl.post("/dlq/purge", url.Values{"confirm": {s.stack.Name + "-jobs-dlq"}, "csrf": {csrf}}); code != http.StatusConflict {
		t.Errorf("a second purge within 60 s: %d, want 409", code)
	}
	// SQS deletes them (here: now), and the minute passes.
	if err := s.dlq.Purge(context.Background(), s.stack.Name+"-jobs-dlq"); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(61 * time.Second))
	_, page = cl.get("/dlq")
	if !strings.Contains(page, `id="empty"`) || len(forms(page)) != 0 {
		t.Errorf("after the purge the page offers %q", forms(page))
	}
}

// slowPurgeDLQ purges as SQS may: it accepts the purge and deletes nothing yet.
type slowPurgeDLQ struct {
	console.DLQAPI
	purges atomic.Int32
}

func (d *slowPurgeDLQ) Purge(context.Context, string) error {
	d.purges.Add(1)
	return nil
}
