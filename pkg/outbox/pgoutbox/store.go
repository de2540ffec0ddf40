package pgoutbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/outbox"
)

var errNoDB = errors.New("pgoutbox: the relay side needs Config.DB")

// Claim implements outbox.Store: one UPDATE … FROM (SELECT … FOR UPDATE SKIP LOCKED) statement
// that sets locked_by, locked_until and attempts + 1 (see the comment on claimSQL for how FIFO
// groups stay in order under concurrent relays).
func (o *Outbox) Claim(ctx context.Context, c outbox.Claim) ([]outbox.Entry, error) {
	if err := checkClaim(c); err != nil {
		return nil, err
	}
	if o.db == nil {
		return nil, errNoDB
	}
	return o.claim(ctx, o.claimSQL, c.Now, c.Max, c.Owner, c.Until, o.lockSpace)
}

func checkClaim(c outbox.Claim) error {
	if c.Owner == "" || c.Max <= 0 || !c.Until.After(c.Now) {
		return fmt.Errorf("pgoutbox: %w: claim needs an owner, a positive Max and Until after Now", outbox.ErrInvalid)
	}
	return nil
}

func (o *Outbox) claim(ctx context.Context, query string, args ...any) ([]outbox.Entry, error) {
	rows, err := o.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pgoutbox: claim from %s: %w", o.table, err)
	}
	defer rows.Close()
	type seqEntry struct {
		seq int64
		e   outbox.Entry
	}
	var got []seqEntry
	for rows.Next() {
		seq, e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("pgoutbox: claim from %s: %w", o.table, err)
		}
		got = append(got, seqEntry{seq, e})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgoutbox: claim from %s: %w", o.table, err)
	}
	// RETURNING has no order: commit (insertion) order it is.
	sort.Slice(got, func(i, j int) bool { return got[i].seq < got[j].seq })
	out := make([]outbox.Entry, len(got))
	for i := range got {
		out[i] = got[i].e
	}
	return out, nil
}

// Complete implements outbox.Store: one statement deletes the sent rows and writes back the
// others, each guarded by locked_by = owner and the attempts of the claim.
func (o *Outbox) Complete(ctx context.Context, owner string, outcomes []outbox.Outcome) error {
	if len(outcomes) == 0 {
		return nil
	}
	if o.db == nil {
		return errNoDB
	}
	type outcomeIn struct {
		ID          string  `json:"id"`
		Attempts    int     `json:"attempts"`
		Op          string  `json:"op"`
		Error       string  `json:"error,omitempty"`
		AvailableAt *string `json:"available_at,omitempty"`
	}
	in := make([]outcomeIn, len(outcomes))
	for i, oc := range outcomes {
		x := outcomeIn{ID: oc.ID, Attempts: oc.Attempts, Error: oc.Error}
		switch {
		case oc.Sent:
			x.Op = "sent"
		case oc.Release:
			x.Op = "release"
			if !oc.AvailableAt.IsZero() {
				x.AvailableAt = optTime(oc.AvailableAt) // a deferral, or the relay's now
			}
		case oc.Dead:
			x.Op = "dead"
		default:
			x.Op = "failed"
			if oc.AvailableAt.IsZero() {
				return fmt.Errorf("pgoutbox: %w: failed outcome for %s has no AvailableAt", outbox.ErrInvalid, oc.ID)
			}
			x.AvailableAt = optTime(oc.AvailableAt)
		}
		in[i] = x
	}
	param, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("pgoutbox: encode outcomes: %w", err)
	}
	if _, err := o.db.ExecContext(ctx, o.completeSQL, owner, string(param)); err != nil {
		return fmt.Errorf("pgoutbox: write back %d outcomes to %s: %w", len(outcomes), o.table, err)
	}
	return nil
}

// scanner is *sql.Rows or *sql.Row.
type scanner interface{ Scan(dest ...any) error }

// scanEntry reads one row of columns.
func scanEntry(r scanner) (int64, outbox.Entry, error) {
	var (
		seq                                   int64
		e                                     outbox.Entry
		m                                     = &e.Message
		group, dedup, attrs, lockedBy, lastEr sql.NullString
		runAt, lockedUntil                    sql.NullTime
		state                                 string
	)
	if err := r.Scan(&seq, &m.ID, &m.QueueURL, &m.Kind, &m.Key, &group, &dedup, &m.Body, &attrs, &runAt, &state,
		&e.CreatedAt, &e.AvailableAt, &e.Attempts, &lockedBy, &lockedUntil, &lastEr); err != nil {
		return 0, e, err
	}
	m.GroupID, m.DeduplicationID = group.String, dedup.String
	if runAt.Valid {
		m.RunAt = runAt.Time.UTC()
	}
	if attrs.Valid {
		a, err := decodeAttributes([]byte(attrs.String))
		if err != nil {
			// A row other code wrote: the relay fails it with the reason (dead after
			// MaxAttempts) instead of sending it without its attributes, and the claim goes on.
			e.Corrupt = err.Error()
		}
		m.Attributes = a
	}
	e.State = outbox.State(state)
	e.CreatedAt, e.AvailableAt = e.CreatedAt.UTC(), e.AvailableAt.UTC()
	e.LockedBy, e.LastError = lockedBy.String, lastEr.String
	if lockedUntil.Valid {
		e.LockedUntil = lockedUntil.Time.UTC()
	}
	return seq, e, nil
}

// attribute is how a message attribute is kept in the attributes column.
type attribute struct {
	Type   string  `json:"type"`
	String *string `json:"string,omitempty"`
	Binary []byte  `json:"binary,omitempty"`
}

func encodeAttributes(attrs map[string]types.MessageAttributeValue) (json.RawMessage, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	m := make(map[string]attribute, len(attrs))
	for name, v := range attrs {
		if len(v.StringListValues) > 0 || len(v.BinaryListValues) > 0 {
			return nil, fmt.Errorf("%w: attribute %s: list values are not supported by SQS", outbox.ErrInvalid, name)
		}
		a := attribute{String: v.StringValue, Binary: v.BinaryValue}
		if v.DataType != nil {
			a.Type = *v.DataType
		}
		m[name] = a
	}
	return json.Marshal(m)
}

func decodeAttributes(b []byte) (map[string]types.MessageAttributeValue, error) {
	var m map[string]attribute
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("attributes column: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]types.MessageAttributeValue, len(m))
	for name, a := range m {
		v := types.MessageAttributeValue{StringValue: a.String, BinaryValue: a.Binary}
		if a.Type != "" {
			t := a.Type
			v.DataType = &t
		}
		out[name] = v
	}
	return out, nil
}

// Get implements outbox.Inspector.
func (o *Outbox) Get(ctx context.Context, id string) (outbox.Entry, error) {
	if o.db == nil {
		return outbox.Entry{}, errNoDB
	}
	_, e, err := scanEntry(o.db.QueryRowContext(ctx, "SELECT "+columns+" FROM "+o.table+" WHERE id = $1", id))
	if errors.Is(err, sql.ErrNoRows) {
		return outbox.Entry{}, fmt.Errorf("pgoutbox: %w: %q", outbox.ErrNotFound, id)
	}
	if err != nil {
		return outbox.Entry{}, fmt.Errorf("pgoutbox: get %s from %s: %w", id, o.table, err)
	}
	return e, nil
}

// List implements outbox.Inspector. Its page token is the last row's seq.
func (o *Outbox) List(ctx context.Context, q outbox.ListQuery) (outbox.Page, error) {
	if q.State != outbox.StatePending && q.State != outbox.StateDead {
		return outbox.Page{}, fmt.Errorf("pgoutbox: %w: list state %q: want %q or %q", outbox.ErrInvalid, q.State, outbox.StatePending, outbox.StateDead)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	var after int64
	if q.PageToken != "" {
		n, err := strconv.ParseInt(q.PageToken, 10, 64)
		if err != nil || n < 0 {
			return outbox.Page{}, fmt.Errorf("pgoutbox: %w: page token %q is not one List returned", outbox.ErrInvalid, q.PageToken)
		}
		after = n
	}
	if o.db == nil {
		return outbox.Page{}, errNoDB
	}
	rows, err := o.db.QueryContext(ctx, "SELECT "+columns+" FROM "+o.table+" WHERE state = $1 AND seq > $2 ORDER BY seq LIMIT $3",
		string(q.State), after, limit+1)
	if err != nil {
		return outbox.Page{}, fmt.Errorf("pgoutbox: list %s: %w", o.table, err)
	}
	defer rows.Close()
	var p outbox.Page
	var last int64
	for rows.Next() {
		seq, e, err := scanEntry(rows)
		if err != nil {
			return outbox.Page{}, fmt.Errorf("pgoutbox: list %s: %w", o.table, err)
		}
		if len(p.Entries) == limit {
			p.NextPageToken = strconv.FormatInt(last, 10)
			break
		}
		p.Entries = append(p.Entries, e)
		last = seq
	}
	if err := rows.Err(); err != nil {
		return outbox.Page{}, fmt.Errorf("pgoutbox: list %s: %w", o.table, err)
	}
	return p, nil
}

// Retry implements outbox.Inspector: the row is pending and due at once (available_at is set to
// created_at), with attempts 0 and no claim; its last error is kept. A pending row whose claim is
// live by the database's clock (a relay is sending it) is refused with outbox.ErrClaimed, and left
// as it is.
func (o *Outbox) Retry(ctx context.Context, id string) error {
	if o.db == nil {
		return errNoDB
	}
	res, err := o.db.ExecContext(ctx, "UPDATE "+o.table+` SET state = 'pending', attempts = 0, locked_by = NULL,
		locked_until = NULL, available_at = created_at
		WHERE id = $1 AND NOT (state = 'pending' AND locked_until IS NOT NULL AND locked_until > now())`, id)
	if err != nil {
		return fmt.Errorf("pgoutbox: retry %s in %s: %w", id, o.table, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		var lockedBy sql.NullString
		var lockedUntil sql.NullTime
		err := o.db.QueryRowContext(ctx, "SELECT locked_by, locked_until FROM "+o.table+" WHERE id = $1", id).Scan(&lockedBy, &lockedUntil)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("pgoutbox: %w: %q", outbox.ErrNotFound, id)
		case err != nil:
			return fmt.Errorf("pgoutbox: retry %s in %s: %w", id, o.table, err)
		}
		return fmt.Errorf("pgoutbox: %w: %q is claimed by %s until %s: it is being sent; retry it once the claim ended if it is still pending",
			outbox.ErrClaimed, id, lockedBy.String, lockedUntil.Time.UTC().Format(time.RFC3339))
	}
	return nil
}

// Delete removes an entry (a dead one a person gave up on). It returns an error wrapping
// outbox.ErrNotFound when there is no such entry.
func (o *Outbox) Delete(ctx context.Context, id string) error {
	if o.db == nil {
		return errNoDB
	}
	res, err := o.db.ExecContext(ctx, "DELETE FROM "+o.table+" WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("pgoutbox: delete %s from %s: %w", id, o.table, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("pgoutbox: %w: %q", outbox.ErrNotFound, id)
	}
	return nil
}

// Counts are an outbox's size, for metrics and alarms.
type Counts struct {
	// Pending and Dead count the rows in each state.
	Pending, Dead int64
	// OldestPending is the created_at of the oldest pending row (zero when there is none).
	OldestPending time.Time
}

// Counts counts the outbox's rows (one query; it reads the whole table's pending and dead
// indexes, which is cheap for a table that is drained).
func (o *Outbox) Counts(ctx context.Context) (Counts, error) {
	if o.db == nil {
		return Counts{}, errNoDB
	}
	var c Counts
	var oldest sql.NullTime
	err := o.db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'dead'),
		min(created_at) FILTER (WHERE state = 'pending') FROM `+o.table).Scan(&c.Pending, &c.Dead, &oldest)
	if err != nil {
		return Counts{}, fmt.Errorf("pgoutbox: count %s: %w", o.table, err)
	}
	if oldest.Valid {
		c.OldestPending = oldest.Time.UTC()
	}
	return c, nil
}

// SendCommitted is the optional after-commit fast path: call it right after the commit of a
// transaction in which EnqueueTx wrote the jobs ids, and the jobs are claimed (by r's ID, for
// Config.Lease) and sent by r now, without waiting for a relay's next pass; what fails is
// written back as a relay would, and left to the relays. A FIFO job is claimed only when no
// earlier job of its group is pending, as in every claim. Errors are for logging: the jobs are
// in the outbox whatever happens here.
func (o *Outbox) SendCommitted(ctx context.Context, r *outbox.Relay, ids ...string) (outbox.Stats, error) {
	if len(ids) == 0 {
		return outbox.Stats{}, nil
	}
	if o.db == nil {
		return outbox.Stats{}, errNoDB
	}
	param, err := json.Marshal(ids)
	if err != nil {
		return outbox.Stats{}, err
	}
	now := o.now()
	entries, err := o.claim(ctx, o.claimIDsSQL, now, len(ids), r.ID(), now.Add(o.lease), o.lockSpace, string(param))
	if err != nil {
		return outbox.Stats{}, err
	}
	return r.Publish(ctx, entries)
}
