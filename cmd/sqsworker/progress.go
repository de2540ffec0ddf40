package main

import (
	"fmt"
	"io"
	"sync"
)

// progress shows a long operation's progress on one line of a terminal (stderr), rewritten in
// place. On anything but a terminal it shows nothing: logs and pipes get the result only.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	on    bool
	shown bool
}

// newProgress returns a progress line on w, shown only when on (w is a terminal).
func newProgress(w io.Writer, label string, on bool) *progress {
	return &progress{w: w, label: label, on: on}
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
	p.shown = true
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
