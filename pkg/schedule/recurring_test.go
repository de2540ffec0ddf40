package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

func nightly(name string) schedule.Recurring {
	return schedule.Recurring{
		Name:       name,
		Expression: "cron(0 3 * * ? *)",
		Timezone:   "Europe/Paris",
		Kind:       "reports.nightly",
		Args:       json.RawMessage(`{"format":"pdf"}`),
	}
}

func TestUpsertWritesTheTemplate(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, nil)
	r := nightly("nightly-report")
	r.Args = json.RawMessage("{ \"format\" : \"pdf\" }")
	r.MaxAttempts = 2
	if err := c.Upsert(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	in := fake.creates[0]
	const want = `{"v":1,"id":"<aws.scheduler.execution-id>","kind":"reports.nightly","args":{"format":"pdf"},` +
		`"key":"nightly-report@<aws.scheduler.scheduled-time>","enqueued_at":"<aws.scheduler.scheduled-time>",` +
		`"max_attempts":2,"meta":{"schedule":"nightly-report"}}`
	if got := aws.ToString(in.Target.Input); got != want {
		t.Errorf("input template:\n%s\nwant:\n%s", got, want)
	}
	if !json.Valid([]byte(*in.Target.Input)) {
		t.Error("the template itself is not valid JSON")
	}
	checks := []struct{ what, got, want string }{
		{"expression", aws.ToString(in.ScheduleExpression), "cron(0 3 * * ? *)"},
		{"timezone", aws.ToString(in.ScheduleExpressionTimezone), "Europe/Paris"},
		{"action after completion", string(in.ActionAfterCompletion), "NONE"},
		{"state", string(in.State), "ENABLED"},
		{"flexible window", string(in.FlexibleTimeWindow.Mode), "OFF"},
		{"group", aws.ToString(in.GroupName), "default"},
		{"target", aws.ToString(in.Target.Arn), testQueue},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.what, ch.got, ch.want)
		}
	}
	if in.StartDate != nil || in.EndDate != nil || in.Description != nil || in.Target.SqsParameters != nil {
		t.Errorf("unset fields were sent: %+v", in)
	}
}

func TestExpandInputGivesAValidEnvelope(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, nil)
	r := nightly("nightly-report")
	r.Args = json.RawMessage(`{"note":"<aws.scheduler.x> \"quoted\" é \u2028","n":[1,{"a":null}]}`)
	if err := c.Upsert(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	tmpl := aws.ToString(fake.creates[0].Target.Input)
	arn := "arn:aws:scheduler:us-east-1:123456789012:schedule/default/nightly-report"
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.FixedZone("CET", 3600))

	first := schedule.ExpandInput(tmpl, arn, at, "d32c5kddcf5bb8c3", 1)
	retry := schedule.ExpandInput(tmpl, arn, at, "e41d6leedg6cc9d4", 2)
	next := schedule.ExpandInput(tmpl, arn, at.Add(24*time.Hour), "f5", 1)
	var keys []string
	for i, body := range []string{first, retry, next} {
		env, err := jobs.ParseEnvelope(body)
		if err != nil {
			t.Fatalf("firing %d: %v\n%s", i, err, body)
		}
		if env.Kind != "reports.nightly" || env.Meta[schedule.MetaSchedule] != "nightly-report" {
			t.Errorf("firing %d: %+v", i, env)
		}
		if !strings.Contains(string(env.Args), `"<aws.scheduler.x> \"quoted\"`) {
			t.Errorf("firing %d: args changed: %s", i, env.Args)
		}
		keys = append(keys, env.Key)
	}
	env, _ := jobs.ParseEnvelope(first)
	if env.ID != "d32c5kddcf5bb8c3" {
		t.Errorf("id = %q, want the execution id", env.ID)
	}
	if want := "nightly-report@2026-11-30T01:00:00Z"; env.Key != want {
		t.Errorf("key = %q, want %q", env.Key, want)
	}
	if !env.EnqueuedAt.Equal(at) {
		t.Errorf("enqueued_at = %s, want %s", env.EnqueuedAt, at)
	}
	if keys[0] != keys[1] {
		t.Errorf("a retry of one occurrence changed the key: %q, %q", keys[0], keys[1])
	}
	if keys[0] == keys[2] {
		t.Errorf("two occurrences share the key %q", keys[0])
	}
	all := "<aws.scheduler.schedule-arn>|<aws.scheduler.scheduled-time>|<aws.scheduler.execution-id>|<aws.scheduler.attempt-number>"
	if got, want := schedule.ExpandInput(all, arn, at, "x", 3), arn+"|2026-11-30T01:00:00Z|x|3"; got != want {
		t.Errorf("ExpandInput = %q, want %q", got, want)
	}
	if got := schedule.ExpandInput(`{"v":1}`, arn, at, "x", 1); got != `{"v":1}` {
		t.Errorf("an input without attributes changed: %q", got)
	}
}

func TestUpsertCreatesThenUpdatesAndGetRoundTrips(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, func(c *schedule.Config) { c.QueueARN = testFIFOQueue })
	ctx := context.Background()
	r := schedule.Recurring{
		Name:           "every.5_min-A",
		Expression:     "rate(5 minutes)",
		Timezone:       "America/New_York",
		Start:          time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		End:            time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC),
		FlexibleWindow: 15 * time.Minute,
		Disabled:       true,
		Kind:           "sync.pull",
		Args:           json.RawMessage(`{"source":"crm","full":false}`),
		MaxAttempts:    7,
		GroupID:        "sync",
		Description:    "pull from the CRM",
	}
	if err := c.Upsert(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	r.Created = testCreated // Get reads CreationDate back; Upsert ignores the field
	if !reflect.DeepEqual(got, r) {
		t.Errorf("Get =\n%+v\nwant\n%+v", got, r)
	}
	in := fake.creates[0]
	if w := in.FlexibleTimeWindow; w.Mode != types.FlexibleTimeWindowModeFlexible || aws.ToInt32(w.MaximumWindowInMinutes) != 15 {
		t.Errorf("flexible window = %+v", w)
	}
	if in.State != types.ScheduleStateDisabled || aws.ToString(in.Target.SqsParameters.MessageGroupId) != "sync" {
		t.Errorf("state %s, group id %v", in.State, in.Target.SqsParameters)
	}

	r2 := schedule.Recurring{Name: r.Name, Expression: "cron(0/10 * * * ? *)", Kind: "sync.push", GroupID: "sync"}
	if err := c.Upsert(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if creates, updates, _ := fake.calls(); creates != 2 || updates != 1 {
		t.Errorf("%d creates, %d updates; want 2 (one conflicting) and 1", creates, updates)
	}
	got, err = c.Get(ctx, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	r2.Timezone, r2.Args, r2.Created = "UTC", json.RawMessage(`{}`), testCreated
	if !reflect.DeepEqual(got, r2) {
		t.Errorf("after the update Get =\n%+v\nwant\n%+v", got, r2)
	}
	if err := c.Delete(ctx, r.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, r.Name); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, r.Name); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
}

func TestListFiltersAndOwnership(t *testing.T) {
	t.Parallel()
	fake := newFake()
	ctx := context.Background()
	c := newClient(t, fake, nil)
	for _, name := range []string{"c-third", "a-first", "b-second"} {
		if err := c.Upsert(ctx, nightly(name)); err != nil {
			t.Fatal(err)
		}
	}
	// A one-time job schedule on the same queue.
	if _, err := c.ScheduleJob(ctx, testEnvelope("j1"), testNow.Add(time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	// The same name in another group, and schedules of other queues or other producers.
	other := newClient(t, fake, func(c *schedule.Config) { c.Group = "other" })
	if err := other.Upsert(ctx, nightly("a-first")); err != nil {
		t.Fatal(err)
	}
	otherQueue := newClient(t, fake, func(c *schedule.Config) { c.QueueARN = testQueue + "-2" })
	if err := otherQueue.Upsert(ctx, nightly("d-other-queue")); err != nil {
		t.Fatal(err)
	}
	for name, input := range map[string]string{"e-hand-made": `{"hello":"world"}`, "f-not-json": `hello`} {
		if _, err := fake.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
			Name: aws.String(name), ScheduleExpression: aws.String("rate(1 day)"),
			FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
			Target:             &types.Target{Arn: aws.String(testQueue), RoleArn: aws.String(testRole), Input: aws.String(input)},
		}); err != nil {
			t.Fatal(err)
		}
	}

	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list {
		names = append(names, r.Name)
		want := nightly(r.Name)
		want.Created = testCreated
		if !reflect.DeepEqual(r, want) {
			t.Errorf("List item %+v, want %+v", r, want)
		}
	}
	if want := []string{"a-first", "b-second", "c-third"}; !reflect.DeepEqual(names, want) {
		t.Errorf("List = %v, want %v", names, want)
	}

	// Schedules that are not this client's are neither read, replaced nor deleted.
	for _, name := range []string{"d-other-queue", "e-hand-made"} {
		if _, err := c.Get(ctx, name); !errors.Is(err, schedule.ErrNotOwned) || !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("Get(%s) = %v, want ErrNotOwned and ErrNotFound", name, err)
		}
		_, updatesBefore, _ := fake.calls()
		if err := c.Upsert(ctx, nightly(name)); !errors.Is(err, schedule.ErrNotOwned) {
			t.Errorf("Upsert(%s) = %v, want ErrNotOwned", name, err)
		}
		if err := c.Delete(ctx, name); !errors.Is(err, schedule.ErrNotOwned) {
			t.Errorf("Delete(%s) = %v, want ErrNotOwned", name, err)
		}
		if _, updates, _ := fake.calls(); updates != updatesBefore {
			t.Errorf("Upsert(%s) updated a schedule that is not the client's", name)
		}
	}
	if len(fake.schedules) != 8 {
		t.Errorf("%d schedules, want 8 (nothing deleted)", len(fake.schedules))
	}
}

func TestRecurringValidation(t *testing.T) {
	t.Parallel()
	fake := newFake()
	c := newClient(t, fake, nil)
	fifo := newClient(t, fake, func(c *schedule.Config) { c.QueueARN = testFIFOQueue })
	ctx := context.Background()
	tests := []struct {
		name   string
		client *schedule.Client
		mod    func(*schedule.Recurring)
		want   string
	}{
		{"empty name", c, func(r *schedule.Recurring) { r.Name = "" }, "name is empty"},
		{"long name", c, func(r *schedule.Recurring) { r.Name = strings.Repeat("n", 65) }, "limit is 64"},
		{"name character", c, func(r *schedule.Recurring) { r.Name = "daily/report" }, `'/'`},
		{"reserved name", c, func(r *schedule.Recurring) { r.Name = "sqsworker-job-x" }, "reserved"},
		{"no expression", c, func(r *schedule.Recurring) { r.Expression = "" }, "expression is empty"},
		{"bad expression", c, func(r *schedule.Recurring) { r.Expression = "every day" }, `expression "every day": want at(...)`},
		{"bad cron", c, func(r *schedule.Recurring) { r.Expression = "cron(0 3 * * * *)" }, `expression "cron(0 3 * * * *)": cron day-of-week`},
		{"bad time zone", c, func(r *schedule.Recurring) { r.Timezone = "Mars/Olympus" }, "IANA"},
		{"local time zone", c, func(r *schedule.Recurring) { r.Timezone = "Local" }, "IANA"},
		{"start after end", c, func(r *schedule.Recurring) {
			r.Start, r.End = testNow.Add(time.Hour), testNow
		}, "is not before the end"},
		{"window too long", c, func(r *schedule.Recurring) { r.FlexibleWindow = 1441 * time.Minute }, "flexible window"},
		{"window not minutes", c, func(r *schedule.Recurring) { r.FlexibleWindow = 90 * time.Second }, "flexible window"},
		{"window negative", c, func(r *schedule.Recurring) { r.FlexibleWindow = -time.Minute }, "flexible window"},
		{"no kind", c, func(r *schedule.Recurring) { r.Kind = "" }, "kind is empty"},
		{"bad kind", c, func(r *schedule.Recurring) { r.Kind = "Reports" }, "not allowed"},
		{"args array", c, func(r *schedule.Recurring) { r.Args = json.RawMessage(`[]`) }, "JSON object"},
		{"args string", c, func(r *schedule.Recurring) { r.Args = json.RawMessage(`"x"`) }, "JSON object"},
		{"args invalid", c, func(r *schedule.Recurring) { r.Args = json.RawMessage(`{"a":1`) }, "not valid JSON"},
		{"args too big", c, func(r *schedule.Recurring) {
			r.Args = json.RawMessage(`{"a":"` + strings.Repeat("x", schedule.MaxInputBytes) + `"}`)
		}, "target input limit"},
		{"negative attempts", c, func(r *schedule.Recurring) { r.MaxAttempts = -1 }, "negative"},
		{"FIFO without group", fifo, func(r *schedule.Recurring) {}, "message group id is required"},
		{"long description", c, func(r *schedule.Recurring) { r.Description = strings.Repeat("d", 513) }, "limit is 512"},
	}
	for _, tt := range tests {
		r := nightly("valid")
		tt.mod(&r)
		if err := tt.client.Upsert(ctx, r); !errors.Is(err, schedule.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Upsert = %v, want ErrInvalid saying %q", tt.name, err, tt.want)
		}
	}
	for _, name := range []string{"", "a b", "sqsworker-job-1"} {
		if _, err := c.Get(ctx, name); !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("Get(%q) = %v, want ErrInvalid", name, err)
		}
		if err := c.Delete(ctx, name); !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("Delete(%q) = %v, want ErrInvalid", name, err)
		}
	}
	if creates, updates, deletes := fake.calls(); creates+updates+deletes+fake.gets != 0 {
		t.Errorf("invalid input reached the API: %d creates, %d updates, %d deletes, %d gets", creates, updates, deletes, fake.gets)
	}
}

// TestRecurringOnEmulator is not parallel: kumo v0.33.1's UpdateSchedule rewrites the stored
// schedule in place while its GetSchedule and ListSchedules handlers read it after releasing
// their lock, a data race the race detector reports when other tests list schedules meanwhile.
// Top-level sequential tests never overlap parallel ones.
func TestRecurringOnEmulator(t *testing.T) {
	api := kumoScheduler(t)
	ctx := context.Background()
	queue := "arn:aws:sqs:us-east-1:123456789012:" + awslocal.UniqueName("rec")
	c := newClient(t, api, func(c *schedule.Config) { c.QueueARN, c.Now = queue, time.Now })
	name := awslocal.UniqueName("nightly")
	r := nightly(name)
	r.FlexibleWindow = 30 * time.Minute
	r.MaxAttempts = 4
	r.Description = "nightly report"
	if err := c.Upsert(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// CreationDate comes back (the emulator keeps whole seconds).
	if now := time.Now(); got.Created.IsZero() || got.Created.Before(now.Add(-time.Minute)) || got.Created.After(now.Add(time.Second)) {
		t.Errorf("Created = %v, want about %v", got.Created, now)
	}
	created := got.Created
	r.Created = created
	if !reflect.DeepEqual(got, r) {
		t.Errorf("Get =\n%+v\nwant\n%+v", got, r)
	}
	r.Expression, r.Disabled, r.Timezone = "rate(1 hour)", true, "Asia/Tokyo"
	if err := c.Upsert(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, err = c.Get(ctx, name); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("after the update Get =\n%+v, %v\nwant\n%+v", got, err, r)
	}
	// A rate without a start date counts from the schedule's creation: its next runs are known.
	r.Expression, r.Disabled = "rate(7 minutes)", false
	if err := c.Upsert(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, err = c.Get(ctx, name); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	runs := schedule.NextRuns(got, now, 5)
	if len(runs) != 5 {
		t.Fatalf("NextRuns of %s without a start = %v, want 5 runs counted from its creation %v", got.Expression, runs, created)
	}
	for i, run := range runs {
		if !run.After(now) || run.Sub(created)%(7*time.Minute) != 0 || i > 0 && run.Sub(runs[i-1]) != 7*time.Minute || i == 0 && run.Sub(now) > 7*time.Minute {
			t.Errorf("run %d = %v: want creation %v + a multiple of 7m, the first within 7m of %v", i, run, created, now)
		}
	}
	// A one-time job on the same queue is not listed.
	if _, err := c.ScheduleJob(ctx, testEnvelope(jobs.NewID()), time.Now().Add(time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != name {
		t.Errorf("List = %+v, want only %s", list, name)
	}
	if err := c.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, name); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
}

// TestListPageReadsOnlyItsPage: ListPage pages ListSchedules by NextToken, asks for no more than
// the page still needs, and reads (GetSchedule) only the page's schedules; walking the pages
// lists every recurring schedule once, and one-time job schedules, another queue's schedules and
// other producers' schedules are left out.
func TestListPageReadsOnlyItsPage(t *testing.T) {
	t.Parallel()
	fake := newFake()
	ctx := context.Background()
	c := newClient(t, fake, nil)
	var want []string
	for i := range 11 {
		name := fmt.Sprintf("r%02d", (i*7)%11) // created out of order
		if err := c.Upsert(ctx, nightly(name)); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	sort.Strings(want)
	for i := range 5 {
		if _, err := c.ScheduleJob(ctx, testEnvelope(fmt.Sprintf("j%d", i)), testNow.Add(time.Hour), ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := newClient(t, fake, func(c *schedule.Config) { c.QueueARN = testQueue + "-2" }).Upsert(ctx, nightly("r05-other-queue")); err != nil {
		t.Fatal(err)
	}
	var got []string
	token, pages := "", 0
	for {
		fake.mu.Lock()
		gets0 := fake.gets
		fake.mu.Unlock()
		page, err := c.ListPage(ctx, schedule.ListQuery{Limit: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		fake.mu.Lock()
		gets := fake.gets - gets0
		fake.mu.Unlock()
		if len(page.Schedules) > 3 || gets > 3 {
			t.Errorf("page %d: %d schedules after %d GetSchedule calls, want at most 3 of each", pages, len(page.Schedules), gets)
		}
		for i, r := range page.Schedules {
			if i > 0 && page.Schedules[i-1].Name >= r.Name {
				t.Errorf("page %d is not sorted by name: %s before %s", pages, page.Schedules[i-1].Name, r.Name)
			}
			if !r.Created.Equal(testCreated) || r.Kind != "reports.nightly" {
				t.Errorf("listed %+v", r)
			}
			got = append(got, r.Name)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
		if pages > 20 {
			t.Fatal("the listing never ends")
		}
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) || pages < 4 {
		t.Errorf("walked %v in %d pages, want %v in at least 4", got, pages, want)
	}
	all, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range all {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("List = %v, want %v", names, want)
	}
	for _, limit := range []int{-1, 101} {
		if _, err := c.ListPage(ctx, schedule.ListQuery{Limit: limit}); !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("Limit %d: %v, want ErrInvalid", limit, err)
		}
	}
}

func TestCheckRecurring(t *testing.T) {
	t.Parallel()
	r := schedule.Recurring{Name: "n", Expression: " rate(1 hour) ", Kind: "a.b", Args: json.RawMessage(" { \"x\" : 1 } ")}
	if err := schedule.CheckRecurring(&r); err != nil {
		t.Fatal(err)
	}
	if r.Expression != "rate(1 hour)" || r.Timezone != "UTC" || string(r.Args) != `{"x":1}` {
		t.Errorf("defaults not filled: %+v", r)
	}
	r = schedule.Recurring{Name: "n", Expression: "rate(1 hour)", Kind: "a.b"}
	if err := schedule.CheckRecurring(&r); err != nil || string(r.Args) != "{}" {
		t.Errorf("empty args: %v, %s", err, r.Args)
	}
	for _, tc := range []struct {
		mod     func(*schedule.Recurring)
		field   string
		problem string
	}{
		{func(r *schedule.Recurring) { r.Name = "" }, "Name", "is empty"},
		{func(r *schedule.Recurring) { r.Name = "sqsworker-x" }, "Name", `"sqsworker-x": names starting with "sqsworker-" are one-time schedules of delayed jobs`},
		{func(r *schedule.Recurring) { r.Expression = "" }, "Expression", "is empty"},
		{func(r *schedule.Recurring) { r.Expression = "cron(0 2 * * * *)" }, "Expression", `"cron(0 2 * * * *)": cron day-of-week`},
		{func(r *schedule.Recurring) { r.Timezone = "Mars/Olympus" }, "Timezone", `"Mars/Olympus" is not an IANA time zone name`},
		{func(r *schedule.Recurring) { r.Kind = "A" }, "Kind", `"A": character 'A' at 0 is not allowed`},
		{func(r *schedule.Recurring) { r.Args = json.RawMessage("[1]") }, "Args", "is a JSON array: want a JSON object"},
		{func(r *schedule.Recurring) { r.MaxAttempts = -2 }, "MaxAttempts", "-2 is negative"},
		{func(r *schedule.Recurring) { r.GroupID = "a b" }, "GroupID", "is not allowed (printable ASCII only)"},
		{func(r *schedule.Recurring) { r.FlexibleWindow = 30 * time.Second }, "FlexibleWindow", "30s: want whole minutes"},
		{func(r *schedule.Recurring) {
			r.Start, r.End = testNow, testNow.Add(-time.Hour)
		}, "Start", "2026-11-29T10:00:00Z is not before the end, 2026-11-29T09:00:00Z"},
	} {
		r := schedule.Recurring{Name: "n", Expression: "rate(1 hour)", Kind: "a.b"}
		tc.mod(&r)
		err := schedule.CheckRecurring(&r)
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, schedule.ErrInvalid) || fe.Field != tc.field || !strings.HasPrefix(fe.Problem, tc.problem) && !strings.Contains(fe.Problem, tc.problem) {
			t.Errorf("%s: CheckRecurring = %#v, want a FieldError for %s saying %q", tc.field, err, tc.field, tc.problem)
		}
	}
}
