package console_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// longJobs is a job table of three long jobs: one whose cursor is hostile text, one whose cursor
// is in S3, one that succeeded (its cursor removed); and a job that is none.
func longJobs(now time.Time) recordStatus {
	hostile := `{"after":"` + hostileScript + hostileImg + hostileBidi + `"}`
	var running, inS3, done, plain status.Job
	running.JobID, running.Kind, running.Key, running.State = "long-1", "backfill.orders", "2026-11", idempotency.StateQueued
	running.Cursor = idempotency.Cursor{Value: hostile, Bytes: len(hostile), Seq: 41, At: now.Add(-3 * time.Minute)}
	running.Continuations, running.RunTime = 12, 3*time.Hour+2*time.Minute
	inS3.JobID, inS3.Kind, inS3.Key, inS3.State = "long-2", "export.run", "k", idempotency.StateScheduled
	inS3.Cursor = idempotency.Cursor{Pointer: `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"p/long-2/cursor/3-t"}]`,
		Bytes: 40 << 10, Seq: 3, At: now.Add(-time.Hour)}
	inS3.Continuations, inS3.RunAt = 1, now.Add(2*time.Hour) // asleep
	done.JobID, done.Kind, done.Key, done.State = "long-3", "export.run", "d", idempotency.StateSucceeded
	done.Cursor = idempotency.Cursor{Bytes: 10, Seq: 7, At: now.Add(-time.Minute)}
	done.RunTime = 90 * time.Second
	plain.JobID, plain.Kind, plain.Key, plain.State = "plain-1", "email.send", "p", idempotency.StateSucceeded
	return recordStatus{jobs: map[string]status.Job{"long-1": running, "long-2": inS3, "long-3": done, "plain-1": plain}}
}

// The job page's Long job section: the cursor's size, number and age, the continuations and
// total run time; the cursor's value escaped and only with ShowArgs (a cursor in S3 named, not
// read; a removed one said); no section for a job that is no long job.
func TestJobPageShowsALongJob(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, show := range []bool{false, true} {
		c, err := console.New(console.Config{Status: longJobs(now), Token: token, ShowArgs: show, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		cl := newClient(t, c)
		_, body := cl.get("/job?id=long-1")
		checkSafe(t, "long job", body)
		checkEscaped(t, "long job", body, show)
		for _, want := range []string{`id="long-job"`, "checkpoint #41, saved 3m0s ago", `<td id="continuations">12</td>`, `<td id="run-time">3h2m0s</td>`} {
			if !strings.Contains(body, want) {
				t.Errorf("ShowArgs %v: the page lacks %q", show, want)
			}
		}
		if hidden := strings.Contains(body, "hidden ("); hidden == show {
			t.Errorf("ShowArgs %v: the cursor's value hidden = %v", show, hidden)
		}
		_, body = cl.get("/job?id=long-2")
		if !strings.Contains(body, "in S3 (s3://b/p/long-2/cursor/3-t)") || !strings.Contains(body, "kept in S3 (40.0 KiB)") {
			t.Errorf("a cursor in S3 is not named:\n%s", body)
		}
		if !strings.Contains(body, `id="wake-at"`) || !strings.Contains(body, "in 2 h") {
			t.Errorf("a sleeping long job's wake time is not shown:\n%s", body)
		}
		_, body = cl.get("/job?id=long-3")
		if !strings.Contains(body, "removed (the job finished, or restarted)") || !strings.Contains(body, "1m30s") {
			t.Errorf("a finished long job's section:\n%s", body)
		}
		if _, body = cl.get("/job?id=plain-1"); strings.Contains(body, `id="long-job"`) {
			t.Error("a job that is no long job has a Long job section")
		}
	}
}

// The Long job section as headless Chromium shows it: no console error, the hostile cursor shown
// as text with its hidden characters escaped, no script run.
func TestBrowserLongJob(t *testing.T) {
	path := chromium(t)
	now := time.Now()
	c, err := console.New(console.Config{Status: longJobs(now), Token: token, ShowArgs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	b := newBrowser(t, path)
	b.open(srv.URL + "/job?id=long-1")
	b.check("long job page")
	if v := b.text("#cursor-value"); !strings.Contains(v, hostileScript) || !strings.Contains(v, `\u202e`) {
		t.Errorf("the cursor's value shows %q; want the hostile text as text, U+202E escaped", v)
	}
	if n := eval[int](b, `(window.__xss || 0)`); n != 0 {
		t.Errorf("the cursor's value ran a script (%d)", n)
	}
	if got := b.text("#continuations") + " " + b.text("#run-time"); got != "12 3h2m0s" {
		t.Errorf("continuations and run time show %q", got)
	}
	checkEscaped(t, "the long job page as the browser shows it", eval[string](b, `document.documentElement.innerText`), true)
}
