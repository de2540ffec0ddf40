package pgoutbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Tx is what EnqueueTx needs of the caller's transaction: *sql.Tx implements it (with any
// database/sql driver: pgx's stdlib, lib/pq), and pgxoutbox.Tx adapts a pgx.Tx. The
// statements EnqueueTx runs take only text parameters, so any PostgreSQL driver works.
//
// EnqueueTx calls only ExecContext. Commit and Rollback are in the interface so that only a
// transaction satisfies it: a *sql.DB or *sql.Conn (which have ExecContext but run each
// statement in a transaction of its own) would write the job outside the business
// transaction, committed whatever becomes of the business write.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	Commit() error
	Rollback() error
}

var _ Tx = (*sql.Tx)(nil)

// Config configures an Outbox. The zero value of every field is its default.
type Config struct {
	// Producer prepares the jobs EnqueueTx writes (producer.Producer.Prepare): their queue, id,
	// validation and trace context. Required for EnqueueTx; the relay side (the Store and
	// Inspector methods) does not use it. One Outbox serves one queue; Outboxes of several
	// queues may share a table, and any of them serves the relays of them all.
	Producer *producer.Producer
	// DB is the database the relay side and Migrate use. Required for them; EnqueueTx writes
	// through the caller's transaction instead.
	DB *sql.DB
	// Table is the outbox table, optionally schema-qualified ("app.outbox"). Defaults to
	// DefaultTable, "sqsworker_outbox".
	Table string
	// Channel is the LISTEN/NOTIFY channel EnqueueTx notifies at commit. Defaults to the
	// table's name with '.' replaced by '_'.
	Channel string
	// NoNotify makes EnqueueTx skip pg_notify. NOTIFY serializes the commits of notifying
	// transactions on a database-wide lock, which shows only at thousands of commits a second;
	// relays then find new rows by polling. Defaults to false: notify.
	NoNotify bool
	// Lease is the claim lease of SendCommitted, the after-commit fast path: keep it the relays'
	// RelayConfig.Lease. Defaults to outbox.DefaultLease (30 s).
	Lease time.Duration
	// Now is the clock of SendCommitted's claims. Defaults to time.Now.
	Now func() time.Time
}

// Outbox is a transactional outbox in a PostgreSQL table: EnqueueTx writes jobs in the caller's
// transaction, and the Outbox is the outbox.Store that relays claim from and the
// outbox.Inspector of `sqsworker outbox`. Create it with New; it is safe for concurrent use.
type Outbox struct {
	prod      *producer.Producer
	db        *sql.DB
	table     string
	channel   string
	notify    bool
	lease     time.Duration
	now       func() time.Time
	lockSpace int32 // the advisory-lock space of this table's FIFO groups

	// insertSQL[0] inserts a batch of standard rows, insertSQL[1] one with FIFO rows (it takes
	// their groups' locks first).
	insertSQL                          [2]string
	claimSQL, claimIDsSQL, completeSQL string
}

var (
	_ outbox.Store     = (*Outbox)(nil)
	_ outbox.Inspector = (*Outbox)(nil)
)

// New checks cfg and returns an Outbox. It does not touch the database: run Migrate (or the
// SQL of SchemaSQL) once to create the table.
func New(cfg Config) (*Outbox, error) {
	table := cfg.Table
	if table == "" {
		table = DefaultTable
	}
	if err := checkTable(table); err != nil {
		return nil, fmt.Errorf("pgoutbox: Config.Table: %w", err)
	}
	channel := cfg.Channel
	if channel == "" {
		channel = strings.ReplaceAll(table, ".", "_")
	}
	if len(channel) > 63 {
		return nil, fmt.Errorf("pgoutbox: Config.Channel %q is longer than PostgreSQL's 63-byte identifiers", channel)
	}
	if cfg.Lease < 0 {
		return nil, errors.New("pgoutbox: Config.Lease must not be negative")
	}
	o := &Outbox{prod: cfg.Producer, db: cfg.DB, table: table, channel: channel, notify: !cfg.NoNotify,
		lease: cfg.Lease, now: cfg.Now, lockSpace: lockSpace(table)}
	if o.lease == 0 {
		o.lease = outbox.DefaultLease
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.buildSQL()
	return o, nil
}

// Table returns the outbox's table name.
func (o *Outbox) Table() string { return o.table }

// Channel returns the LISTEN/NOTIFY channel EnqueueTx notifies.
func (o *Outbox) Channel() string { return o.channel }

// lockSpace is the first key of the advisory locks of a table's FIFO groups: a hash of its
// name, so that two outbox tables in one database do not share group locks.
func lockSpace(table string) int32 {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(table); i++ {
		h ^= uint32(table[i])
		h *= 16777619
	}
	return int32(h)
}

// EnqueueTx writes a job to the outbox in the caller's transaction tx: it is sent to SQS
// after tx commits, by a relay (or SendCommitted), and never if tx rolls back. The job is
// built and validated by Config.Producer's Prepare, with the same options as
// producer.Producer.Enqueue: its id is fixed now, so that a re-send is the same job. Unless
// Config.NoNotify, the transaction also notifies Channel, which wakes listening relays at
// commit. The returned message holds the job's id.
//
// A job id given with producer.WithID that is already in the outbox (its row pending, being
// sent, or dead) names the same job: EnqueueTx writes nothing for it and returns no error, so
// the business transaction goes on; the first row stays as it is (a dead one stays dead until
// a person retries it). Once that row was sent and deleted, the same id is written and sent
// again, and the worker's idempotency (keyed by the job's key, which defaults to its id) runs
// it once. The same holds for an id repeated within one EnqueueBatchTx: its first job is kept.
//
// For a FIFO queue EnqueueTx first takes the advisory lock of the job's message group, held
// until tx ends: it waits while another open transaction has written to the same group (see
// the package documentation).
func (o *Outbox) EnqueueTx(ctx context.Context, tx Tx, args jobs.Args, opts ...producer.Option) (producer.Message, error) {
	msgs, err := o.EnqueueBatchTx(ctx, tx, []producer.Request{{Args: args, Options: opts}})
	if err != nil {
		return producer.Message{}, err
	}
	return msgs[0], nil
}

// EnqueueRawTx is EnqueueTx for a job known by its kind and its args as JSON
// (producer.Producer.EnqueueRaw).
func (o *Outbox) EnqueueRawTx(ctx context.Context, tx Tx, kind string, args json.RawMessage, opts ...producer.Option) (producer.Message, error) {
	if o.prod == nil {
		return producer.Message{}, errNoProducer
	}
	m, err := o.prod.PrepareRaw(ctx, kind, args, opts...)
	if err != nil {
		return producer.Message{}, fmt.Errorf("pgoutbox: %w", err)
	}
	if err := o.insert(ctx, tx, []outbox.Entry{{Message: m}}); err != nil {
		return producer.Message{}, err
	}
	return m, nil
}

// EnqueueBatchTx writes many jobs in one statement, in order (a FIFO group's jobs are sent in
// this order). Every job is prepared first: one invalid job rejects the batch with nothing
// written, with an error naming the job's index.
func (o *Outbox) EnqueueBatchTx(ctx context.Context, tx Tx, reqs []producer.Request) ([]producer.Message, error) {
	if o.prod == nil {
		return nil, errNoProducer
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	entries := make([]outbox.Entry, len(reqs))
	msgs := make([]producer.Message, len(reqs))
	for i, r := range reqs {
		m, err := o.prod.Prepare(ctx, r.Args, r.Options...)
		if err != nil {
			if len(reqs) == 1 {
				return nil, fmt.Errorf("pgoutbox: %w", err)
			}
			return nil, fmt.Errorf("pgoutbox: job %d of %d: %w", i, len(reqs), err)
		}
		entries[i].Message, msgs[i] = m, m
	}
	if err := o.insert(ctx, tx, entries); err != nil {
		return nil, err
	}
	return msgs, nil
}

var errNoProducer = errors.New("pgoutbox: EnqueueTx needs Config.Producer (it prepares the jobs)")

// insert writes entries as they are, in order, through tx (EnqueueBatchTx, and the conformance
// suite's Harness). A zero CreatedAt is the transaction's time, a zero AvailableAt is
// CreatedAt; the state is pending.
func (o *Outbox) insert(ctx context.Context, tx Tx, entries []outbox.Entry) error {
	if tx == nil {
		return errors.New("pgoutbox: EnqueueTx needs the caller's transaction (tx is nil)")
	}
	if len(entries) == 0 {
		return nil
	}
	rows := make([]rowIn, len(entries))
	fifo := 0
	for i := range entries {
		e := &entries[i]
		m := &e.Message
		if m.ID == "" || m.Body == "" || m.QueueURL == "" {
			return fmt.Errorf("pgoutbox: %w: entry %d has no id, body or queue URL", outbox.ErrInvalid, i)
		}
		if strings.HasSuffix(m.QueueURL, ".fifo") {
			fifo = 1
		}
		attrs, err := encodeAttributes(m.Attributes)
		if err != nil {
			return fmt.Errorf("pgoutbox: job %s: %w", m.ID, err)
		}
		rows[i] = rowIn{ID: m.ID, QueueURL: m.QueueURL, Kind: m.Kind, Key: m.Key, GroupID: m.GroupID,
			DedupID: m.DeduplicationID, Body: m.Body, Attributes: attrs,
			RunAt: optTime(m.RunAt), CreatedAt: optTime(e.CreatedAt), AvailableAt: optTime(e.AvailableAt)}
	}
	param, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("pgoutbox: encode %d rows: %w", len(rows), err)
	}
	args := []any{string(param)}
	if o.notify {
		args = append(args, o.channel)
	}
	if _, err := tx.ExecContext(ctx, o.insertSQL[fifo], args...); err != nil {
		return fmt.Errorf("pgoutbox: insert %d jobs into %s: %w", len(rows), o.table, err)
	}
	return nil
}

// rowIn is one row of the insert's JSON parameter.
type rowIn struct {
	ID          string          `json:"id"`
	QueueURL    string          `json:"queue_url"`
	Kind        string          `json:"kind"`
	Key         string          `json:"job_key"`
	GroupID     string          `json:"group_id,omitempty"`
	DedupID     string          `json:"dedup_id,omitempty"`
	Body        string          `json:"body"`
	Attributes  json.RawMessage `json:"attributes,omitempty"`
	RunAt       *string         `json:"run_at,omitempty"`
	CreatedAt   *string         `json:"created_at,omitempty"`
	AvailableAt *string         `json:"available_at,omitempty"`
}

// optTime formats t for a JSON parameter (microseconds, PostgreSQL's precision), nil when zero.
func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.999999Z07:00")
	return &s
}
