package outbox

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemoryStore is an in-process outbox: a [Store] and [Inspector] for tests of code that uses a
// relay, and the reference for the semantics the database stores implement (it passes the
// conformance suite in pkg/outbox/outboxtest). It is safe for concurrent use. Its Add plays the
// part of a committed transaction.
type MemoryStore struct {
	// Now is the clock by which Retry judges whether a claim is live. Defaults to time.Now; set
	// it before the store is used.
	Now func() time.Time

	mu      sync.Mutex
	seq     int64
	entries map[string]*memEntry
}

type memEntry struct {
	Entry
	seq int64 // commit order
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entries: map[string]*memEntry{}}
}

// Add inserts entries as one committed transaction, in order. A zero State is StatePending, a
// zero AvailableAt is CreatedAt. An id already in the store is an error, and nothing is added.
func (s *MemoryStore) Add(entries ...Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for i := range entries {
		id := entries[i].ID()
		if id == "" {
			return fmt.Errorf("%w: entry %d has no id", ErrInvalid, i)
		}
		if _, dup := s.entries[id]; dup || seen[id] {
			return fmt.Errorf("%w: entry %s is already in the outbox", ErrInvalid, id)
		}
		seen[id] = true
	}
	for _, e := range entries {
		if e.State == "" {
			e.State = StatePending
		}
		if e.AvailableAt.IsZero() {
			e.AvailableAt = e.CreatedAt
		}
		s.seq++
		s.entries[e.ID()] = &memEntry{Entry: e, seq: s.seq}
	}
	return nil
}

// Len returns how many entries the store holds (sent ones leave it).
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// sorted returns the entries in commit order. s.mu is held.
func (s *MemoryStore) sorted() []*memEntry {
	all := make([]*memEntry, 0, len(s.entries))
	for _, e := range s.entries {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *memEntry) int { return int(a.seq - b.seq) })
	return all
}

// Claim implements [Store].
func (s *MemoryStore) Claim(ctx context.Context, c Claim) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.Owner == "" || c.Max <= 0 || !c.Until.After(c.Now) {
		return nil, fmt.Errorf("%w: claim needs an owner, a positive Max and Until after Now", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	stopped := map[string]bool{} // FIFO groups with an earlier pending entry not taken
	for _, e := range s.sorted() {
		if len(out) == c.Max {
			break
		}
		if e.State != StatePending {
			continue
		}
		g := e.Message.GroupID
		fifo := strings.HasSuffix(e.Message.QueueURL, ".fifo")
		due := !e.AvailableAt.After(c.Now) && !e.Claimed(c.Now)
		if fifo && stopped[g] {
			continue
		}
		if !due {
			if fifo {
				stopped[g] = true
			}
			continue
		}
		e.Attempts++
		e.LockedBy, e.LockedUntil = c.Owner, c.Until
		out = append(out, e.Entry)
	}
	return out, nil
}

// Complete implements [Store].
func (s *MemoryStore) Complete(ctx context.Context, owner string, outcomes []Outcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range outcomes {
		e, ok := s.entries[o.ID]
		if !ok || e.State != StatePending || e.LockedBy != owner || e.Attempts != o.Attempts {
			continue // gone, or claimed again since: not ours to write
		}
		switch {
		case o.Sent:
			delete(s.entries, o.ID)
			continue
		case o.Release:
			e.Attempts--
			if !o.AvailableAt.IsZero() {
				e.AvailableAt = o.AvailableAt
			}
		case o.Dead:
			e.State = StateDead
			e.LastError = o.Error
		default:
			e.AvailableAt = o.AvailableAt
			e.LastError = o.Error
		}
		e.LockedBy, e.LockedUntil = "", time.Time{}
	}
	return nil
}

// Get implements [Inspector].
func (s *MemoryStore) Get(ctx context.Context, id string) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		return Entry{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return e.Entry, nil
}

// List implements [Inspector]. Its page token is the position in commit order.
func (s *MemoryStore) List(ctx context.Context, q ListQuery) (Page, error) {
	if q.State != StatePending && q.State != StateDead {
		return Page{}, fmt.Errorf("%w: list state %q: want %q or %q", ErrInvalid, q.State, StatePending, StateDead)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	var after int64
	if q.PageToken != "" {
		n, err := strconv.ParseInt(q.PageToken, 10, 64)
		if err != nil || n < 0 {
			return Page{}, fmt.Errorf("%w: page token %q is not one List returned", ErrInvalid, q.PageToken)
		}
		after = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var p Page
	for _, e := range s.sorted() {
		if e.seq <= after || e.State != q.State {
			continue
		}
		if len(p.Entries) == limit {
			p.NextPageToken = strconv.FormatInt(after, 10)
			break
		}
		p.Entries = append(p.Entries, e.Entry)
		after = e.seq
	}
	return p, nil
}

// Retry implements [Inspector].
func (s *MemoryStore) Retry(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok || e.State == StateSent {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if e.State == StatePending && e.Claimed(now()) {
		return fmt.Errorf("%w: %q is claimed by %s until %s: it is being sent; retry it once the claim ended if it is still pending",
			ErrClaimed, id, e.LockedBy, e.LockedUntil.Format(time.RFC3339))
	}
	e.State, e.Attempts, e.LockedBy, e.LockedUntil = StatePending, 0, "", time.Time{}
	e.AvailableAt = time.Time{}
	return nil
}

var (
	_ Store     = (*MemoryStore)(nil)
	_ Inspector = (*MemoryStore)(nil)
)
