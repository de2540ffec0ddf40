package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/sqsworker/sqsworker/pkg/producer"
)

// State is where an outbox entry stands.
type State string

// The states of an entry. A sent entry leaves the outbox (a store deletes it, or marks it sent
// and lets it expire).
const (
	// StatePending: waiting to be sent, claimed by a relay, or waiting for a retry.
	StatePending State = "pending"
	// StateDead: the relay gave up after MaxAttempts; the entry is kept, with its last error,
	// until a person retries or deletes it.
	StateDead State = "dead"
	// StateSent: SQS accepted it (only in stores that keep sent entries for a while).
	StateSent State = "sent"
)

// Entry is one job in an outbox.
type Entry struct {
	// Message is the job, as producer.Producer.Prepare built it. Message.ID is the entry's id.
	Message producer.Message
	// State is StatePending, StateDead or StateSent.
	State State
	// CreatedAt is when the entry was written (the business transaction's time).
	CreatedAt time.Time
	// AvailableAt is the earliest time a relay may claim it: CreatedAt at first, later the
	// time a retry is due.
	AvailableAt time.Time
	// Attempts counts the claims so far, the current one included.
	Attempts int
	// LockedBy is the relay that holds the claim ("" when unclaimed), and LockedUntil the end of
	// its lease: after it, another relay may claim the entry.
	LockedBy    string
	LockedUntil time.Time
	// LastError is why the last send failed ("" if none did).
	LastError string
	// Corrupt, when not empty, says why the store could not read the entry back (a row or item
	// that other code wrote, or that was damaged); Message holds what could be read. A relay does
	// not send such an entry: it fails it with this reason, so that after MaxAttempts it is dead,
	// with the reason, and holds nothing else up.
	Corrupt string
}

// ID returns the entry's id: its job id.
func (e *Entry) ID() string { return e.Message.ID }

// Claimed reports whether a relay holds a live claim on the entry at now.
func (e *Entry) Claimed(now time.Time) bool {
	return e.LockedBy != "" && now.Before(e.LockedUntil)
}

// Claim asks a store for due entries.
type Claim struct {
	// Owner identifies the relay (see RelayConfig.ID); it is written into LockedBy.
	Owner string
	// Max is the most entries to claim.
	Max int
	// Now is the relay's clock: entries with AvailableAt ≤ Now whose claim (if any) ended at or
	// before Now are due.
	Now time.Time
	// Until is the end of the new claims' lease, written into LockedUntil.
	Until time.Time
}

// Outcome is what a relay did with one claimed entry, for [Store.Complete].
type Outcome struct {
	// ID is the entry's id.
	ID string
	// Attempts is the entry's Attempts as claimed: with the owner it identifies the claim, so a
	// late write-back for an older claim is refused.
	Attempts int
	// Sent: SQS accepted the entry; it leaves the outbox.
	Sent bool
	// Release: the entry was not attempted (an earlier entry of its FIFO group failed in the same
	// send, the relay is stopping, or its delay needs a scheduler its producer lacks): its claim's
	// attempt is undone, and it is available again at AvailableAt (zero: at once).
	Release bool
	// Dead: the send failed and the entry has used its MaxAttempts: it becomes StateDead.
	Dead bool
	// Error is the failure, for a failed or dead entry.
	Error string
	// AvailableAt is when a failed or released entry may be claimed again. A relay sets it on
	// every released entry: its clock's now for one not attempted, a later time for one it
	// deferred (see RelayConfig.Producers). A zero AvailableAt on a released entry means at once.
	AvailableAt time.Time
}

// Store is an outbox's database, as a relay sees it. Its methods must be safe for concurrent
// use by many relays in many processes: the claim is the only coordination between relays.
type Store interface {
	// Claim claims up to c.Max due entries for c.Owner until c.Until, adds one to their
	// Attempts, and returns them as claimed, in commit order. Two concurrent calls never return
	// the same entry. On a FIFO queue, it returns an entry only when every earlier pending entry
	// of its message group is returned with it (before it) or is dead: a group's entries are
	// claimed in order, and none while an earlier one is claimed elsewhere or waits for a retry.
	Claim(ctx context.Context, c Claim) ([]Entry, error)
	// Complete writes back the outcomes of claimed entries. Each write is guarded by the claim
	// (LockedBy = owner and Attempts = Outcome.Attempts): an entry whose claim was taken over by
	// another relay, or that is gone, is left alone, without an error. Sent entries leave the
	// outbox; failed ones keep Error, wait until AvailableAt and lose their claim; dead ones
	// become StateDead; released ones lose their claim and one attempt, and are available at
	// AvailableAt (at once when it is zero).
	Complete(ctx context.Context, owner string, outcomes []Outcome) error
}

// Inspector is what operators need of an outbox (`sqsworker outbox list|show|retry`). Both
// stores of this module implement it.
type Inspector interface {
	// Get returns one entry by id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Entry, error)
	// List returns entries in a state (StatePending or StateDead), oldest first, a page at a
	// time.
	List(ctx context.Context, q ListQuery) (Page, error)
	// Retry makes a dead (or pending) entry due at once with its attempts reset to 0. It
	// refuses, with an error wrapping ErrClaimed, a pending entry whose claim is live (by the
	// store's clock): its relay is sending it, and clearing the claim would make the relay's
	// guarded write-back fail and the entry be sent a second time. It returns an error wrapping
	// ErrNotFound when there is no such entry.
	Retry(ctx context.Context, id string) error
}

// ListQuery selects entries for [Inspector.List].
type ListQuery struct {
	// State is StatePending or StateDead. Required.
	State State
	// Limit is the page size. Defaults to 50.
	Limit int
	// PageToken continues a listing (Page.NextPageToken); "" starts it.
	PageToken string
}

// Page is one page of [Inspector.List].
type Page struct {
	// Entries are the page's entries, oldest first.
	Entries []Entry
	// NextPageToken continues the listing, "" at its end.
	NextPageToken string
}

// Errors of stores and relays.
var (
	// ErrNotFound: no entry has that id.
	ErrNotFound = errors.New("outbox: no such entry")
	// ErrInvalid wraps every rejection of bad input: a query, a config, an entry.
	ErrInvalid = errors.New("outbox: invalid")
	// ErrClaimed: [Inspector.Retry] refused an entry a relay holds a live claim on.
	ErrClaimed = errors.New("outbox: the entry is claimed by a relay")
)
