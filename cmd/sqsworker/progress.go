package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress shows a long operation's progress on one line of a terminal (stderr), rewritten in
// place: done of total, the percentage and the rate since it started. On anything but a terminal
// it shows nothing: logs and pipes get the result only.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	on    bool
	shown bool
	now   func() time.Time
	start time.Time
}

// newProgress returns a progress line on w, shown only when on (w is a terminal).
func newProgress(w io.Writer, label string, on bool) *progress {
	return newProgressAt(w, label, on, time.Now)
}

// newProgressAt is newProgress with a clock, for tests.
func newProgressAt(w io.Writer, label string, on bool, now func() time.Time) *progress {
	return &progress{w: w, label: label, on: on, now: now, start: now()}
}

// since makes the rate count from t (a move task's start, which may be before this command's),
// when t is set.
func (p *progress) since(t time.Time) {
	if p == nil || t.IsZero() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start = t
}

// update shows moved of total (total 0: unknown). It is safe to call from any goroutine.
func (p *progress) update(moved, total int) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if total > 0 {
		fmt.Fprintf(p.w, "\r\x1b[K%s: %d/%d messages (%d%%)", p.label, moved, total, min(100, moved*100/total))
	} else {
		fmt.Fprintf(p.w, "\r\x1b[K%s: %d messages", p.label, moved)
	}
	if elapsed := p.now().Sub(p.start); moved > 0 && elapsed > 0 {
		fmt.Fprintf(p.w, ", %s", rate(moved, elapsed))
	}
	p.shown = true
}

// rate formats n per elapsed as "12.5/s" (whole numbers from 100 up).
func rate(n int, elapsed time.Duration) string {
	r := float64(n) / elapsed.Seconds()
	if r >= 100 {
		return fmt.Sprintf("%.0f/s", r)
	}
	return fmt.Sprintf("%.1f/s", r)
}

// done ends the progress line.
func (p *progress) done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}
