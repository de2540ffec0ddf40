package dedup_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/dedup"
)

// The debounce tests do not run in parallel: the embedded emulator's ListSchedules (the
// dispatcher's) reads schedules outside its lock while UpdateSchedule rewrites them in place, a
// data race inside the emulator that -race reports when one test moves schedules while another
// dispatches (ListSchedules also ignores the group, so every dispatcher lists every schedule).

// tick runs the dispatcher once at the fake clock's time and returns how many schedules fired.
func (e *env) tick() int {
	e.t.Helper()
	n, err := e.disp.Tick(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestDebounceHundredEventsOverTenSeconds: 100 enqueues of one key over 10 s (on the
// dispatcher's clock), with a quiet period of 2 s, are one job, with the last args, that runs
// once 2 s have passed after the last.
func TestDebounceHundredEventsOverTenSeconds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	rule := dedup.Debounce{Key: "doc-1", Period: 2 * time.Second, MaxWait: time.Minute}
	var job string
	for i := range 100 {
		res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-1", N: i}, rule)
		if err != nil || res.Outcome != dedup.Debounced {
			t.Fatalf("event %d: %+v, %v", i, res, err)
		}
		if i == 0 {
			job = res.ID
		}
		if res.ID != job || res.Events != i+1 || !res.RunAt.Equal(e.clock.Now().Add(2*time.Second)) {
			t.Fatalf("event %d: job %s (%d events, runs at %s), want job %s, %d events, runs at %s", i, res.ID, res.Events, res.RunAt, job, i+1, e.clock.Now().Add(2*time.Second))
		}
		if n := e.tick(); n != 0 {
			t.Fatalf("event %d: %d schedules fired while events keep coming", i, n)
		}
		e.clock.Add(100 * time.Millisecond)
	}
	if msgs := e.receive(); len(msgs) != 0 {
		t.Fatalf("%d messages before the quiet period is over", len(msgs))
	}
	e.clock.Add(2 * time.Second)
	if n := e.tick(); n != 1 {
		t.Fatalf("%d schedules fired after the quiet period, want 1", n)
	}
	msgs := e.receive()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the one debounced job", len(msgs))
	}
	env := envelopes(t, msgs)[0]
	if env.ID != job || argsOf(t, env).N != 99 {
		t.Fatalf("the job sent: %s with %+v, want %s with the last args (n 99)", env.ID, argsOf(t, env), job)
	}
	e.work(msgs)
	if runs, _ := e.ran(); len(runs) != 1 || runs[0].N != 99 {
		t.Fatalf("runs %v, want one with n 99", runs)
	}
	// The next enqueue of the key is the next job.
	res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-1", N: 100}, rule)
	if err != nil || res.ID == job || res.Events != 1 {
		t.Fatalf("after the job ran: %+v, %v; want a new job", res, err)
	}
}

// TestDebounceMaxWait: a steady stream (an enqueue every second, quiet period 5 s) still runs a
// job within MaxWait (10 s) of each job's first enqueue, each with the args of the latest
// enqueue before it fired.
func TestDebounceMaxWait(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	rule := dedup.Debounce{Key: "doc-2", Period: 5 * time.Second, MaxWait: 10 * time.Second}
	firstOf := map[string]time.Time{} // job → its first enqueue
	lastN := map[string]int{}         // job → the n of its latest enqueue
	firedAt := map[string]time.Time{} // job → when its message was sent
	var order []string
	collect := func() {
		if e.tick() == 0 {
			return
		}
		for _, env := range envelopes(t, e.receive()) {
			if _, ok := firstOf[env.ID]; !ok {
				t.Fatalf("message of unknown job %s", env.ID)
			}
			if _, dup := firedAt[env.ID]; dup {
				t.Fatalf("job %s sent twice", env.ID)
			}
			if got := argsOf(t, env).N; got != lastN[env.ID] {
				t.Fatalf("job %s carries n %d, want its latest enqueue's %d", env.ID, got, lastN[env.ID])
			}
			firedAt[env.ID] = e.clock.Now()
			order = append(order, env.ID)
		}
	}
	for i := range 25 {
		res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-2", N: i}, rule)
		if err != nil || res.Outcome != dedup.Debounced {
			t.Fatalf("event %d: %+v, %v", i, res, err)
		}
		if _, ok := firstOf[res.ID]; !ok {
			firstOf[res.ID] = e.clock.Now()
		}
		lastN[res.ID] = i
		e.clock.Add(time.Second)
		collect()
	}
	e.clock.Add(rule.Period)
	collect()
	if len(order) < 3 || len(order) != len(firstOf) {
		t.Fatalf("%d jobs sent of %d over 25 s of enqueues every second; want each job sent, and at least 3 (one per MaxWait)", len(order), len(firstOf))
	}
	for _, id := range order[:len(order)-1] {
		// Every job but the last fired while enqueues kept coming: at its deadline, within the
		// dispatcher's tick of a second.
		if d := firedAt[id].Sub(firstOf[id]); d > rule.MaxWait+time.Second {
			t.Fatalf("job %s was sent %v after its first enqueue, more than MaxWait (%v) and a tick", id, d, rule.MaxWait)
		}
	}
}

// TestDebounceConcurrentEnqueues: enqueues of one key from many goroutines at once are one job,
// whose schedule carries the args of the item's last write.
func TestDebounceConcurrentEnqueues(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	rule := dedup.Debounce{Key: "doc-3", Period: 30 * time.Second, MaxWait: time.Hour}
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-3", N: i}, rule)
			if err != nil {
				t.Error(err)
			}
			ids[i] = res.ID
		}()
	}
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("enqueue %d joined job %s, enqueue 0 job %s: want one job", i, ids[i], ids[0])
		}
	}
	// One more, alone: the schedule must carry its args whatever order the others landed in.
	last, err := e.enq.Enqueue(ctx, exportArgs{User: "doc-3", N: 1000}, rule)
	if err != nil || last.ID != ids[0] || last.Events != n+1 {
		t.Fatalf("the last enqueue: %+v, %v", last, err)
	}
	e.clock.Add(31 * time.Second)
	if fired := e.tick(); fired != 1 {
		t.Fatalf("%d schedules fired, want 1", fired)
	}
	msgs := e.receive()
	if len(msgs) != 1 || argsOf(t, envelopes(t, msgs)[0]).N != 1000 {
		t.Fatalf("%d messages; want one, with the last args", len(msgs))
	}
}
