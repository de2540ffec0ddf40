package console_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// pagingScheduler is an in-memory EventBridge Scheduler with AWS's paging: ListSchedules
// returns up to MaxResults (at most 100) schedules in name order and a NextToken when more are
// left. It counts GetSchedule calls per schedule name. (The embedded emulator's ListSchedules
// ignores MaxResults and NextToken and stops at 100, so a listing at scale cannot be tested on
// it.)
type pagingScheduler struct {
	mu        sync.Mutex
	schedules map[string]*scheduler.GetScheduleOutput
	gets      map[string]int
}

func newPagingScheduler() *pagingScheduler {
	return &pagingScheduler{schedules: map[string]*scheduler.GetScheduleOutput{}, gets: map[string]int{}}
}

func (f *pagingScheduler) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.schedules[*in.Name]; ok {
		return nil, &schedtypes.ConflictException{Message: aws.String("exists")}
	}
	f.schedules[*in.Name] = &scheduler.GetScheduleOutput{Name: in.Name, GroupName: in.GroupName, ScheduleExpression: in.ScheduleExpression,
		ScheduleExpressionTimezone: in.ScheduleExpressionTimezone, State: in.State, Target: in.Target, FlexibleTimeWindow: in.FlexibleTimeWindow,
		CreationDate: aws.Time(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}
	return &scheduler.CreateScheduleOutput{ScheduleArn: aws.String("arn:aws:scheduler:::schedule/" + *in.Name)}, nil
}

func (f *pagingScheduler) UpdateSchedule(context.Context, *scheduler.UpdateScheduleInput, ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	return nil, fmt.Errorf("not in this test")
}

func (f *pagingScheduler) DeleteSchedule(context.Context, *scheduler.DeleteScheduleInput, ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	return nil, fmt.Errorf("not in this test")
}

func (f *pagingScheduler) GetSchedule(_ context.Context, in *scheduler.GetScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets[*in.Name]++
	s, ok := f.schedules[*in.Name]
	if !ok {
		return nil, &schedtypes.ResourceNotFoundException{Message: aws.String("no " + *in.Name)}
	}
	out := *s
	return &out, nil
}

func (f *pagingScheduler) ListSchedules(_ context.Context, in *scheduler.ListSchedulesInput, _ ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for name := range f.schedules {
		if in.NamePrefix == nil || strings.HasPrefix(name, *in.NamePrefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	n := 100
	if in.MaxResults != nil && int(*in.MaxResults) < n {
		n = int(*in.MaxResults)
	}
	from := 0
	if in.NextToken != nil {
		from = sort.SearchStrings(names, *in.NextToken)
	}
	out := &scheduler.ListSchedulesOutput{}
	for _, name := range names[from:min(from+n, len(names))] {
		s := f.schedules[name]
		out.Schedules = append(out.Schedules, schedtypes.ScheduleSummary{Name: s.Name, GroupName: s.GroupName, State: s.State,
			Target: &schedtypes.TargetSummary{Arn: s.Target.Arn}})
	}
	if from+n < len(names) {
		out.NextToken = aws.String(names[from+n])
	}
	return out, nil
}

// recurringGets counts the GetSchedule calls for recurring schedules (not one-time job
// schedules) since the last call.
func (f *pagingScheduler) recurringGets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for name, c := range f.gets {
		if !strings.HasPrefix(name, "sqsworker-") {
			n += c
		}
	}
	f.gets = map[string]int{}
	return n
}

var scheduleNameCell = regexp.MustCompile(`<td class="name">([^<]+)</td>`)

// TestSchedulesPageAtScale: with 130 recurring schedules and 40 delayed jobs in the group, the
// Schedules page reads (GetSchedule) only the schedules it shows, a page at a time, and its next
// links walk every recurring schedule once, each with its next runs (rates counted from their
// creation).
func TestSchedulesPageAtScale(t *testing.T) {
	api := newPagingScheduler()
	const queue = "arn:aws:sqs:us-east-1:123456789012:scale-jobs"
	sc, err := schedule.NewClient(schedule.Config{Scheduler: api, Group: "scale-jobs", QueueARN: queue,
		RoleARN: "arn:aws:iam::123456789012:role/scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 130 {
		name := fmt.Sprintf("sched-%03d", (i*37)%130)
		if err := sc.Upsert(ctx, schedule.Recurring{Name: name, Expression: "rate(15 minutes)", Kind: "report.build"}); err != nil {
			t.Fatal(err)
		}
		want[name] = true
	}
	for i := range 40 {
		env := jobs.Envelope{V: 1, ID: fmt.Sprintf("delayed-%02d", i), Kind: "email.send", Key: fmt.Sprintf("k%d", i), Args: []byte(`{}`)}
		if _, err := sc.ScheduleJob(ctx, env, time.Now().Add(time.Hour), ""); err != nil {
			t.Fatal(err)
		}
	}
	api.recurringGets()
	c, err := console.New(console.Config{Schedules: sc, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	seen := map[string]int{}
	path, pages := "/schedules", 0
	for path != "" {
		code, body := cl.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		pages++
		rows := scheduleNameCell.FindAllStringSubmatch(body, -1)
		if gets := api.recurringGets(); len(rows) > 50 || gets > 50 {
			t.Errorf("page %d shows %d schedules after %d GetSchedule calls of recurring schedules, want at most 50 (the page size) of each", pages, len(rows), gets)
		}
		for _, m := range rows {
			seen[m[1]]++
		}
		if strings.Count(body, `class="run"`) != 5*len(rows) {
			t.Errorf("page %d: %d next runs for %d rate schedules without a start date, want 5 each", pages, strings.Count(body, `class="run"`), len(rows))
		}
		path = ""
		if i := strings.Index(body, `id="recurring-next"`); i >= 0 {
			j := strings.LastIndex(body[:i], `href="`)
			p := body[j+len(`href="`):]
			path = html.UnescapeString(p[:strings.IndexByte(p, '"')])
		}
		if pages > 10 {
			t.Fatal("the pages never end")
		}
	}
	if len(seen) != len(want) || pages != 3 {
		t.Errorf("walked %d schedules in %d pages, want %d in 3", len(seen), pages, len(want))
	}
	for name, n := range seen {
		if n != 1 || !want[name] {
			t.Errorf("schedule %s listed %d times", name, n)
		}
	}
}
