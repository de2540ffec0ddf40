package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

type memCheckpointer struct {
	saved []byte
	err   error
}

func (m *memCheckpointer) SaveCheckpoint(_ context.Context, c []byte) error {
	if m.err != nil {
		return m.err
	}
	m.saved = c
	return nil
}

func (m *memCheckpointer) LoadCheckpoint(context.Context) ([]byte, error) { return m.saved, nil }

type slicerFunc func() bool

func (f slicerFunc) Checkpointed() bool { return f() }

func TestCheckpointAndCursor(t *testing.T) {
	t.Parallel()
	type pos struct {
		Page  int    `json:"page"`
		After string `json:"after"`
	}
	ck := &memCheckpointer{}
	ctx := jobs.WithCheckpointer(context.Background(), ck)
	var p pos
	if found, err := jobs.Cursor(ctx, &p); found || err != nil {
		t.Fatalf("Cursor before any checkpoint = %v, %v; want none", found, err)
	}
	if err := jobs.Checkpoint(ctx, pos{Page: 3, After: "k"}); err != nil {
		t.Fatal(err)
	}
	if string(ck.saved) != `{"page":3,"after":"k"}` {
		t.Errorf("saved %s", ck.saved)
	}
	if found, err := jobs.Cursor(ctx, &p); !found || err != nil || p != (pos{3, "k"}) {
		t.Errorf("Cursor = %v, %v, %+v", found, err, p)
	}
	var wrong []int
	if _, err := jobs.Cursor(ctx, &wrong); err == nil || !strings.Contains(err.Error(), "decode the cursor into *[]int") {
		t.Errorf("Cursor into a wrong type = %v", err)
	}
	if err := jobs.Checkpoint(ctx, func() {}); err == nil || !strings.Contains(err.Error(), "encode the cursor") {
		t.Errorf("Checkpoint of a function = %v", err)
	}
	ck.err = jobs.ErrCursorTooLarge
	if err := jobs.Checkpoint(ctx, 1); !errors.Is(err, jobs.ErrCursorTooLarge) {
		t.Errorf("Checkpoint's store error = %v", err)
	}

	// With a slicer: it is told of every saved checkpoint; once it says the slice is over,
	// Checkpoint returns ErrSliceEnded (after saving).
	ck.err = nil
	over, told := false, 0
	sctx := jobs.WithSlicer(ctx, slicerFunc(func() bool { told++; return over }))
	if err := jobs.Checkpoint(sctx, 7); err != nil || told != 1 {
		t.Errorf("Checkpoint = %v, slicer told %d times", err, told)
	}
	over = true
	if err := jobs.Checkpoint(sctx, 8); !errors.Is(err, jobs.ErrSliceEnded) || string(ck.saved) != "8" {
		t.Errorf("Checkpoint after the slice = %v (saved %s), want ErrSliceEnded with the cursor saved", err, ck.saved)
	}
	ck.err = errors.New("write failed")
	told = 0
	if err := jobs.Checkpoint(sctx, 9); err == nil || errors.Is(err, jobs.ErrSliceEnded) || told != 0 {
		t.Errorf("a failed save = %v (slicer told %d); want the failure, the slicer not told", err, told)
	}
}

func TestSliceEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	if jobs.SliceEnded(ctx) {
		t.Error("SliceEnded of a live context")
	}
	cancel(jobs.ErrSliceEnded)
	if !jobs.SliceEnded(ctx) {
		t.Error("SliceEnded false after a cancel with ErrSliceEnded")
	}
	other, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if jobs.SliceEnded(other) {
		t.Error("SliceEnded true for a plain cancel")
	}
}

func TestContinueErrors(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		err  error
		wake time.Time
		msg  string
	}{
		{jobs.Sleep(20 * time.Minute), now.Add(20 * time.Minute), "sleeping for 20m0s"},
		{jobs.Sleep(-time.Second), now, "continues at once"},
		{jobs.SleepUntil(now.Add(48 * time.Hour)), now.Add(48 * time.Hour), "sleeping until 2026-12-03T08:00:00.000Z"},
		{&jobs.ContinueError{Slice: true, Err: context.Canceled}, now, "slice ended; continues from its last checkpoint"},
		{&jobs.ContinueError{Slice: true, Err: errors.New("db: timeout")}, now, "slice ended; continues from its last checkpoint: db: timeout"},
	} {
		var c *jobs.ContinueError
		if !errors.As(tt.err, &c) {
			t.Fatalf("%v is no ContinueError", tt.err)
		}
		if !c.WakeAt(now).Equal(tt.wake) || tt.err.Error() != tt.msg {
			t.Errorf("%q wakes at %v; want %q at %v", tt.err, c.WakeAt(now), tt.msg, tt.wake)
		}
	}
	r := jobs.Restart(errors.New("corrupt"))
	var re *jobs.RestartError
	if !errors.As(r, &re) || r.Error() != "restart from the beginning: corrupt" || errors.Unwrap(r).Error() != "corrupt" {
		t.Errorf("Restart = %v", r)
	}
	lim := &jobs.LimitError{Limit: jobs.ErrRunTimeExhausted, RunTime: 90 * time.Minute, MaxRunTime: time.Hour, Err: context.Canceled}
	if !errors.Is(lim, jobs.ErrRunTimeExhausted) || !errors.Is(lim, context.Canceled) || !strings.Contains(lim.Error(), "ran 1h30m0s in total, its kind's limit is 1h0m0s") {
		t.Errorf("LimitError = %v", lim)
	}
	if n := jobs.ContinuationOf(map[string]string{jobs.MetaContinuation: "12"}); n != 12 {
		t.Errorf("ContinuationOf = %d", n)
	}
	for _, bad := range []string{"", "-1", "x", "1e3"} {
		if n := jobs.ContinuationOf(map[string]string{jobs.MetaContinuation: bad}); n != 0 {
			t.Errorf("ContinuationOf(%q) = %d, want 0", bad, n)
		}
	}
}

type longArgs struct{}

func (longArgs) Kind() string { return "test.long" }

func TestLongKindOptions(t *testing.T) {
	t.Parallel()
	work := jobs.WorkFunc[longArgs](func(context.Context, *jobs.Job[longArgs]) error { return nil })
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, work)
	k, _ := reg.Lookup("test.long")
	if o := k.Options(); o.Slice != 0 || o.MaxContinuations != jobs.DefaultMaxContinuations || o.MaxRunTime != jobs.DefaultMaxRunTime {
		t.Errorf("defaults %+v", o)
	}
	reg = jobs.NewRegistry()
	jobs.MustRegister(reg, work, jobs.WithSlice(10*time.Minute), jobs.WithMaxContinuations(5), jobs.WithMaxRunTime(time.Hour))
	k, _ = reg.Lookup("test.long")
	if o := k.Options(); o.Slice != 10*time.Minute || o.MaxContinuations != 5 || o.MaxRunTime != time.Hour {
		t.Errorf("options %+v", o)
	}
	for name, opt := range map[string]jobs.Option{
		"slice under a second":  jobs.WithSlice(500 * time.Millisecond),
		"negative slice":        jobs.WithSlice(-time.Second),
		"negative continuation": jobs.WithMaxContinuations(-1),
		"run time under 1s":     jobs.WithMaxRunTime(time.Millisecond),
	} {
		if err := jobs.Register(jobs.NewRegistry(), work, opt); err == nil || !strings.Contains(err.Error(), "register test.long") {
			t.Errorf("%s: Register = %v, want an error", name, err)
		}
	}
}
