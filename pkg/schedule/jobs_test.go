package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

func TestListJobsPagesThroughJobSchedules(t *testing.T) {
	t.Parallel()
	api := newFake()
	c := newClient(t, api, nil)
	other := newClient(t, api, func(cfg *schedule.Config) { cfg.QueueARN = testQueue + "-other" })
	ctx := context.Background()
	at := testNow.Add(2 * time.Hour)
	want := map[string]bool{}
	for _, id := range []string{"job-a", "job-b", "job-c", "job/with:odd chars"} {
		if _, err := c.ScheduleJob(ctx, testEnvelope(id), at, ""); err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	if _, err := other.ScheduleJob(ctx, testEnvelope("job-other"), at, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Upsert(ctx, schedule.Recurring{Name: "nightly", Expression: "rate(1 day)", Kind: "report.build"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	token, pages := "", 0
	for {
		page, err := c.ListJobs(ctx, schedule.JobListQuery{Limit: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, js := range page.Jobs {
			if got[js.Envelope.ID] {
				t.Errorf("job %s listed twice", js.Envelope.ID)
			}
			got[js.Envelope.ID] = true
			if !js.RunAt.Equal(at) || js.Name != schedule.ScheduleName(js.Envelope.ID) || js.Envelope.Kind != "email.send" {
				t.Errorf("job schedule %+v, want run at %v", js, at)
			}
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if len(got) != len(want) || pages < 2 {
		t.Errorf("listed %v in %d pages, want %v (the other queue's job and the recurring schedule left out)", got, pages, want)
	}
	if _, err := c.ListJobs(ctx, schedule.JobListQuery{Limit: 101}); !errors.Is(err, schedule.ErrInvalid) {
		t.Errorf("Limit 101: %v", err)
	}
}

func TestGetJobOnEmulator(t *testing.T) {
	t.Parallel()
	api := kumoScheduler(t)
	ctx := context.Background()
	queue := "arn:aws:sqs:us-east-1:123456789012:" + awslocal.UniqueName("getjob")
	c := newClient(t, api, func(cfg *schedule.Config) { cfg.QueueARN, cfg.Now = queue, time.Now })
	id := jobs.NewID()
	at := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	if _, err := c.ScheduleJob(ctx, testEnvelope(id), at, ""); err != nil {
		t.Fatal(err)
	}
	js, err := c.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if js.Envelope.ID != id || js.Envelope.MaxAttempts != 3 || string(js.Envelope.Args) != `{"to":"a@b.c"}` || !js.RunAt.Equal(at) {
		t.Errorf("GetJob = %+v, want the envelope and %v", js, at)
	}
	if _, err := c.GetJob(ctx, "never-scheduled"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("GetJob of a job never scheduled: %v", err)
	}
	// ScheduledJob (producer.Cancel's read): the envelope, or not found without an error.
	if env, ok, err := c.ScheduledJob(ctx, id); err != nil || !ok || env.ID != id {
		t.Errorf("ScheduledJob = %+v, %v, %v; want the job", env, ok, err)
	}
	if _, ok, err := c.ScheduledJob(ctx, "never-scheduled"); err != nil || ok {
		t.Errorf("ScheduledJob of a job never scheduled: %v, %v; want not found, no error", ok, err)
	}
	other := newClient(t, api, func(cfg *schedule.Config) { cfg.QueueARN = queue + "-other" })
	if _, err := other.GetJob(ctx, id); !errors.Is(err, schedule.ErrNotOwned) {
		t.Errorf("GetJob through another queue's client: %v, want ErrNotOwned", err)
	}
	if err := c.CancelJob(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestNextRuns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	day := func(d int, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name string
		r    schedule.Recurring
		want []time.Time
	}{
		{"cron", schedule.Recurring{Expression: "cron(0 2 * * ? *)", Timezone: "UTC"}, []time.Time{day(2, 2), day(3, 2), day(4, 2)}},
		{"cron in a time zone", schedule.Recurring{Expression: "cron(0 9 * * ? *)", Timezone: "Europe/Paris"}, []time.Time{day(2, 8), day(3, 8), day(4, 8)}},
		{"ended", schedule.Recurring{Expression: "cron(0 2 * * ? *)", Timezone: "UTC", End: day(3, 3)}, []time.Time{day(2, 2), day(3, 2)}},
		{"not started", schedule.Recurring{Expression: "rate(1 day)", Timezone: "UTC", Start: day(5, 0)}, []time.Time{day(5, 0), day(6, 0), day(7, 0)}},
		{"rate without a start counts from its creation", schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC", Created: now.Add(-90*time.Minute + 7*time.Second)},
			[]time.Time{now.Add(30*time.Minute + 7*time.Second), now.Add(90*time.Minute + 7*time.Second), now.Add(150*time.Minute + 7*time.Second)}},
		{"rate created later than after", schedule.Recurring{Expression: "rate(1 day)", Timezone: "UTC", Created: day(3, 5)}, []time.Time{day(3, 5), day(4, 5), day(5, 5)}},
		{"rate with a start ignores its creation", schedule.Recurring{Expression: "rate(1 day)", Timezone: "UTC", Start: day(5, 0), Created: day(1, 7)}, []time.Time{day(5, 0), day(6, 0), day(7, 0)}},
		{"rate without a start or a creation time", schedule.Recurring{Expression: "rate(1 hour)", Timezone: "UTC"}, nil},
		{"disabled", schedule.Recurring{Expression: "cron(0 2 * * ? *)", Timezone: "UTC", Disabled: true}, nil},
	}
	for _, tc := range tests {
		got := schedule.NextRuns(tc.r, now, 3)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if !got[i].Equal(tc.want[i]) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}
