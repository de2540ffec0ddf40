package dedup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Producer builds and sends jobs. *producer.Producer implements it.
type Producer interface {
	Prepare(ctx context.Context, args jobs.Args, opts ...producer.Option) (producer.Message, error)
	Send(ctx context.Context, msgs []producer.Message) ([]producer.Result, error)
	FIFO() bool
	RecordsStatus() bool
}

var _ Producer = (*producer.Producer)(nil)

// JobTable reads a job's record and writes the record of a job sent by a producer that does not
// record its jobs itself. *status.Table implements it.
type JobTable interface {
	GetJob(ctx context.Context, kind, key, jobID string) (status.Job, error)
	RecordEnqueued(ctx context.Context, kind, key, jobID, payloadHash string, at time.Time) error
	RecordScheduledJob(ctx context.Context, kind, key, jobID, payloadHash string, runAt, at time.Time) error
}

var _ JobTable = (*status.Table)(nil)

// Scheduler creates and moves the one-time schedules of debounced jobs, which send them to the
// scheduler's own queue: the producer's default queue. *schedule.Client implements it.
type Scheduler interface {
	ScheduleJob(ctx context.Context, env jobs.Envelope, at time.Time, groupID string) (string, error)
	RescheduleJob(ctx context.Context, env jobs.Envelope, at time.Time, groupID string) (string, error)
}

// QueueScheduler is a Scheduler that can send a job to any queue of the stack, given by the
// queue's ARN: with a producer of several queues (producer.Config.Queues), a debounced job of a
// kind routed to a queue other than the default waits in a schedule that sends it to that queue,
// created with ScheduleJobOn and moved with RescheduleJobOn. *schedule.Client implements it.
type QueueScheduler interface {
	Scheduler
	ScheduleJobOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, groupID string) (string, error)
	RescheduleJobOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, groupID string) (string, error)
}

var _ QueueScheduler = (*schedule.Client)(nil)

// queueLister is a Producer that knows its queues. *producer.Producer implements it.
type queueLister interface {
	Queues() *queues.Set
}

var _ queueLister = (*producer.Producer)(nil)

// DynamoDBAPI is the part of the DynamoDB client this package uses; *dynamodb.Client
// implements it.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Config configures an [Enqueuer]. Producer, DynamoDB, Table and Jobs are required; the zero
// value of every other field is its default.
type Config struct {
	// Producer builds and sends the jobs (*producer.Producer). Required. With its own
	// Config.Status it records each job it sends; without one the Enqueuer writes that record
	// through Jobs, since a unique key's job is judged by its record.
	Producer Producer
	// DynamoDB writes the items of unique keys, debounced keys and throttles
	// (dynamodb.NewFromConfig(cfg)). Required.
	DynamoDB DynamoDBAPI
	// Table is the job table (the idempotency store's and pkg/status's): the items live there,
	// under partition keys of their own (docs/TABLE.md). Required.
	Table string
	// Jobs reads and writes job records in that table (*status.Table, in the table's layout).
	// Required.
	Jobs JobTable
	// Scheduler moves the one-time schedules of debounced jobs (*schedule.Client, whose
	// QueueARN is the producer's default queue). A debounced job goes to the queue the producer
	// prepared it for: the jobs of the default queue through ScheduleJob and RescheduleJob, those
	// of another queue of a producer of several queues through the ScheduleJobOn and
	// RescheduleJobOn of a [QueueScheduler], with the queue's ARN from the producer's queue set
	// (without them, such a Debounce is refused with ErrNeedsScheduler). Defaults to nil:
	// Debounce is refused with ErrNeedsScheduler.
	Scheduler Scheduler
	// LocalScheduler says that the schedules are fired by the local schedule.Dispatcher (the
	// embedded emulator), which never fires a schedule before its time. EventBridge Scheduler
	// fires within the minute of a schedule's time, so on AWS a debounced job's schedule is not
	// moved once less than a minute (plus FireMargin) is left, and a Debounce.Period under
	// that is refused. Defaults to false (AWS).
	LocalScheduler bool
	// FireMargin is kept before a schedule's earliest firing on top of the scheduler's precision:
	// a debounced job whose schedule may fire within it is not moved any more; the next enqueue
	// of its key starts a new job. Defaults to 5 s, or 1 s with LocalScheduler.
	FireMargin time.Duration
	// ReserveLease bounds the time between the write that reserves a unique key and the job's
	// record (the producer's queued record, or the Enqueuer's): the send runs under a deadline of
	// the lease less a second, and a reservation whose job has no record once the lease is over
	// was never sent (the process stopped in between) and is taken over by the next enqueue of
	// the key. Defaults to 1 minute; at least 2 s.
	ReserveLease time.Duration
	// RecordTTL is the shortest time the job table keeps a finished job's record: the worker's
	// idempotency.MiddlewareConfig.SucceededTTL. A Unique rule for any state (States empty)
	// judges a key by its job's record, so its Window must not be longer. Defaults to 24 hours
	// (SucceededTTL's default).
	RecordTTL time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Enqueuer enqueues jobs under a deduplication rule: [Unique], [Debounce] or [Throttle]. It is
// safe for concurrent use.
type Enqueuer struct {
	prod         Producer
	ddb          DynamoDBAPI
	table        string
	jobs         JobTable
	sched        Scheduler
	local        bool
	fireMargin   time.Duration
	reserveLease time.Duration
	recordTTL    time.Duration
	now          func() time.Time
}

// Config's defaults, and the scheduler's precision.
const (
	DefaultReserveLease = time.Minute
	DefaultRecordTTL    = 24 * time.Hour
	DefaultFireMargin   = 5 * time.Second
	// DefaultLocalFireMargin is FireMargin's default with LocalScheduler: the local dispatcher
	// never fires early, so the margin only covers the time a move takes.
	DefaultLocalFireMargin = time.Second
	// SchedulerPrecision is how early EventBridge Scheduler may fire a one-time schedule: it
	// invokes the target within the minute of the schedule's time.
	SchedulerPrecision = time.Minute
	// minReserveLease leaves the send a second at least.
	minReserveLease = 2 * time.Second
)

// New checks cfg and returns an Enqueuer. Errors wrap ErrInvalid and name the field.
func New(cfg Config) (*Enqueuer, error) {
	switch {
	case isNil(cfg.Producer):
		return nil, invalid("Config.Producer is nil: pass a *producer.Producer")
	case isNil(cfg.DynamoDB):
		return nil, invalid("Config.DynamoDB is nil: pass dynamodb.NewFromConfig(cfg)")
	case cfg.Table == "":
		return nil, invalid("Config.Table is empty: name the job table")
	case isNil(cfg.Jobs):
		return nil, invalid("Config.Jobs is nil: pass the job table's *status.Table")
	case cfg.ReserveLease != 0 && cfg.ReserveLease < minReserveLease:
		return nil, invalid("Config.ReserveLease %v is below %v", cfg.ReserveLease, minReserveLease)
	case cfg.RecordTTL < 0:
		return nil, invalid("Config.RecordTTL %v is negative", cfg.RecordTTL)
	case cfg.FireMargin < 0:
		return nil, invalid("Config.FireMargin %v is negative", cfg.FireMargin)
	}
	e := &Enqueuer{
		prod: cfg.Producer, ddb: cfg.DynamoDB, table: cfg.Table, jobs: cfg.Jobs, sched: cfg.Scheduler,
		local: cfg.LocalScheduler, fireMargin: cfg.FireMargin, reserveLease: cfg.ReserveLease, recordTTL: cfg.RecordTTL, now: cfg.Now,
	}
	if isNil(e.sched) {
		e.sched = nil
	}
	if e.fireMargin == 0 {
		e.fireMargin = DefaultFireMargin
		if e.local {
			e.fireMargin = DefaultLocalFireMargin
		}
	}
	if e.reserveLease == 0 {
		e.reserveLease = DefaultReserveLease
	}
	if e.recordTTL == 0 {
		e.recordTTL = DefaultRecordTTL
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e, nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Outcome is what became of one enqueue.
type Outcome string

// Outcomes.
const (
	// Enqueued: the job was sent (or handed to the scheduler, for a delayed one).
	Enqueued Outcome = "enqueued"
	// Duplicate: another job holds the unique key; nothing was sent, and Result.ID is that
	// job's id.
	Duplicate Outcome = "duplicate"
	// Debounced: the job waits in its key's one-time schedule, which this enqueue moved (or
	// created) with its args; Result.ID is the job that will run, Result.RunAt when.
	Debounced Outcome = "debounced"
	// Throttled: the key had its Limit of enqueues in the current period; nothing was sent, and
	// the error is a *ThrottledError.
	Throttled Outcome = "throttled"
)

// Result is what became of one enqueue.
type Result struct {
	// Result is the producer's result for an Enqueued job. For a Duplicate, ID, Kind and Key
	// are the existing job's; for a Debounced one, ID is the job that will run, RunAt when it
	// is due and Schedule its one-time schedule.
	producer.Result
	// Outcome is what happened.
	Outcome Outcome
	// RuleKey is the key the rule applied to: Unique.Key, Debounce.Key or Throttle.Key, or the
	// one derived from the args ("args:" + a hash).
	RuleKey string
	// State is the existing job's state when a Duplicate was judged by its record ("" when its
	// record was not read: a reservation still in its lease, or a rule for any state).
	State idempotency.State
	// Events is how many enqueues the debounced job has gathered, this one included.
	Events int
	// Count is how many enqueues the throttled key has had in the current period, this one
	// included when it was accepted; Limit is the rule's.
	Count, Limit int
	// RetryAt is when a Throttled key's period ends.
	RetryAt time.Time
	// ReleaseErr is why a unique key's reservation could not be released after its send failed
	// (it then lapses at the end of Config.ReserveLease), or nil.
	ReleaseErr error
}

// Errors.
var (
	// ErrInvalid is producer.ErrInvalid: every error that refuses a rule, an option or a Config
	// before anything is written wraps it.
	ErrInvalid = producer.ErrInvalid
	// ErrThrottled is wrapped by the *ThrottledError of an enqueue a Throttle dropped.
	ErrThrottled = errors.New("throttled: the key had its limit of enqueues in this period")
	// ErrNeedsScheduler is wrapped (with ErrInvalid) when a Debounce is asked of an Enqueuer
	// without Config.Scheduler.
	ErrNeedsScheduler = producer.ErrNeedsScheduler
)

// ThrottledError is the error of an enqueue that a Throttle dropped: nothing was sent.
type ThrottledError struct {
	Kind, Key string
	Limit     int
	Period    time.Duration
	// RetryAt is when the current period ends and the key takes enqueues again.
	RetryAt time.Time
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("dedup: %s enqueue of key %q dropped: it had %d enqueues in the period of %v that ends at %s (Throttle)",
		e.Kind, e.Key, e.Limit, e.Period, e.RetryAt.UTC().Format(time.RFC3339))
}

// Is makes the error match ErrThrottled.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

type ruleError struct {
	msg  string
	also error
}

func (e *ruleError) Error() string { return e.msg }

func (e *ruleError) Is(target error) bool {
	return target == ErrInvalid || (e.also != nil && target == e.also)
}

func invalid(format string, args ...any) error {
	return &ruleError{msg: "dedup: " + fmt.Sprintf(format, args...)}
}

// Rule is a deduplication rule: Unique, Debounce or Throttle.
type Rule interface {
	name() string
}

func (Unique) name() string   { return "Unique" }
func (Debounce) name() string { return "Debounce" }
func (Throttle) name() string { return "Throttle" }

// Enqueue enqueues a job under rule, with the producer's options. A duplicate (Unique) and a
// debounced job (Debounce) are results, with a nil error; a throttled enqueue is a
// *ThrottledError (ErrThrottled), since its job will not run. Bad rules and options wrap
// ErrInvalid, before anything is written.
func (e *Enqueuer) Enqueue(ctx context.Context, args jobs.Args, rule Rule, opts ...producer.Option) (Result, error) {
	if rule == nil || isNil(rule) {
		return Result{}, invalid("rule is nil: pass a dedup.Unique, dedup.Debounce or dedup.Throttle")
	}
	switch r := rule.(type) {
	case Unique:
		return e.unique(ctx, args, r, opts)
	case *Unique:
		return e.unique(ctx, args, *r, opts)
	case Debounce:
		return e.debounce(ctx, args, r, opts)
	case *Debounce:
		return e.debounce(ctx, args, *r, opts)
	case Throttle:
		return e.throttle(ctx, args, r, opts)
	case *Throttle:
		return e.throttle(ctx, args, *r, opts)
	}
	return Result{}, invalid("rule %T is not a dedup rule", rule)
}

// EnqueueRaw is Enqueue for a job known only by its kind and its args as JSON
// (producer.EnqueueRaw), for tools, gateways and other languages.
func (e *Enqueuer) EnqueueRaw(ctx context.Context, kind string, args json.RawMessage, rule Rule, opts ...producer.Option) (Result, error) {
	if err := jobs.ValidateKind(kind); err != nil {
		return Result{}, invalid("%v", err)
	}
	if err := producer.CheckArgsJSON("args", args); err != nil {
		return Result{}, invalid("%v", err)
	}
	return e.Enqueue(ctx, rawArgs{kind: kind, args: args}, rule, opts...)
}

// rawArgs carries already-encoded args through the producer's Prepare.
type rawArgs struct {
	kind string
	args json.RawMessage
}

func (a rawArgs) Kind() string                 { return a.kind }
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.args, nil }

// prepare builds the job with the producer; its errors already wrap producer.ErrInvalid.
func (e *Enqueuer) prepare(ctx context.Context, args jobs.Args, opts []producer.Option) (producer.Message, jobs.Envelope, error) {
	m, err := e.prod.Prepare(ctx, args, opts...)
	if err != nil {
		return m, jobs.Envelope{}, err
	}
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		return m, env, fmt.Errorf("dedup: the producer's envelope of %s: %w", m.ID, err)
	}
	return m, env, nil
}
