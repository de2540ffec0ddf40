package dynamooutbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// DynamoDBAPI is the part of the DynamoDB client the outbox uses; *dynamodb.Client implements
// it. Producers need only TransactWriteItems; relays and inspectors the rest.
type DynamoDBAPI interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// StatusWriter builds the write of a job's "queued" record in the job table, for the outbox
// transaction to carry. *status.Table implements it.
type StatusWriter interface {
	EnqueuedWrite(kind, key, jobID, payloadHash string, at time.Time) (types.TransactWriteItem, error)
}

// Defaults of Config.
const (
	DefaultCompressAbove = 1024
	DefaultConcurrency   = 16
)

// Config configures an [Outbox]. Client and Table are required; the zero value of every other
// field is its default.
type Config struct {
	// Client is the DynamoDB client, usually dynamodb.NewFromConfig(cfg). Required.
	Client DynamoDBAPI
	// Table is the outbox table (TableInput). Required.
	Table string
	// Status, when set, makes every job's transaction also write its "queued" record in the job
	// table (*status.Table), so the job's status exists from the commit on. The record is
	// written only where the key has none (a later state is never overwritten), so it never
	// fails the transaction. Defaults to nil: no status record until the worker claims the job.
	Status StatusWriter
	// SweepAfter is how long a job written less than that long ago is left to the stream relay:
	// Claim (the sweeper's path) takes a job that was never attempted only once it is that old.
	// Retries, jobs released from a FIFO group, deferred jobs and retried dead jobs are due as
	// soon as their available_at has passed (each of those writes moves it off created_at, which
	// is how a job not tried yet is told apart). Set it to
	// a little more than the stream relay's usual delay (a minute on AWS) where a stream relay
	// runs, and leave it 0 where the sweeper is the only relay. Defaults to 0.
	SweepAfter time.Duration
	// KeepSent keeps a sent job in the table, marked sent, for this long (DynamoDB's TTL then
	// deletes it) instead of deleting it when SQS has accepted it. Both cost one write; keeping
	// them costs storage and makes FIFO group reads step over them. Defaults to 0: delete.
	KeepSent time.Duration
	// CompressAbove stores envelopes longer than this many bytes gzip-compressed, so that
	// large jobs fit DynamoDB's 400 KB item and cost fewer write units. -1 never compresses.
	// Defaults to 1024.
	CompressAbove int
	// Concurrency bounds the DynamoDB requests a Claim, Complete or List runs at once.
	// Defaults to 16.
	Concurrency int
	// Now is the clock of CreatedAt (the commit time written into new jobs) and of Retry.
	// Defaults to time.Now.
	Now func() time.Time
	// Logger receives a line per item a claim or a write-back could not handle. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Outbox is a transactional outbox on one DynamoDB table. It builds the writes that put jobs
// into the outbox inside the caller's TransactWriteItems (Prepare, Transact), and it is the
// [outbox.Store] the relays claim from and the [outbox.Inspector] operators read. It is safe
// for concurrent use.
type Outbox struct {
	cfg     Config
	lastOrd atomic.Int64

	// keys remembers the key of every entry this Outbox claimed until it is completed: a FIFO
	// entry's key is not derived from its id.
	keysMu sync.Mutex
	keys   map[string]claimRef
}

var (
	_ outbox.Store     = (*Outbox)(nil)
	_ outbox.Inspector = (*Outbox)(nil)
)

// New checks cfg and returns an Outbox.
func New(cfg Config) (*Outbox, error) {
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: Config.Client is nil", outbox.ErrInvalid)
	case len(cfg.Table) < 3 || len(cfg.Table) > 255:
		return nil, fmt.Errorf("%w: Config.Table %q must be 3-255 characters", outbox.ErrInvalid, cfg.Table)
	case cfg.SweepAfter < 0 || cfg.KeepSent < 0 || cfg.Concurrency < 0 || cfg.CompressAbove < -1:
		return nil, fmt.Errorf("%w: Config.SweepAfter, KeepSent, Concurrency and CompressAbove must not be negative (CompressAbove -1: never)", outbox.ErrInvalid)
	}
	if cfg.CompressAbove == 0 {
		cfg.CompressAbove = DefaultCompressAbove
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Outbox{cfg: cfg, keys: map[string]claimRef{}}, nil
}

// Table returns the outbox table's name.
func (o *Outbox) Table() string { return o.cfg.Table }

// Job is one job ready to be written into the outbox: add Items to your TransactWriteItems
// (Transact does it for you).
type Job struct {
	// Entry is the job as the outbox keeps it: the message (its id is the job id), CreatedAt
	// and AvailableAt.
	Entry outbox.Entry
	// Items are the job's writes: the outbox item (a Put that fails if the job id is already in
	// the outbox) and, with Config.Status, the job's queued record (an Update of the job table).
	Items []types.TransactWriteItem
}

// ID returns the job's id.
func (j *Job) ID() string { return j.Entry.ID() }

// Prepare validates a job with the producer of its queue (p.Prepare: the job id is fixed now,
// the trace context copied) and returns its outbox writes. Nothing is written: put j.Items into
// the transaction of your business writes, or pass the job to Transact. Errors wrap
// outbox.ErrInvalid; a job whose item would exceed 400 KB wraps ErrLimit as well.
func (o *Outbox) Prepare(ctx context.Context, p *producer.Producer, args jobs.Args, opts ...producer.Option) (Job, error) {
	m, err := p.Prepare(ctx, args, opts...)
	if err != nil {
		return Job{}, fmt.Errorf("%w: %w", outbox.ErrInvalid, err)
	}
	return o.PrepareMessage(m)
}

// PrepareRaw is Prepare for a job known by its kind and its args as JSON (producer.PrepareRaw).
func (o *Outbox) PrepareRaw(ctx context.Context, p *producer.Producer, kind string, args json.RawMessage, opts ...producer.Option) (Job, error) {
	m, err := p.PrepareRaw(ctx, kind, args, opts...)
	if err != nil {
		return Job{}, fmt.Errorf("%w: %w", outbox.ErrInvalid, err)
	}
	return o.PrepareMessage(m)
}

// PrepareMessage returns the outbox writes of a message the caller prepared itself
// (producer.Prepare), created now.
func (o *Outbox) PrepareMessage(m producer.Message) (Job, error) {
	now := o.cfg.Now()
	return o.EntryJob(outbox.Entry{Message: m, CreatedAt: now, AvailableAt: now})
}

// EntryJob returns the outbox writes of an entry, keeping its CreatedAt and AvailableAt (zero:
// CreatedAt); its state is pending and its attempts are kept. Jobs built by one Outbox are
// sorted in the order EntryJob (or Prepare) built them, which is the order a FIFO group's jobs
// are sent in.
func (o *Outbox) EntryJob(e outbox.Entry) (Job, error) {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = o.cfg.Now()
	}
	if e.AvailableAt.IsZero() {
		e.AvailableAt = e.CreatedAt
	}
	e.State, e.LockedBy, e.LockedUntil, e.LastError, e.Corrupt = outbox.StatePending, "", time.Time{}, "", ""
	if size := e.Message.Size(); size > producer.MaxMessageSize {
		return Job{}, limitErr("job %s (%s): its message is %d bytes, above the producer's limit of %d bytes (SQS's 1 MiB minus 8 KiB for the worker)",
			e.ID(), e.Message.Kind, size, producer.MaxMessageSize)
	}
	item, _, err := encodeItem(&e, ordKey(o.nextOrd(e.CreatedAt), e.ID()), o.cfg.CompressAbove)
	if err != nil {
		return Job{}, err
	}
	if size := ItemSize(item); size > MaxItemSize {
		return Job{}, limitErr("job %s (%s): its outbox item is %d bytes, above DynamoDB's item limit of %d bytes (400 KB), even with the envelope compressed: keep large payloads elsewhere (S3) and pass a reference",
			e.ID(), e.Message.Kind, size, MaxItemSize)
	}
	j := Job{Entry: e, Items: []types.TransactWriteItem{{Put: &types.Put{
		TableName:                aws.String(o.cfg.Table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
	}}}}
	if o.cfg.Status != nil {
		hash, err := e.Message.PayloadHash()
		if err != nil {
			return Job{}, fmt.Errorf("%w: %w", outbox.ErrInvalid, err)
		}
		w, err := o.cfg.Status.EnqueuedWrite(e.Message.Kind, e.Message.Key, e.ID(), hash, e.CreatedAt)
		if err != nil {
			return Job{}, fmt.Errorf("dynamooutbox: the queued record of job %s: %w", e.ID(), err)
		}
		j.Items = append(j.Items, w)
	}
	return j, nil
}

// nextOrd returns the commit-order time of a job created at t: t in unix nanoseconds, but always
// after the last one this Outbox gave, so that jobs built one after another keep their order.
func (o *Outbox) nextOrd(t time.Time) int64 {
	ns := t.UnixNano()
	for {
		last := o.lastOrd.Load()
		next := max(ns, last+1)
		if o.lastOrd.CompareAndSwap(last, next) {
			return next
		}
	}
}

// CheckTransaction reports, before the call, what DynamoDB would refuse in a TransactWriteItems
// of these actions: more than MaxTransactionActions, an action that is not exactly one of Put,
// Update, Delete and ConditionCheck, an item above MaxItemSize, more than MaxTransactionSize in
// all, or two actions on one item (where the key is known: the outbox's items, and every Update,
// Delete and ConditionCheck). Errors wrap ErrLimit (sizes and counts) or outbox.ErrInvalid.
// Updates and Deletes count with their key and values only: the item they change is not known
// before the call.
func (o *Outbox) CheckTransaction(actions []types.TransactWriteItem) error {
	return checkTransaction(actions, o.cfg.Table)
}

// Transact runs one TransactWriteItems with the actions of in (your business writes; its
// ClientRequestToken and other fields are kept) followed by the jobs' items: either all of them
// are written, or none, and no job is enqueued. The limits are checked first
// (CheckTransaction). When DynamoDB cancels the transaction, the error is a *TransactionError
// that says which action failed and why.
//
// A transaction that DynamoDB cancelled only because another transaction or write held one of
// its items (TransactionConflict) or because of throttling (ThrottlingError,
// ProvisionedThroughputExceeded) wrote nothing, so Transact sends the same request again, at most
// 6 times in all with a jittered backoff (at most 775 ms of waits): two enqueues of one job key
// at once, whose transactions both write the key's queued record, both commit. Every condition,
// yours included, is evaluated again by each request; a cancellation with any other reason (a
// refused condition above all) is returned at once. A request whose outcome is unknown (a
// timeout, a network error) is the SDK's to retry, with the same ClientRequestToken.
func (o *Outbox) Transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, jobs ...Job) (*dynamodb.TransactWriteItemsOutput, error) {
	tx := &dynamodb.TransactWriteItemsInput{}
	if in != nil {
		*tx = *in
	}
	business := len(tx.TransactItems)
	tx.TransactItems = append([]types.TransactWriteItem(nil), tx.TransactItems...)
	for i := range jobs {
		if len(jobs[i].Items) == 0 {
			return nil, fmt.Errorf("%w: job %d has no items: build it with Prepare", outbox.ErrInvalid, i)
		}
		tx.TransactItems = append(tx.TransactItems, jobs[i].Items...)
	}
	if err := o.CheckTransaction(tx.TransactItems); err != nil {
		return nil, fmt.Errorf("dynamooutbox: %w", err)
	}
	// A transaction cancelled only by conflicts or throttling wrote nothing: it is sent again,
	// unchanged (internal/ddbretry). Each request carries the caller's ClientRequestToken, or
	// none, so that the SDK draws a fresh one: the token of a cancelled request never committed.
	token := tx.ClientRequestToken
	sent := 0
	out, err := ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		sent++
		tx.ClientRequestToken = token
		return o.cfg.Client.TransactWriteItems(ctx, tx, keepConnection)
	})
	if err != nil {
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			te := newTransactionError(err, tce.CancellationReasons, tx.TransactItems, business, jobs)
			te.Attempts = sent
			return nil, te
		}
		return nil, fmt.Errorf("dynamooutbox: TransactWriteItems of %d actions (%d jobs): %w", len(tx.TransactItems), len(jobs), err)
	}
	return out, nil
}

// TransactionError is the error of a transaction DynamoDB cancelled: nothing was written and no
// job was enqueued.
type TransactionError struct {
	// Reasons are DynamoDB's, one per action, in order ("None" for actions that did not fail).
	Reasons []types.CancellationReason
	// Actions describe the actions, in order: "action 0 (table orders)", "the outbox item of job
	// 01J…", "the queued record of job 01J…".
	Actions []string
	// Business is how many of the actions were the caller's own (the first ones).
	Business int
	// Attempts is how many times Transact sent the transaction: more than 1 when conflicts or
	// throttling cancelled the earlier ones.
	Attempts int
	err      error
}

func newTransactionError(err error, reasons []types.CancellationReason, actions []types.TransactWriteItem, business int, js []Job) *TransactionError {
	te := &TransactionError{Reasons: reasons, Business: business, err: err}
	for i := 0; i < business; i++ {
		table, k, _, _ := describeAction(actions[i], "")
		d := fmt.Sprintf("action %d (table %s", i, table)
		if k != "" {
			d += ", key " + k
		}
		te.Actions = append(te.Actions, d+")")
	}
	for i := range js {
		te.Actions = append(te.Actions, "the outbox item of job "+js[i].ID())
		for range js[i].Items[1:] {
			te.Actions = append(te.Actions, "the queued record of job "+js[i].ID())
		}
	}
	return te
}

// Failed returns the indexes of the actions whose cancellation reason is not "None".
func (e *TransactionError) Failed() []int {
	var out []int
	for i, r := range e.Reasons {
		if c := aws.ToString(r.Code); c != "" && c != "None" {
			out = append(out, i)
		}
	}
	return out
}

// ConditionFailed reports whether action i was refused by its condition.
func (e *TransactionError) ConditionFailed(i int) bool {
	return i >= 0 && i < len(e.Reasons) && aws.ToString(e.Reasons[i].Code) == "ConditionalCheckFailed"
}

func (e *TransactionError) Error() string {
	var parts []string
	for _, i := range e.Failed() {
		what := fmt.Sprintf("action %d", i)
		if i < len(e.Actions) {
			what = e.Actions[i]
		}
		p := what + ": " + aws.ToString(e.Reasons[i].Code)
		if m := aws.ToString(e.Reasons[i].Message); m != "" {
			p += " (" + m + ")"
		}
		if aws.ToString(e.Reasons[i].Code) == "ConditionalCheckFailed" && i >= e.Business && strings.HasPrefix(what, "the outbox item") {
			p += ": that job id is already in the outbox"
		}
		parts = append(parts, p)
	}
	sent := ""
	if e.Attempts > 1 {
		sent = fmt.Sprintf(" (sent %d times)", e.Attempts)
	}
	if len(parts) == 0 {
		return "dynamooutbox: transaction cancelled" + sent + " (" + e.err.Error() + "); nothing was written and no job was enqueued"
	}
	return "dynamooutbox: transaction cancelled" + sent + ": " + strings.Join(parts, "; ") + "; nothing was written and no job was enqueued"
}

// Unwrap returns the SDK's error (a *types.TransactionCanceledException).
func (e *TransactionError) Unwrap() error { return e.err }
