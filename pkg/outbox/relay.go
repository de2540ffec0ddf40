package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Defaults of [RelayConfig].
const (
	DefaultBatchSize    = 100
	DefaultLease        = 30 * time.Second
	DefaultMaxAttempts  = 10
	DefaultPollInterval = time.Second
	DefaultBackoffBase  = time.Second
	DefaultBackoffCap   = 5 * time.Minute
	// MaxErrorLength is the longest LastError kept (longer errors are cut, on a rune boundary).
	MaxErrorLength = 2048
)

// completeTimeout bounds the write-back after the relay's context was cancelled: SQS already has
// the messages, and the outbox should learn it.
const completeTimeout = 10 * time.Second

// RelayConfig configures a [Relay]. Store and Producers are required; the zero value of every
// other field is its default.
type RelayConfig struct {
	// Store is the outbox. Required.
	Store Store
	// Producers send the entries: each entry goes to the producer whose QueueURL is the entry's
	// Message.QueueURL (an entry with an empty QueueURL to the first producer). An entry for a
	// queue no producer serves fails like a rejected send, with an error naming the queue.
	// Give a producer a Scheduler when entries may be delayed beyond 15 minutes (or at all, on a
	// FIFO queue): without one, such an entry is deferred, without spending an attempt, until
	// its delay fits SQS's DelaySeconds (RunAt minus 15 minutes; RunAt on a FIFO queue). Leave
	// a producer's Status nil when the outbox transaction writes the job's "queued" record
	// itself (else every send writes it once more). Required.
	Producers []*producer.Producer
	// ID names this relay in the entries it claims (LockedBy). Defaults to
	// "<hostname>-<pid>-<random>": it must differ between relays that run at the same time.
	ID string
	// BatchSize is the most entries one pass claims. Defaults to 100.
	BatchSize int
	// Lease is how long a claim lasts: a relay that crashed holding entries leaves them to the
	// others after it. A claimed entry is sent only while at least half its lease is left (by its
	// LockedUntil, which a store may count from its own claim write), and its send ends a quarter
	// lease before the lease does, which leaves that quarter for the write-back; an entry whose
	// claim has less left (a slow claim, a slow earlier send) is released unsent, without an
	// attempt spent, for the next pass. So no relay sends an entry after another may have claimed
	// it; give the lease at least twice what a pass takes. Defaults to 30 s.
	Lease time.Duration
	// MaxAttempts is how many sends an entry gets before it is dead. Defaults to 10.
	MaxAttempts int
	// Backoff is the wait before an entry's next attempt after a failed one. Defaults to
	// exponential backoff with full jitter, base 1 s and cap 5 minutes.
	Backoff jobs.Policy
	// PollInterval is how long Run waits between passes that found nothing, when no Wake
	// arrives. Defaults to 1 s.
	PollInterval time.Duration
	// Wake, when set, makes Run start a pass at once when it receives (LISTEN/NOTIFY, a stream
	// record). Defaults to nil: polling only.
	Wake <-chan struct{}
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives a line per failed or dead entry and per failed pass. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// OnPass, when set, receives the Stats of every pass (metrics).
	OnPass func(Stats)
}

// Stats counts what a relay did.
type Stats struct {
	// Claimed entries, of which Sent were accepted by SQS, Failed will be retried, Dead gave up,
	// Released were not attempted (their FIFO group was stopped by an earlier failure, the relay
	// was stopping, or their claim was running out) and Deferred wait, without an attempt spent,
	// until their delay fits SQS's DelaySeconds (their producer has no Scheduler).
	Claimed, Sent, Failed, Dead, Released, Deferred int
	// LeaseShort counts the Released entries that were not sent because less than half their
	// lease was left when their send would have started (see RelayConfig.Lease), and the later
	// entries of their FIFO groups.
	LeaseShort int
	// Passes counts claim → send → write-back rounds (Drain, Run).
	Passes int
}

func (s *Stats) add(o Stats) {
	s.Claimed += o.Claimed
	s.Sent += o.Sent
	s.Failed += o.Failed
	s.Dead += o.Dead
	s.Released += o.Released
	s.Deferred += o.Deferred
	s.LeaseShort += o.LeaseShort
	s.Passes += o.Passes
}

// Relay publishes outbox entries to SQS: it claims due entries, sends them, and writes back
// what happened. Create it with NewRelay; it is safe for concurrent use, and many relays (in
// many processes) may serve one outbox.
type Relay struct {
	cfg       RelayConfig
	producers map[string]*producer.Producer
	first     *producer.Producer
}

// NewRelay checks cfg and returns a Relay.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: RelayConfig.Store is nil", ErrInvalid)
	}
	if len(cfg.Producers) == 0 {
		return nil, fmt.Errorf("%w: RelayConfig.Producers is empty: give the relay a producer per queue it sends to", ErrInvalid)
	}
	r := &Relay{cfg: cfg, producers: make(map[string]*producer.Producer, len(cfg.Producers))}
	for i, p := range cfg.Producers {
		if p == nil {
			return nil, fmt.Errorf("%w: RelayConfig.Producers[%d] is nil", ErrInvalid, i)
		}
		if _, dup := r.producers[p.QueueURL()]; dup {
			return nil, fmt.Errorf("%w: RelayConfig.Producers has two producers for %s", ErrInvalid, p.QueueURL())
		}
		r.producers[p.QueueURL()] = p
	}
	r.first = cfg.Producers[0]
	c := &r.cfg
	switch {
	case c.BatchSize < 0, c.Lease < 0, c.MaxAttempts < 0, c.PollInterval < 0:
		return nil, fmt.Errorf("%w: RelayConfig.BatchSize, Lease, MaxAttempts and PollInterval must not be negative", ErrInvalid)
	}
	if c.ID == "" {
		c.ID = defaultRelayID()
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Backoff == nil {
		c.Backoff = jobs.Exponential{Base: DefaultBackoffBase, Cap: DefaultBackoffCap}
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return r, nil
}

func defaultRelayID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "relay"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()&0xffffffff, 36)
}

// ID returns the relay's id (RelayConfig.ID or its default).
func (r *Relay) ID() string { return r.cfg.ID }

// Lease returns the relay's lease (RelayConfig.Lease or its default).
func (r *Relay) Lease() time.Duration { return r.cfg.Lease }

// RunOnce makes one pass: it claims up to BatchSize due entries, sends them and writes back the
// outcomes. An error means the claim or the write-back failed; sends that failed are not errors
// (they are retried later, and counted in Stats).
func (r *Relay) RunOnce(ctx context.Context) (Stats, error) {
	now := r.cfg.Now()
	entries, err := r.cfg.Store.Claim(ctx, Claim{Owner: r.cfg.ID, Max: r.cfg.BatchSize, Now: now, Until: now.Add(r.cfg.Lease)})
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: claim: %w", err)
	}
	st, err := r.Publish(ctx, entries)
	st.Passes = 1
	if r.cfg.OnPass != nil {
		r.cfg.OnPass(st)
	}
	return st, err
}

// Drain makes passes until one claims nothing, or ctx is done, and returns what they did.
func (r *Relay) Drain(ctx context.Context) (Stats, error) {
	var total Stats
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		st, err := r.RunOnce(ctx)
		total.add(st)
		if err != nil || st.Claimed == 0 {
			return total, err
		}
	}
}

// Run drains the outbox, then waits for a Wake or PollInterval and drains again, until ctx is
// done; a pass in progress then finishes its write-back. A failed pass is logged and retried
// after PollInterval. It returns nil when ctx was cancelled.
func (r *Relay) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.cfg.Wake:
		}
		if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.ErrorContext(ctx, "outbox relay pass failed", "relay", r.cfg.ID, "error", err)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(r.cfg.PollInterval)
	}
}

// Publish sends entries that this relay claimed (their LockedBy is the relay's ID) and writes
// back the outcomes: it is RunOnce after the claim, for a caller that claims entries its own way
// (the DynamoDB Streams relay claims the entries of its stream records). Entries are sent in the
// order given.
func (r *Relay) Publish(ctx context.Context, entries []Entry) (Stats, error) {
	st := Stats{Claimed: len(entries)}
	if len(entries) == 0 {
		return st, nil
	}
	now := r.cfg.Now()
	deferred := map[int]bool{}
	short := map[int]bool{}
	outcomes := make([]Outcome, len(entries))
	// Group by producer, keeping the order within each.
	byProducer := map[*producer.Producer][]int{}
	var order []*producer.Producer
	for i := range entries {
		e := &entries[i]
		outcomes[i] = Outcome{ID: e.ID(), Attempts: e.Attempts}
		if e.Corrupt != "" {
			r.failed(ctx, e, &outcomes[i], fmt.Errorf("the stored entry cannot be read: %s", e.Corrupt))
			continue
		}
		if e.Attempts > r.cfg.MaxAttempts {
			// Claimed more often than it was attempted: the relays that claimed it never wrote
			// back (each crashed or ran out of time with it in hand). Sending it again would go
			// on for ever: it ends dead, unsent.
			outcomes[i].Dead = true
			outcomes[i].Error = truncate(fmt.Sprintf("claimed %d times without a write-back (MaxAttempts %d): a relay crashed or timed out with it each time; not sent again", e.Attempts, r.cfg.MaxAttempts), MaxErrorLength)
			r.cfg.Logger.ErrorContext(ctx, "outbox entry is dead: its claims were never written back", "relay", r.cfg.ID,
				"job_id", e.ID(), "kind", e.Message.Kind, "attempts", e.Attempts)
			continue
		}
		p := r.producerFor(e.Message.QueueURL)
		if p == nil {
			r.failed(ctx, e, &outcomes[i], fmt.Errorf("no producer of this relay sends to queue %s", e.Message.QueueURL))
			continue
		}
		if _, ok := byProducer[p]; !ok {
			order = append(order, p)
		}
		byProducer[p] = append(byProducer[p], i)
	}
	for _, p := range order {
		idx := byProducer[p]
		if ctx.Err() != nil {
			// The relay is stopping: what it has not started to send goes back at once.
			for _, i := range idx {
				outcomes[i].Release, outcomes[i].AvailableAt = true, now
			}
			continue
		}
		// Only what this relay surely still holds is sent: an entry whose claim has less than
		// half the lease left (the claim or an earlier send took that long) could be claimed by
		// another relay before this one's write-back, and sent twice. It goes back unsent, and so
		// does the rest of its FIFO group, which must not overtake it.
		start := r.cfg.Now()
		idx, until := r.holding(ctx, entries, idx, outcomes, short, start)
		if len(idx) == 0 {
			continue
		}
		msgs := make([]producer.Message, len(idx))
		for k, i := range idx {
			msgs[k] = entries[i].Message
		}
		// A send once started is not cut off by a stop: SQS may accept a request whose answer
		// never arrives, and the entries would then be sent again. It ends a quarter lease before
		// the earliest of its claims does (or at ctx's deadline), so that the write-back has that
		// quarter while the claims hold.
		sctx, cancel := r.sendContext(ctx, until, start)
		results, _ := p.Send(sctx, msgs) // the call's error is also every result's
		cancel()
		for k, i := range idx {
			switch err := results[k].Err; {
			case err == nil:
				outcomes[i].Sent = true
			case errors.Is(err, producer.ErrGroupBlocked):
				// Not attempted: an earlier entry of its group was not sent.
				outcomes[i].Release, outcomes[i].AvailableAt = true, now
			case errors.Is(err, producer.ErrNeedsScheduler) && r.deferral(ctx, p, &entries[i], &outcomes[i], now):
				deferred[i] = true
			default:
				r.failed(ctx, &entries[i], &outcomes[i], err)
			}
		}
	}
	for i := range outcomes {
		if short[i] {
			st.LeaseShort++
		}
		switch o := &outcomes[i]; {
		case o.Sent:
			st.Sent++
		case deferred[i]:
			st.Deferred++
		case o.Release:
			st.Released++
		case o.Dead:
			st.Dead++
		default:
			st.Failed++
		}
	}
	wctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
		defer cancel()
	}
	if err := r.cfg.Store.Complete(wctx, r.cfg.ID, outcomes); err != nil {
		return st, fmt.Errorf("outbox: write back %d outcomes (the sent entries will be sent again once their claim expires): %w", len(outcomes), err)
	}
	return st, nil
}

// holding returns the entries of idx (in order) whose claim leaves at least half the lease at now,
// and the earliest end of their claims (zero when no store said); it releases the others, and the
// later entries of their FIFO groups, marking them in short. An entry without a LockedUntil (a
// store that does not return it) counts as held.
func (r *Relay) holding(ctx context.Context, entries []Entry, idx []int, outcomes []Outcome, short map[int]bool, now time.Time) ([]int, time.Time) {
	var (
		keep    = idx[:0:0]
		until   time.Time
		blocked map[string]bool
	)
	for _, i := range idx {
		e := &entries[i]
		group := e.Message.GroupID
		if lu := e.LockedUntil; !lu.IsZero() && lu.Sub(now) < r.cfg.Lease/2 || group != "" && blocked[group] {
			outcomes[i].Release, outcomes[i].AvailableAt = true, now
			short[i] = true
			if group != "" {
				if blocked == nil {
					blocked = map[string]bool{}
				}
				blocked[group] = true
			}
			continue
		}
		keep = append(keep, i)
		if lu := e.LockedUntil; !lu.IsZero() && (until.IsZero() || lu.Before(until)) {
			until = lu
		}
	}
	if len(keep) < len(idx) {
		r.cfg.Logger.WarnContext(ctx, "outbox entries released unsent: their claim was running out (the claim or an earlier send took most of the lease; raise RelayConfig.Lease)",
			"relay", r.cfg.ID, "released", len(idx)-len(keep), "lease", r.cfg.Lease)
	}
	return keep, until
}

// sendContext is the context of one send: not cancelled with ctx, ended a quarter lease before
// until (the earliest end of the claims sent; now is the relay's clock) or, when until is zero,
// half a lease from now; and at ctx's deadline, whichever is first.
func (r *Relay) sendContext(ctx context.Context, until, now time.Time) (context.Context, context.CancelFunc) {
	budget := r.cfg.Lease / 2
	if !until.IsZero() {
		budget = until.Sub(now) - r.cfg.Lease/4
	}
	end := time.Now().Add(budget)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

func (r *Relay) producerFor(queueURL string) *producer.Producer {
	if queueURL == "" {
		return r.first
	}
	return r.producers[queueURL]
}

// deferral fills the outcome of an entry whose delay needs a scheduler that p lacks: released,
// without an attempt spent, until the delay fits SQS's DelaySeconds (RunAt − 15 minutes) or, on a
// FIFO queue, which has no per-message delay, until RunAt. It reports false, leaving the outcome
// to failed, when that time is not after now (the producer's clock and the relay's disagree).
func (r *Relay) deferral(ctx context.Context, p *producer.Producer, e *Entry, o *Outcome, now time.Time) bool {
	at := e.Message.RunAt
	if !p.FIFO() {
		at = at.Add(-producer.MaxDelay)
	}
	if !at.After(now) {
		return false
	}
	o.Release, o.AvailableAt = true, at
	r.cfg.Logger.WarnContext(ctx, "outbox entry deferred: its delay needs a scheduler its producer lacks", "relay", r.cfg.ID,
		"job_id", e.ID(), "kind", e.Message.Kind, "run_at", e.Message.RunAt, "retry_at", at)
	return true
}

// failed fills the outcome of an entry whose send failed: a retry after the backoff, or dead.
func (r *Relay) failed(ctx context.Context, e *Entry, o *Outcome, err error) {
	o.Error = truncate(err.Error(), MaxErrorLength)
	if e.Attempts >= r.cfg.MaxAttempts {
		o.Dead = true
		r.cfg.Logger.ErrorContext(ctx, "outbox entry is dead", "relay", r.cfg.ID, "job_id", e.ID(),
			"kind", e.Message.Kind, "attempts", e.Attempts, "error", o.Error)
		return
	}
	o.AvailableAt = r.cfg.Now().Add(r.cfg.Backoff.Backoff(e.Attempts))
	r.cfg.Logger.WarnContext(ctx, "outbox send failed; will retry", "relay", r.cfg.ID, "job_id", e.ID(),
		"kind", e.Message.Kind, "attempts", e.Attempts, "retry_at", o.AvailableAt, "error", o.Error)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
