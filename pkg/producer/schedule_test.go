package producer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// fakeScheduler records scheduled and cancelled jobs.
type fakeScheduler struct {
	mu        sync.Mutex
	scheduled []scheduledCall
	cancelled []string
	err       error
}

type scheduledCall struct {
	env   jobs.Envelope
	runAt time.Time
	group string
}

func (f *fakeScheduler) ScheduleJob(_ context.Context, env jobs.Envelope, runAt time.Time, group string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	f.scheduled = append(f.scheduled, scheduledCall{env, runAt, group})
	return "sqsworker-" + env.ID, nil
}

func (f *fakeScheduler) CancelJob(_ context.Context, jobID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, jobID)
	return nil
}

// fakeStatus records the status writes.
type fakeStatus struct {
	mu        sync.Mutex
	queued    []string
	scheduled map[string]time.Time
	cancelled []string
}

func (f *fakeStatus) RecordEnqueued(_ context.Context, kind, key, jobID, hash string, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued = append(f.queued, jobID)
	return nil
}

func (f *fakeStatus) RecordScheduledJob(_ context.Context, kind, key, jobID, hash string, runAt, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.scheduled == nil {
		f.scheduled = map[string]time.Time{}
	}
	f.scheduled[jobID] = runAt
	return nil
}

func (f *fakeStatus) Cancel(_ context.Context, kind, key string, at time.Time, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, kind+"/"+key)
	return nil
}

func TestLongDelaysGoThroughTheScheduler(t *testing.T) {
	t.Parallel()
	sqsFake := &fakeSQS{}
	sched := &fakeScheduler{}
	st := &fakeStatus{}
	p := newTestProducer(t, sqsFake, stdURL, func(c *Config) { c.Scheduler = sched; c.Status = st })
	ctx := context.Background()

	res, err := p.EnqueueIn(ctx, emailArgs{To: "a@b.c"}, 16*time.Minute, WithKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.MessageID != "" || res.Schedule != "sqsworker-"+res.ID || !res.RunAt.Equal(fixedNow.Add(16*time.Minute)) {
		t.Errorf("result = %+v", res)
	}
	if len(sqsFake.sendCalls()) != 0 {
		t.Errorf("a scheduled job was also sent to SQS")
	}
	if len(sched.scheduled) != 1 || sched.scheduled[0].env.Key != "k1" || sched.scheduled[0].env.Kind != "email.send" || sched.scheduled[0].group != "" {
		t.Fatalf("scheduled = %+v", sched.scheduled)
	}
	if !st.scheduled[res.ID].Equal(res.RunAt) || len(st.queued) != 0 {
		t.Errorf("status: scheduled %v queued %v", st.scheduled, st.queued)
	}

	// Up to 15 minutes: SQS DelaySeconds, no schedule.
	if _, err := p.EnqueueIn(ctx, emailArgs{To: "a@b.c"}, 15*time.Minute); err != nil || len(sched.scheduled) != 1 {
		t.Errorf("15 min: err %v, schedules %d", err, len(sched.scheduled))
	}
	if calls := sqsFake.sendCalls(); len(calls) != 1 || calls[0].Delay != 900 {
		t.Errorf("15 min delay sent as %+v", calls)
	}

	// At a time: the exact time is kept; a past time is refused before anything is created.
	at := fixedNow.Add(3 * time.Hour)
	res, err = p.EnqueueAt(ctx, emailArgs{To: "a@b.c"}, at)
	if err != nil || !sched.scheduled[1].runAt.Equal(at) || !res.RunAt.Equal(at) {
		t.Errorf("EnqueueAt: %+v, %v", res, err)
	}
	_, err = p.EnqueueAt(ctx, emailArgs{To: "a@b.c"}, fixedNow.Add(-time.Minute))
	mustContain(t, err, "is not in the future")
	if len(sched.scheduled) != 2 {
		t.Errorf("a past time created a schedule")
	}
}

func TestFIFODelaysAreScheduledWithTheirGroup(t *testing.T) {
	t.Parallel()
	sched := &fakeScheduler{}
	p := newTestProducer(t, &fakeSQS{}, fifoURL, func(c *Config) { c.Scheduler = sched })
	if _, err := p.EnqueueIn(context.Background(), emailArgs{To: "a@b.c"}, 10*time.Second, WithGroupID("tenant-1")); err != nil {
		t.Fatal(err)
	}
	if len(sched.scheduled) != 1 || sched.scheduled[0].group != "tenant-1" {
		t.Errorf("scheduled = %+v", sched.scheduled)
	}
}

func TestBatchMixesScheduledAndSentJobs(t *testing.T) {
	t.Parallel()
	sqsFake := &fakeSQS{}
	sched := &fakeScheduler{}
	p := newTestProducer(t, sqsFake, stdURL, func(c *Config) { c.Scheduler = sched })
	results, err := p.EnqueueBatch(context.Background(), []Request{
		{Args: emailArgs{To: "1"}},
		{Args: emailArgs{To: "2"}, Options: []Option{WithDelay(time.Hour)}},
		{Args: emailArgs{To: "3"}},
	})
	if err != nil || JoinErrors(results) != nil {
		t.Fatal(err, JoinErrors(results))
	}
	if results[1].Schedule == "" || results[0].MessageID == "" || results[2].MessageID == "" || len(sched.scheduled) != 1 {
		t.Errorf("results = %+v", results)
	}
	if calls := sqsFake.batchCalls(); len(calls) != 1 || len(calls[0]) != 2 {
		t.Errorf("batch calls = %v, want one call with the two undelayed jobs", calls)
	}
}

func TestSchedulerFailureIsTheJobsError(t *testing.T) {
	t.Parallel()
	sched := &fakeScheduler{err: errors.New("ValidationException: bad role")}
	p := newTestProducer(t, &fakeSQS{}, stdURL, func(c *Config) { c.Scheduler = sched })
	_, err := p.EnqueueIn(context.Background(), emailArgs{To: "a"}, time.Hour)
	mustContain(t, err, "schedule email.send", "bad role")
}

func TestCancelDeletesTheScheduleAndMarksCancelled(t *testing.T) {
	t.Parallel()
	sched := &fakeScheduler{}
	st := &fakeStatus{}
	p := newTestProducer(t, &fakeSQS{}, stdURL, func(c *Config) { c.Scheduler = sched; c.Status = st })
	if err := p.Cancel(context.Background(), "email.send", "", "job-1"); err != nil {
		t.Fatal(err)
	}
	if len(sched.cancelled) != 1 || sched.cancelled[0] != "job-1" || len(st.cancelled) != 1 || st.cancelled[0] != "email.send/job-1" {
		t.Errorf("cancelled: schedules %v, status %v", sched.cancelled, st.cancelled)
	}
	mustContain(t, p.Cancel(context.Background(), "Bad Kind", "", "x"), "cancel")
}

// readingScheduler is a fakeScheduler that also reads a schedule's job back
// (ScheduledJobReader), as *schedule.Client does.
type readingScheduler struct {
	fakeScheduler
	jobs map[string]jobs.Envelope
	err  error
}

func (f *readingScheduler) ScheduledJob(_ context.Context, jobID string) (jobs.Envelope, bool, error) {
	env, ok := f.jobs[jobID]
	return env, ok, f.err
}

// fakeGroups records the jobs Cancel asked to count in their batch or chain.
type fakeGroups struct {
	mu      sync.Mutex
	counted []jobs.Envelope
	err     error
}

func (f *fakeGroups) RepairJob(_ context.Context, env jobs.Envelope) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counted = append(f.counted, env)
	return "batch b1", f.err == nil, f.err
}

// TestCancelCountsAScheduledJobInItsGroup: with Config.Groups, Cancel reads the job a schedule
// carries before deleting it, and has it counted (its batch or chain would otherwise wait for a
// delivery that no longer comes); a job without a schedule is not; a failed count is the error.
func TestCancelCountsAScheduledJobInItsGroup(t *testing.T) {
	t.Parallel()
	child := jobs.Envelope{ID: "job-1", Kind: "email.send", Meta: map[string]string{"batch": "b1"}}
	for _, tc := range []struct {
		name      string
		jobID     string
		readErr   error
		countErr  error
		wantCount int
		wantErr   string
	}{
		{name: "scheduled", jobID: "job-1", wantCount: 1},
		{name: "no schedule", jobID: "job-2", wantCount: 0},
		{name: "schedule unreadable", jobID: "job-1", readErr: errors.New("AccessDenied"), wantErr: "read its schedule"},
		{name: "count failed", jobID: "job-1", countErr: errors.New("throttled"), wantCount: 1, wantErr: "not counted in its batch b1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sched := &readingScheduler{jobs: map[string]jobs.Envelope{"job-1": child}, err: tc.readErr}
			st, groups := &fakeStatus{}, &fakeGroups{err: tc.countErr}
			p := newTestProducer(t, &fakeSQS{}, stdURL, func(c *Config) { c.Scheduler = sched; c.Status = st; c.Groups = groups })
			err := p.Cancel(context.Background(), "email.send", "", tc.jobID)
			if tc.wantErr != "" {
				mustContain(t, err, tc.wantErr)
			} else if err != nil {
				t.Fatal(err)
			}
			if len(groups.counted) != tc.wantCount {
				t.Fatalf("counted %v, want %d", groups.counted, tc.wantCount)
			}
			if tc.wantCount == 1 && groups.counted[0].ID != "job-1" {
				t.Errorf("counted %+v, want the schedule's job", groups.counted[0])
			}
			if tc.readErr == nil && (len(st.cancelled) != 1 || len(sched.cancelled) != 1) {
				t.Errorf("cancelled: schedules %v, status %v; want the job's", sched.cancelled, st.cancelled)
			}
		})
	}
}

// TestGroupsNeedsAReadingScheduler: Config.Groups without a scheduler that reads a schedule's
// job back is refused by New, rather than never counting anything.
func TestGroupsNeedsAReadingScheduler(t *testing.T) {
	t.Parallel()
	for _, sched := range []JobScheduler{nil, &fakeScheduler{}} {
		_, err := New(Config{SQS: &fakeSQS{}, QueueURL: stdURL, Scheduler: sched, Groups: &fakeGroups{}})
		mustContain(t, err, "Config.Groups needs a Config.Scheduler")
	}
	if _, err := New(Config{SQS: &fakeSQS{}, QueueURL: stdURL, Scheduler: &readingScheduler{}, Groups: &fakeGroups{}}); err != nil {
		t.Errorf("Groups with a reading scheduler: %v", err)
	}
	// Several queues: Cancel is the default queue's producer's, which has them; the other
	// queues' producers do not need them.
	child := jobs.Envelope{ID: "job-1", Kind: "email.send"}
	sched, groups := &readingScheduler{jobs: map[string]jobs.Envelope{"job-1": child}}, &fakeGroups{}
	p := routedProducer(t, &queueSQS{}, func(c *Config) { c.Scheduler, c.Groups, c.Status = sched, groups, &fakeStatus{} })
	if err := p.Cancel(context.Background(), "email.send", "", "job-1"); err != nil || len(groups.counted) != 1 {
		t.Errorf("Cancel on a producer of several queues: %v, counted %v", err, groups.counted)
	}
}
