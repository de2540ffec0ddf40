package schedule_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// ScheduleResend gives every copy of a job a schedule of its own (the job's name plus the copy's
// time, rounded up to the second as the expression is), so a job that sleeps again while its
// last schedule is not yet deleted still gets its copy; scheduling one copy twice is no error;
// ListJobs lists the copies with the job schedules, and GetJob (the job's own name) does not
// find them.
func TestScheduleResend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake()
	c := newClient(t, f, nil)
	env := jobs.Envelope{V: 1, ID: "01JD0000000000000000000000", Kind: "export.run", Args: []byte(`{}`),
		Meta: map[string]string{jobs.MetaContinuation: "1"}}
	at1 := testNow.Add(2*time.Hour + 300*time.Millisecond)
	env.RunAt = at1
	name1, err := c.ScheduleResend(ctx, env, at1, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "sqsworker-job-01JD0000000000000000000000.at" + strconv.FormatInt(at1.Truncate(time.Second).Unix()+1, 10); name1 != want || name1 != schedule.ResendScheduleName(env.ID, at1) {
		t.Errorf("name %q, want %q (the job's name, the copy's second rounded up)", name1, want)
	}
	if again, err := c.ScheduleResend(ctx, env, at1, ""); err != nil || again != name1 {
		t.Errorf("the same copy again: %q, %v; want the same schedule, no error", again, err)
	}
	// The next sleep of the same job, while the first schedule is still there.
	at2 := at1.Add(time.Hour)
	env.RunAt = at2
	name2, err := c.ScheduleResend(ctx, env, at2, "")
	if err != nil || name2 == name1 {
		t.Fatalf("a second copy: %q, %v; want a schedule of its own", name2, err)
	}
	if len(f.schedules) != 2 {
		t.Errorf("%d schedules, want 2", len(f.schedules))
	}
	page, err := c.ListJobs(ctx, schedule.JobListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 2 || page.Jobs[0].Envelope.ID != env.ID || page.Jobs[0].Envelope.Meta[jobs.MetaContinuation] != "1" {
		t.Errorf("ListJobs = %+v; want both copies", page.Jobs)
	}
	if _, err := c.GetJob(ctx, env.ID); err == nil {
		t.Error("GetJob found a copy's schedule under the job's own name")
	}
	// A long id: the name is hashed, and still valid and distinct per copy.
	long := env
	long.ID = strings.Repeat("x", 200)
	n1, n2 := schedule.ResendScheduleName(long.ID, at1), schedule.ResendScheduleName(long.ID, at2)
	if n1 == n2 || len(n1) > schedule.MaxNameLength || !strings.HasPrefix(n1, schedule.JobScheduleHashPrefix) {
		t.Errorf("long id names %q, %q", n1, n2)
	}
	// Invalid copies are refused before any call.
	before := len(f.creates)
	if _, err := c.ScheduleResend(ctx, env, testNow.Add(-time.Minute), ""); err == nil {
		t.Error("a copy in the past: no error")
	}
	if len(f.creates) != before {
		t.Error("an invalid copy reached CreateSchedule")
	}
}
