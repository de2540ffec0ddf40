package poller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Priority is how a Poller of several queues (Config.Queues) chooses the queue of each batch.
// Either way a queue is chosen only while it is not known to be empty: each queue has its own
// receiver, which holds at most one received batch until a handler slot takes it, and a queue is
// known to be empty once its last receive came back empty (it is then long-polled, and becomes a
// candidate again the moment a message arrives). A queue that just had messages is asked again at
// once (a probe: a short poll, answered at once, when the queue's ReceiveMessageWaitTimeSeconds
// is 0, SQS's default; else a receive that waits at most 1 s); a slot whose choice falls on such
// a queue waits for that answer rather than pass it over.
type Priority uint8

const (
	// Weighted chooses, at each hand-off of a batch to a handler slot, an order of the queues at
	// random (each place drawn among the queues left with probability proportional to their
	// Weight, as asynq does) and takes the batch of the first queue in that order that is not
	// empty. While every queue has messages, each queue gets a share of the batches equal to its
	// share of the weights; no queue that has messages waits forever (at each hand-off it is
	// chosen first with probability Weight/Σ weights: no starvation). The default.
	Weighted Priority = iota
	// Strict takes, at each hand-off, the batch of the first queue in Config.Queues' order that
	// is not empty: a lower queue is served only when every queue above it is empty (its last
	// receive came back empty), so a job of a higher queue waits at most for the batches already
	// running, plus one receive. Lower queues starve while higher ones are busy.
	Strict
)

func (p Priority) String() string {
	switch p {
	case Weighted:
		return "weighted"
	case Strict:
		return "strict"
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// ParsePriority reads a Priority's name: "weighted" or "strict".
func ParsePriority(s string) (Priority, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "weighted", "":
		return Weighted, nil
	case "strict":
		return Strict, nil
	}
	return 0, fmt.Errorf("%w: priority %q: want weighted or strict", ErrInvalidConfig, s)
}

// Queue is one queue of a Poller of several queues (Config.Queues).
type Queue struct {
	// URL is the queue's URL. Required.
	URL string
	// Weight is the queue's weight under Weighted priority, 1–1,000. Defaults to 1. Strict
	// priority ignores it.
	Weight int
	// Paused, when set, is asked before each receive from this queue whether it is paused
	// (flow.QueueGate), as Config.Paused is for a poller of one queue; a paused queue is left
	// out of the slots' choice until it is resumed. Defaults to Config.Paused.
	Paused func(ctx context.Context) bool
}

// MaxWeight is the largest Queue.Weight.
const MaxWeight = 1000

// probeWait bounds the wait of a probe (a receive from a queue that had messages at its last
// receive) on a queue whose ReceiveMessageWaitTimeSeconds is above 0: the SDK cannot send
// WaitTimeSeconds 0 (it omits a zero), so such a queue cannot be short-polled, and a slot waiting
// for the answer of a queue that has just become empty then moves on within a second. On a queue
// without a default wait the probe is a short poll, answered at once. A short poll samples some
// of SQS's servers and may miss a queue's last messages: the queue then counts as empty until its
// next receive, a long poll, which asks every server and returns as soon as it finds them (one
// hand-off later).
const probeWait = time.Second

// checkQueues validates Config.Queues (and fills in default weights); it reports whether any
// queue is FIFO.
func checkQueues(qs []Queue, bad func(string, ...any)) (fifo bool) {
	seen := map[string]int{}
	for i := range qs {
		q := &qs[i]
		switch {
		case q.URL == "":
			bad("Queues[%d]: URL is required", i)
		case !isQueueURL(q.URL):
			bad("Queues[%d]: URL %q is not a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)", i, q.URL)
		}
		if j, dup := seen[q.URL]; dup && q.URL != "" {
			bad("Queues[%d] and Queues[%d] are the same queue %s", j, i, q.URL)
		}
		seen[q.URL] = i
		if q.Weight == 0 {
			q.Weight = 1
		}
		if q.Weight < 1 || q.Weight > MaxWeight {
			bad("Queues[%d]: Weight %d is out of range 1–%d", i, q.Weight, MaxWeight)
		}
		fifo = fifo || isFIFO(q.URL)
	}
	return fifo
}

// lane is one queue of a Poller of several queues.
type lane struct {
	p      *Poller // the queue's own poller: its URL, ARN, visibility and logger
	weight int

	// Under the parent's mu:
	ready   *batch        // a received batch waiting for a handler slot, or nil
	empty   bool          // the queue's last receive came back empty (or failed)
	stopped bool          // the receiver has returned
	taken   chan struct{} // signals the receiver that ready was taken (buffered: 1)
}

// multi is the state of a Poller of several queues.
type multi struct {
	lanes []*lane
	mu    sync.Mutex
	cond  *sync.Cond // broadcast on every change of a lane
}

// newMulti builds the lanes of cfg.Queues, each a Poller of its own with cfg's settings.
func newMulti(cfg Config) (*multi, error) {
	m := &multi{}
	m.cond = sync.NewCond(&m.mu)
	for _, q := range cfg.Queues {
		lc := cfg
		lc.Queues, lc.QueueURL = nil, q.URL
		if q.Paused != nil {
			lc.Paused = q.Paused
		}
		lp, err := New(lc)
		if err != nil {
			return nil, err
		}
		m.lanes = append(m.lanes, &lane{p: lp, weight: q.Weight, taken: make(chan struct{}, 1)})
	}
	return m, nil
}

// runQueues is Run for several queues: a receiver per queue and Concurrency handler slots that
// take the receivers' batches by priority.
func (p *Poller) runQueues(ctx context.Context) error {
	for _, l := range p.multi.lanes {
		if err := l.p.resolveQueue(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	urls := make([]string, len(p.multi.lanes))
	weights := make([]int, len(p.multi.lanes))
	for i, l := range p.multi.lanes {
		urls[i], weights[i] = l.p.cfg.QueueURL, l.weight
	}
	p.log.Info("poller started", slog.Any("queues", urls), slog.Any("weights", weights),
		slog.String("priority", p.cfg.Priority.String()), slog.Int("batch_size", p.cfg.BatchSize),
		slog.Duration("batch_window", p.cfg.BatchWindow), slog.Int("concurrency", p.cfg.Concurrency),
		slog.Bool("heartbeat", !p.cfg.DisableHeartbeat))
	var receivers, slots sync.WaitGroup
	for _, l := range p.multi.lanes {
		receivers.Go(func() { p.receiveLane(ctx, l) })
	}
	for range p.cfg.Concurrency {
		slots.Go(func() {
			for {
				l, b := p.next()
				if b == nil {
					return
				}
				l.p.process(ctx, b)
			}
		})
	}
	receivers.Wait()
	slots.Wait()
	p.log.Info("poller stopped")
	return nil
}

// receiveLane is a queue's receiver: it receives a batch, holds it until a slot takes it, and
// receives again, until ctx is done.
func (p *Poller) receiveLane(ctx context.Context, l *lane) {
	m := p.multi
	defer func() {
		m.mu.Lock()
		l.stopped = true
		m.cond.Broadcast()
		m.mu.Unlock()
	}()
	probe := true // not known to be empty: ask with a short wait
	failures := 0
	paused := false
	for ctx.Err() == nil {
		if gate := l.p.cfg.Paused; gate != nil {
			if now := gate(ctx); now != paused {
				paused = now
				l.p.log.Info("queue pause changed; receiving stopped while paused", slog.Bool("paused", paused))
			}
			if paused {
				m.mu.Lock()
				l.empty = true // not a candidate while it is paused
				m.cond.Broadcast()
				m.mu.Unlock()
				if !sleep(ctx, l.p.cfg.PausedPoll) {
					return
				}
				continue
			}
		}
		m.mu.Lock()
		if l.empty == probe { // a change of state the slots must see
			l.empty = !probe
			m.cond.Broadcast()
		}
		m.mu.Unlock()
		wait := l.p.cfg.WaitTime
		if probe {
			wait = 0 // a short poll (WaitTimeSeconds omitted: the queue's default, 0)
			if l.p.receiveWait > 0 {
				wait = min(probeWait, l.p.cfg.WaitTime) // the queue would wait longer: bound it
			}
		}
		b, err := l.p.gather(ctx, wait, true)
		if b != nil {
			m.mu.Lock()
			l.ready, l.empty = b, false
			m.cond.Broadcast()
			m.mu.Unlock()
			if f := p.cfg.OnBatchReady; f != nil {
				f(l.p.cfg.QueueURL, len(b.msgs))
			}
			select {
			case <-l.taken:
			case <-ctx.Done():
				return // a slot takes it while the poller drains
			}
		}
		if err == nil {
			failures = 0
			probe = b != nil
			continue
		}
		failures++
		pause := l.p.cfg.Backoff(failures)
		l.p.log.Warn("receive failed; backing off", slog.Any("error", err),
			slog.Int("consecutive_failures", failures), slog.Duration("backoff", pause))
		m.mu.Lock()
		l.empty = true // not a candidate while it backs off
		m.cond.Broadcast()
		m.mu.Unlock()
		if !sleep(ctx, pause) {
			return
		}
		probe = true
	}
}

// next waits for the batch the priority chooses and takes it. It returns a nil batch when the
// poller is stopping and every queue's batch has been taken.
func (p *Poller) next() (*lane, *batch) {
	m := p.multi
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		order := p.order()
		for _, l := range order {
			for l.ready == nil && !l.empty && !l.stopped {
				m.cond.Wait() // its receiver has not answered yet: the queue is not known to be empty
			}
			if b := l.ready; b != nil {
				l.ready = nil
				l.taken <- struct{}{}
				return l, b
			}
		}
		done := true
		for _, l := range m.lanes {
			done = done && l.stopped && l.ready == nil
		}
		if done {
			return nil, nil
		}
		m.cond.Wait() // every queue is empty: wait for a batch, then choose again
	}
}

// order returns the queues in the order of this hand-off: Config.Queues' order under Strict; a
// weighted random order under Weighted, each place drawn among the queues left with probability
// proportional to their weights. Called with mu held.
func (p *Poller) order() []*lane {
	lanes := p.multi.lanes
	if p.cfg.Priority == Strict || len(lanes) == 1 {
		return lanes
	}
	left := slices.Clone(lanes)
	out := make([]*lane, 0, len(lanes))
	for len(left) > 0 {
		total := 0
		for _, l := range left {
			total += l.weight
		}
		r := int(p.cfg.Rand() * float64(total))
		i := 0
		for ; i < len(left)-1; i++ {
			if r < left[i].weight {
				break
			}
			r -= left[i].weight
		}
		out = append(out, left[i])
		left = slices.Delete(left, i, i+1)
	}
	return out
}
