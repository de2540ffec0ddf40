package batch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// DynamoDBAPI is the part of the DynamoDB client this package uses; *dynamodb.Client implements
// it. Producers that build batches need TransactWriteItems, GetItem and UpdateItem; the worker
// (Store) those and BatchGetItem; listings Query and BatchGetItem.
type DynamoDBAPI interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Errors this package returns (wrapped, with what they concern).
var (
	// ErrInvalid: a bad argument or Config field; the message names it.
	ErrInvalid = errors.New("batch: invalid argument")
	// ErrExists: a batch or chain with that id exists already (ids cannot be reused while the
	// item is kept, Config.TTL).
	ErrExists = errors.New("batch: the id is taken")
	// ErrNotFound: no batch or chain with that id (never created, or expired).
	ErrNotFound = errors.New("batch: not found")
	// ErrSealed: the batch no longer takes children (sealed, finished or cancelled).
	ErrSealed = errors.New("batch: the batch is sealed")
	// ErrUnknownKind: a callback or chain step of a kind the Config.Registry does not know.
	ErrUnknownKind = errors.New("batch: kind not registered")
	// ErrTooLarge: a callback, chain step or chain larger than a batch or chain can keep.
	ErrTooLarge = errors.New("batch: too large")
	// ErrNotSent: Add counted children that it could not send (see AddError).
	ErrNotSent = errors.New("batch: children counted but not sent")
)

// Defaults of Config.
const (
	DefaultTTL      = 30 * 24 * time.Hour
	DefaultChildTTL = 15 * 24 * time.Hour
)

// MaxNotSucceeded is how many ids of children that did not succeed a batch keeps for its summary
// (Summary.NotSucceeded); Summary.More counts the others, and Client.Get lists every child.
const MaxNotSucceeded = 100

// MaxChainSteps is the longest chain: its first transaction writes the chain, every later step
// and the first step's outbox item, within DynamoDB's 100 actions.
const MaxChainSteps = 64

// Config configures a [Client]. Client, Table and Outbox are required; every other field's zero
// value is its default.
type Config struct {
	// Client is the DynamoDB client, usually dynamodb.NewFromConfig(cfg). Required.
	Client DynamoDBAPI
	// Table is the job table (the idempotency store's). Required.
	Table string
	// Outbox is the DynamoDB outbox whose relay sends the callbacks and chain steps (and the
	// children of AddThroughOutbox). Its table is written in the same transactions as the job
	// table. Required.
	Outbox *dynamooutbox.Outbox
	// Registry, when set, is asked at build time for the kinds of callbacks and chain steps: one
	// that is not registered is refused with ErrUnknownKind before anything is written. Give the
	// worker's registry where the producer links it. Defaults to nil: not checked.
	Registry *jobs.Registry
	// Shards and Layout must be the job table's (idempotency.DynamoDBConfig): they say where a
	// child's record is. Default to idempotency.DefaultShards and idempotency.LayoutByID.
	Shards int
	Layout idempotency.Layout
	// TTL is how long a batch's or chain's items are kept after it was created; after it the
	// batch is gone (its late children finish without counting) and its id may be used again.
	// Defaults to 30 days (SQS keeps a message at most 14).
	TTL time.Duration
	// ChildTTL is the shortest expiry a settled child's record gets (instead of the middleware's
	// SucceededTTL of a day): long enough that a duplicate of the child arriving later is
	// recognised and never counted twice. Defaults to 15 days.
	ChildTTL time.Duration
	// OnOutbox, when set, is called after a transaction put a callback or chain step into the
	// outbox: a local relay can start a pass at once (outbox.RelayConfig.Wake), where no stream
	// tells it. Defaults to nil.
	OnOutbox func()
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
	// Logger receives a line per child whose batch or chain could not count it. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Client builds batches and chains, follows them and cancels them, on the job table. It is safe
// for concurrent use. The worker counts children through a [Store] made with WrapStore.
type Client struct {
	cfg    Config
	status *status.Table
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: Config.Client is nil", ErrInvalid)
	case len(cfg.Table) < 3 || len(cfg.Table) > 255:
		return nil, fmt.Errorf("%w: Config.Table %q must be 3-255 characters", ErrInvalid, cfg.Table)
	case cfg.Outbox == nil:
		return nil, fmt.Errorf("%w: Config.Outbox is nil: callbacks and chain steps are sent through the DynamoDB outbox", ErrInvalid)
	case cfg.Outbox.Table() == cfg.Table:
		return nil, fmt.Errorf("%w: Config.Outbox writes to the job table %s: give it its own table (dynamooutbox.TableInput)", ErrInvalid, cfg.Table)
	case cfg.TTL < 0 || cfg.ChildTTL < 0:
		return nil, fmt.Errorf("%w: Config.TTL and ChildTTL must not be negative", ErrInvalid)
	case !cfg.Layout.Valid():
		return nil, fmt.Errorf("%w: Config.Layout %v is not a layout", ErrInvalid, cfg.Layout)
	}
	if cfg.Shards == 0 {
		cfg.Shards = idempotency.DefaultShards
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.ChildTTL == 0 {
		cfg.ChildTTL = DefaultChildTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := status.New(status.Config{Client: cfg.Client, Table: cfg.Table, Shards: cfg.Shards, Layout: cfg.Layout, Now: cfg.Now})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Client{cfg: cfg, status: st}, nil
}

// Table returns the job table's name.
func (c *Client) Table() string { return c.cfg.Table }

// checkKind refuses a kind the registry does not know (when there is a registry).
func (c *Client) checkKind(what, kind string) error {
	if c.cfg.Registry == nil {
		return nil
	}
	if _, ok := c.cfg.Registry.Lookup(kind); !ok {
		return fmt.Errorf("%w: %s kind %q (registered: %d kinds)", ErrUnknownKind, what, kind, len(c.cfg.Registry.Kinds()))
	}
	return nil
}

// get reads one item with a strongly consistent read (nil when there is none).
func (c *Client) get(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	out, err := c.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.cfg.Table), Key: avKey(pk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("batch: get %s: %w", pk, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// txError is a transaction DynamoDB cancelled: the reasons, one per action.
type txError struct {
	reasons []types.CancellationReason
	err     error
}

func (e *txError) Error() string { return e.err.Error() }
func (e *txError) Unwrap() error { return e.err }

// failed reports whether action i was refused by its condition. With no reasons (a backend that
// gives none) every action counts as possibly refused.
func (e *txError) failed(i int) bool {
	if len(e.reasons) == 0 {
		return true
	}
	return i < len(e.reasons) && aws.ToString(e.reasons[i].Code) == "ConditionalCheckFailed"
}

// item returns the item DynamoDB returned with action i's refusal (ALL_OLD), if any.
func (e *txError) item(i int) map[string]types.AttributeValue {
	if i < len(e.reasons) {
		return e.reasons[i].Item
	}
	return nil
}

// conflictPolicy retries a transaction that conflicts or is throttled: up to 12 attempts with
// full-jitter backoff from 25 ms capped at 500 ms (about 2.5 s of waits on average at most),
// longer than ddbretry's default because every child of a busy batch updates the batch's item.
var conflictPolicy = ddbretry.Policy{Attempts: 12, Cap: 500 * time.Millisecond}

// transact runs one TransactWriteItems, sent again while conflicts or throttling cancel it
// (conflictPolicy), with one idempotency token for all its attempts. A cancellation for any other
// reason is a *txError.
func (c *Client) transact(ctx context.Context, items []types.TransactWriteItem) error {
	token := newToken()
	_, err := ddbretry.Call(ctx, conflictPolicy, func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		return c.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: items, ClientRequestToken: aws.String(token),
		})
	})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && !ddbretry.Retryable(err) {
		return &txError{reasons: tce.CancellationReasons, err: fmt.Errorf("batch: transaction of %d actions cancelled: %w", len(items), err)}
	}
	return fmt.Errorf("batch: transaction of %d actions: %w", len(items), err)
}

// newToken returns a ClientRequestToken (at most 36 characters).
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// outboxed tells OnOutbox that a transaction put a job into the outbox.
func (c *Client) outboxed() {
	if c.cfg.OnOutbox != nil {
		c.cfg.OnOutbox()
	}
}
