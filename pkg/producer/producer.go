package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// SQSAPI is the part of the SQS client the producer uses. *sqs.Client implements it.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Config configures a Producer. SQS and QueueURL are required; the zero value of every other
// field is its default.
type Config struct {
	// SQS sends the messages, usually sqs.NewFromConfig(cfg). Required.
	SQS SQSAPI
	// QueueURL is the queue jobs are sent to. Required. A URL ending in ".fifo" is a FIFO queue:
	// its jobs need a message group (WithGroupID) and cannot be delayed.
	QueueURL string
	// IDs makes job ids. Defaults to ULIDs from Clock and math/rand/v2.
	IDs jobs.IDSource
	// Clock gives the envelope's enqueued_at. Defaults to time.Now.
	Clock func() time.Time
	// MaxRetries is how many more times EnqueueBatch sends a job that SQS failed inside a
	// successful SendMessageBatch call with a retryable code (throttling, a server fault).
	// Whole-call errors are retried by the SDK's own retryer, not here. Defaults to 3; -1
	// disables these retries.
	MaxRetries int
	// RetryBaseDelay is the wait before the first retry; each retry doubles it, up to
	// RetryMaxDelay, and waits a random time between half of it and all of it. Defaults to 50ms.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps the wait between retries. Defaults to 1s.
	RetryMaxDelay time.Duration
	// Sleep waits d between retries, returning ctx's error early when ctx is done. Defaults to
	// a timer; tests inject one that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the retry jitter. Defaults to math/rand/v2's Float64.
	Rand func() float64
	// Scheduler, when set, delivers jobs delayed beyond 15 minutes (and any delayed job on a FIFO
	// queue) through a one-time EventBridge Scheduler schedule; *schedule.Client implements it.
	// Defaults to nil: such delays are rejected with ErrNeedsScheduler.
	Scheduler JobScheduler
	// Status, when set, records every job SQS accepted as "queued" in the job table
	// (*status.Table implements it), so that it can be looked up before a worker picks it up.
	// It costs one DynamoDB write per job; a failed write is reported in Result.StatusErr and
	// does not fail the enqueue. Defaults to nil: no status write (the worker's claim creates the
	// record).
	Status StatusRecorder
	// Groups, when set, counts a delayed job that Cancel cancelled in the batch or chain it
	// belongs to (its envelope's meta): its schedule is deleted, so no delivery comes to count
	// it, and the batch would wait for it. *batch.Client implements it. It needs a Scheduler that
	// reads a schedule's job back (ScheduledJobReader: *schedule.Client). Defaults to nil: such a
	// cancellation is counted by batch.Client.RepairJob only.
	Groups GroupCounter
	// Observer, when set, sees every call (pkg/tracing: a producer span per call). Defaults to
	// nil.
	Observer Observer

	// Payload, when set, sends jobs larger than SQS allows through S3 (*payload.Store implements
	// it): the whole envelope is written to the store's bucket under a key derived from the job id
	// (a retried send overwrites the same object), and the SQS message carries a pointer to it in
	// the Amazon SQS Extended Client's format, with the ExtendedPayloadSize attribute (see
	// pkg/payload and docs/envelope.md). Jobs may then be as large as the store's MaxSize. The
	// write happens when the job is sent (Enqueue, EnqueueBatch, Send), never in Prepare, so that a
	// transactional outbox does not call S3 inside its transaction. When SQS refuses the message
	// for certain (a 4xx answer, or a batch entry it reports failed) and the job's id was made by
	// this call (no WithID), no other message can point to the object, and it is deleted; otherwise
	// (WithID, Send, an answer that leaves it unknown whether SQS took the message) it stays for
	// the bucket's lifecycle rule. Defaults to nil: a job whose message would exceed
	// MaxMessageSize is rejected with ErrTooLarge.
	Payload PayloadWriter
	// PayloadAlways sends every job through S3 (Payload must be set), whatever its size, except
	// jobs delayed through the scheduler, whose target cannot carry the size attribute. Defaults
	// to false: only jobs whose message would exceed MaxMessageSize.
	PayloadAlways bool

	// QueueMaxMessageSize is the queue's MaximumMessageSize attribute, in bytes: SQS refuses a
	// larger message for good. The producer keeps 8 KiB of it for what the worker adds when it
	// dead-letters or re-sends a job, and rejects a job whose message (body + attributes) would
	// exceed the rest with ErrTooLarge, naming both sizes, before anything is sent (or, with
	// Payload, sends it through S3). Set it when the queue's is smaller than 1 MiB: a queue created
	// before SQS raised its default keeps 256 KiB (262,144) until it is set, so pass 262144 for
	// such a queue (SQS's default for a new queue is 1 MiB; awslocal.Provision and the CDK's
	// queues set it). 16 KiB to 1 MiB. Defaults to
	// 1 MiB (1,048,576), the most SQS allows.
	QueueMaxMessageSize int
	// Queues, when set, makes one producer send to every queue of a stack (pkg/queues): each job
	// goes to the queue WithQueue names, else to its kind's queue (Routes), else to the set's
	// default queue, so that callers never handle queue URLs. QueueURL must then be empty or the
	// default queue's URL. A delayed job needs a scheduler for its queue: Scheduler serves the
	// default queue, and the others when it implements QueueScheduler (*schedule.Client does)
	// and the set knows their ARNs. Defaults to nil: one queue, QueueURL.
	Queues *queues.Set
	// Routes names the queue of each kind: a *jobs.Registry whose kinds were registered with
	// jobs.WithQueue, or queues.Routes. New checks every route it can list against Queues (a
	// kind routed to a queue the stack does not have is an error wrapping
	// queues.ErrUnknownQueue). Requires Queues. Defaults to nil: every kind goes to the default
	// queue unless WithQueue says otherwise.
	Routes queues.Router
}

// Queue message sizes (Config.QueueMaxMessageSize).
const (
	// MaxQueueMessageSize is the largest MaximumMessageSize SQS allows (1 MiB), and the
	// default of Config.QueueMaxMessageSize.
	MaxQueueMessageSize = 1 << 20
	// MinQueueMessageSize is the smallest Config.QueueMaxMessageSize the producer accepts:
	// 8 KiB for the worker, and 8 KiB for the job.
	MinQueueMessageSize = 16 << 10
	// workerReserve is what the producer keeps of every message for the worker.
	workerReserve = 8 << 10
)

// PayloadWriter keeps the envelopes of jobs sent through S3. *payload.Store implements it.
type PayloadWriter interface {
	// Put writes body under key and returns the object's pointer.
	Put(ctx context.Context, key string, body []byte) (payload.Pointer, error)
	// Delete deletes an object Put wrote, when SQS refused its message for certain and no other
	// message can point to it (see Config.Payload).
	Delete(ctx context.Context, p payload.Pointer) error
	// SizeAttribute is the name of the size attribute sent with the pointer
	// (payload.Config.Format).
	SizeAttribute() string
	// Key returns the key of a job's payload, derived from its id.
	Key(jobID string) string
	// MaxSize is the largest payload Put writes, in bytes.
	MaxSize() int64
}

var _ PayloadWriter = (*payload.Store)(nil)

// StatusRecorder records enqueued jobs as queued, and scheduled jobs as scheduled.
// *status.Table implements it.
type StatusRecorder interface {
	RecordEnqueued(ctx context.Context, kind, key, jobID, payloadHash string, at time.Time) error
	RecordScheduledJob(ctx context.Context, kind, key, jobID, payloadHash string, runAt, at time.Time) error
}

// JobScheduler creates and deletes one-time schedules for delayed jobs. *schedule.Client
// implements it.
type JobScheduler interface {
	// ScheduleJob makes the scheduler send env to the queue at runAt (groupID: the FIFO message
	// group). Scheduling the same job id twice is not an error. It returns the schedule's name.
	ScheduleJob(ctx context.Context, env jobs.Envelope, runAt time.Time, groupID string) (string, error)
	// CancelJob deletes the job's schedule; a schedule already gone is not an error.
	CancelJob(ctx context.Context, jobID string) error
}

// ScheduledJobReader reads the job a delayed job's one-time schedule carries; ok is false when
// the job has no schedule. *schedule.Client implements it.
type ScheduledJobReader interface {
	ScheduledJob(ctx context.Context, jobID string) (env jobs.Envelope, ok bool, err error)
}

// GroupCounter counts a cancelled job in the batch or chain its envelope names, once, and
// reports what it belongs to ("" for neither) and whether it counted it now. *batch.Client
// implements it.
type GroupCounter interface {
	RepairJob(ctx context.Context, env jobs.Envelope) (in string, counted bool, err error)
}

// Canceller marks a job cancelled, so deliveries of it are acknowledged without running.
// *status.Table implements it.
type Canceller interface {
	Cancel(ctx context.Context, kind, key string, at time.Time, reason string) error
}

// Producer enqueues jobs on one queue, or on the queues of a stack (Config.Queues). Create it with
// New; it is safe for concurrent use.
type Producer struct {
	// Several queues (Config.Queues): the set, the routes, and one producer per queue (lanes,
	// by name; order, in the set's order). Nil for a producer of one queue, and for a lane.
	set    *queues.Set
	routes queues.Router
	lanes  map[string]*Producer
	order  []*Producer
	// name is the queue's name in its set (queues.DefaultName for a producer of one queue): the
	// only queue WithQueue may name on this producer.
	name string

	sqs      SQSAPI
	queueURL string
	fifo     bool
	ids      jobs.IDSource
	clock    func() time.Time

	maxRetries int
	retryBase  time.Duration
	retryMax   time.Duration
	sleep      func(context.Context, time.Duration) error
	rand       func() float64
	status     StatusRecorder
	scheduler  JobScheduler
	groups     GroupCounter
	observer   Observer
	payload    PayloadWriter
	always     bool
	queueMax   int // the queue's MaximumMessageSize (Config.QueueMaxMessageSize)
	sqsMax     int // the largest message sent through SQS: queueMax less the worker's 8 KiB
	maxSize    int // the largest envelope + attributes a job may have (through S3 with Payload)
}

// New checks cfg and returns a Producer.
func New(cfg Config) (*Producer, error) {
	if cfg.SQS == nil {
		return nil, errors.New("producer: Config.SQS is nil: pass an SQS client, such as sqs.NewFromConfig(cfg)")
	}
	if cfg.Queues != nil || cfg.Routes != nil {
		return newRouted(cfg)
	}
	if cfg.QueueURL == "" {
		return nil, errors.New("producer: Config.QueueURL is empty")
	}
	u, err := url.Parse(cfg.QueueURL)
	if err != nil || u.Scheme == "" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("producer: Config.QueueURL %q is not a queue URL (want https://sqs.<region>.amazonaws.com/<account>/<queue>)", cfg.QueueURL)
	}
	if _, reads := cfg.Scheduler.(ScheduledJobReader); cfg.Groups != nil && !reads {
		return nil, errors.New("producer: Config.Groups needs a Config.Scheduler that reads a schedule's job back (ScheduledJobReader, as *schedule.Client does): without it Cancel cannot tell a delayed job's batch")
	}
	p := &Producer{
		name:       queues.DefaultName,
		sqs:        cfg.SQS,
		queueURL:   cfg.QueueURL,
		fifo:       strings.HasSuffix(strings.TrimRight(u.Path, "/"), ".fifo"),
		ids:        cfg.IDs,
		clock:      cfg.Clock,
		maxRetries: cfg.MaxRetries,
		retryBase:  cfg.RetryBaseDelay,
		retryMax:   cfg.RetryMaxDelay,
		sleep:      cfg.Sleep,
		rand:       cfg.Rand,
		status:     cfg.Status,
		scheduler:  cfg.Scheduler,
		groups:     cfg.Groups,
		observer:   cfg.Observer,
		payload:    cfg.Payload,
		always:     cfg.PayloadAlways,
		queueMax:   cfg.QueueMaxMessageSize,
	}
	switch {
	case p.queueMax == 0:
		p.queueMax = MaxQueueMessageSize
	case p.queueMax < MinQueueMessageSize || p.queueMax > MaxQueueMessageSize:
		return nil, fmt.Errorf("producer: Config.QueueMaxMessageSize %d is not between %d and %d bytes (the queue's MaximumMessageSize; the producer keeps 8 KiB of it for the worker)",
			cfg.QueueMaxMessageSize, MinQueueMessageSize, MaxQueueMessageSize)
	}
	p.sqsMax = p.queueMax - workerReserve
	p.maxSize = p.sqsMax
	if cfg.PayloadAlways && cfg.Payload == nil {
		return nil, errors.New("producer: Config.PayloadAlways is set but Config.Payload is nil: pass a *payload.Store")
	}
	if cfg.Payload != nil {
		p.maxSize = int(min(cfg.Payload.MaxSize(), int64(math.MaxInt)))
	}
	switch {
	case p.maxRetries == 0:
		p.maxRetries = 3
	case p.maxRetries == -1:
		p.maxRetries = 0
	case p.maxRetries < -1:
		return nil, fmt.Errorf("producer: Config.MaxRetries %d is negative (use -1 to disable retries)", cfg.MaxRetries)
	}
	if p.retryBase < 0 || p.retryMax < 0 {
		return nil, fmt.Errorf("producer: Config.RetryBaseDelay %v and RetryMaxDelay %v must not be negative", p.retryBase, p.retryMax)
	}
	if p.retryBase == 0 {
		p.retryBase = 50 * time.Millisecond
	}
	if p.retryMax == 0 {
		p.retryMax = time.Second
	}
	if p.retryMax < p.retryBase {
		return nil, fmt.Errorf("producer: Config.RetryMaxDelay %v is below RetryBaseDelay %v", p.retryMax, p.retryBase)
	}
	if p.clock == nil {
		p.clock = time.Now
	}
	if p.ids.Now == nil {
		p.ids.Now = p.clock
	}
	if p.sleep == nil {
		p.sleep = sleep
	}
	if p.rand == nil {
		p.rand = rand.Float64
	}
	return p, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// QueueURL returns the queue the producer sends to (a producer of several queues: the default
// queue's; Queues has them all).
func (p *Producer) QueueURL() string { return p.queueURL }

// FIFO reports whether the queue is a FIFO queue (a producer of several queues: the default
// queue).
func (p *Producer) FIFO() bool { return p.fifo }

// Request is one job of EnqueueBatch.
type Request struct {
	// Args are the job's arguments.
	Args jobs.Args
	// Options set the job's key, delay, group and so on.
	Options []Option
}

// Result is what became of one job.
type Result struct {
	// ID is the job's id ("" when the job was rejected before one was chosen).
	ID string
	// Kind is the job's kind.
	Kind string
	// Key is the job's idempotency key: the WithKey value, or the id.
	Key string
	// MessageID is the SQS message id, when the job was enqueued.
	MessageID string
	// SequenceNumber is the SQS sequence number of a job on a FIFO queue.
	SequenceNumber string
	// Err is why the job was not enqueued, or nil. Validation errors wrap ErrInvalid; rejections
	// inside a batch response are *EntryError.
	Err error
	// StatusErr is why the "queued" or "scheduled" record could not be written (Config.Status),
	// or nil. The job was enqueued all the same.
	StatusErr error
	// Schedule is the one-time schedule's name when the job was delayed through the scheduler
	// (MessageID is then empty: the message is sent when the schedule fires), and RunAt its time.
	Schedule string
	RunAt    time.Time
	// Payload is the S3 object that holds the job's envelope when the job was sent through S3
	// (Config.Payload), nil when it went inline.
	Payload *payload.Pointer
}

// JoinErrors returns the errors of the results that failed, joined, or nil when all succeeded.
func JoinErrors(results []Result) error {
	var errs []error
	for i := range results {
		if results[i].Err != nil {
			errs = append(errs, results[i].Err)
		}
	}
	return errors.Join(errs...)
}

// Enqueue validates one job and sends it with SendMessage. The returned error is also in
// Result.Err.
func (p *Producer) Enqueue(ctx context.Context, args jobs.Args, opts ...Option) (Result, error) {
	if p.lanes != nil {
		return p.enqueueRouted(ctx, args, opts)
	}
	if p.observer == nil {
		return p.enqueue(ctx, args, opts)
	}
	call := Call{Operation: OpEnqueue, QueueURL: p.queueURL, Jobs: 1, Kind: kindOf(args)}
	ctx = p.observer.Start(ctx, call)
	res, err := p.enqueue(ctx, args, opts)
	p.observer.End(ctx, call, []Result{res})
	return res, err
}

func (p *Producer) enqueue(ctx context.Context, args jobs.Args, opts []Option) (Result, error) {
	s := getScratch()
	tc := traceOf(ctx)
	j, err := p.prepare(s, args, opts, &tc, false)
	putScratch(s)
	res := Result{ID: j.id, Kind: j.kind, Key: j.key}
	if err != nil {
		res.Err = fmt.Errorf("producer: enqueue %s: %w", j.label(), err)
		return res, res.Err
	}
	if j.scheduled {
		p.schedule(ctx, &j, &res)
		return res, res.Err
	}
	if err := p.offload(ctx, &j); err != nil {
		res.Err = fmt.Errorf("producer: enqueue %s (id %s): %w", j.label(), j.id, err)
		return res, res.Err
	}
	res.Payload = j.ptr
	in := &sqs.SendMessageInput{
		QueueUrl:          &p.queueURL,
		MessageBody:       &j.body,
		DelaySeconds:      j.delay,
		MessageAttributes: j.attrs,
	}
	if j.awsTrace != "" {
		in.MessageSystemAttributes = awsTraceAttribute(j.awsTrace)
	}
	if j.group != "" {
		in.MessageGroupId = &j.group
	}
	if j.dedup != "" {
		in.MessageDeduplicationId = &j.dedup
	}
	out, err := p.sqs.SendMessage(ctx, in, keepConnection)
	if err != nil {
		res.Err = fmt.Errorf("producer: enqueue %s (id %s): SQS SendMessage: %w%s", j.label(), j.id, err, p.dropRejected(ctx, &j, rejected(err)))
		return res, res.Err
	}
	res.MessageID = aws.ToString(out.MessageId)
	res.SequenceNumber = aws.ToString(out.SequenceNumber)
	if p.status != nil {
		res.StatusErr = p.recordQueued(ctx, &j)
	}
	return res, nil
}

// EnqueueAt enqueues a job to run at t (see WithRunAt).
func (p *Producer) EnqueueAt(ctx context.Context, args jobs.Args, t time.Time, opts ...Option) (Result, error) {
	return p.Enqueue(ctx, args, append(opts[:len(opts):len(opts)], WithRunAt(t))...)
}

// EnqueueIn enqueues a job to run after d (see WithDelay).
func (p *Producer) EnqueueIn(ctx context.Context, args jobs.Args, d time.Duration, opts ...Option) (Result, error) {
	return p.Enqueue(ctx, args, append(opts[:len(opts):len(opts)], WithDelay(d))...)
}

// Cancel cancels a job: it deletes its schedule, if it was delayed through the scheduler, and
// marks it cancelled in the job table (Config.Status must then implement Canceller), so that a
// copy already sent is acknowledged without running. key is the job's key ("" for its id). A
// job running now is asked to stop (status.Table.Cancel: its worker cancels the job's context
// within about 10 seconds, and a job that stops ends cancelled); a job that already succeeded
// cannot be cancelled. With Config.Groups, a delayed job of a batch or a chain is counted there
// as cancelled (its schedule was its only way to run).
func (p *Producer) Cancel(ctx context.Context, kind, key, jobID string) error {
	if err := jobs.ValidateKind(kind); err != nil {
		return invalid("cancel: %v", err)
	}
	if jobID == "" {
		return invalid("cancel %s: the job id is empty", kind)
	}
	if key == "" {
		key = jobID
	}
	c, canCancel := p.status.(Canceller)
	if !canCancel && p.scheduler == nil {
		return errors.New("producer: Cancel needs Config.Scheduler or a Config.Status that can cancel (*status.Table)")
	}
	// The job its schedule carries, read before the schedule goes: its batch or chain counts it.
	var scheduled *jobs.Envelope
	if r, ok := p.scheduler.(ScheduledJobReader); ok && p.groups != nil && canCancel {
		env, found, err := r.ScheduledJob(ctx, jobID)
		if err != nil {
			return fmt.Errorf("producer: cancel %s %s: read its schedule: %w", kind, jobID, err)
		}
		if found {
			scheduled = &env
		}
	}
	if p.scheduler != nil {
		if err := p.scheduler.CancelJob(ctx, jobID); err != nil {
			return fmt.Errorf("producer: cancel %s %s: delete its schedule: %w", kind, jobID, err)
		}
	}
	if !canCancel {
		return nil
	}
	if err := c.Cancel(ctx, kind, key, p.clock(), "cancelled by the producer"); err != nil {
		return fmt.Errorf("producer: cancel %s %s: %w", kind, jobID, err)
	}
	if scheduled != nil {
		if in, _, err := p.groups.RepairJob(ctx, *scheduled); err != nil {
			return fmt.Errorf("producer: cancel %s %s: cancelled, but not counted in its %s (batch.Client.RepairJob counts it): %w", kind, jobID, in, err)
		}
	}
	return nil
}

// schedule hands a delayed job to the scheduler.
func (p *Producer) schedule(ctx context.Context, j *job, res *Result) {
	if j.size > p.sqsMax {
		res.Err = fmt.Errorf("producer: schedule %s (id %s): %w", j.label(), j.id, tooLarge(
			"the job is %d bytes, above the %d an SQS message carries on this queue: a job sent through S3 cannot be delayed beyond what SQS DelaySeconds allows (15 minutes on a standard queue), because an EventBridge Scheduler target cannot set the pointer's size attribute", j.size, p.sqsMax))
		return
	}
	env, err := jobs.ParseEnvelope(j.body)
	if err != nil {
		res.Err = fmt.Errorf("producer: schedule %s: %w", j.label(), err)
		return
	}
	name, err := p.scheduler.ScheduleJob(ctx, env, j.runAt, j.group)
	if err != nil {
		res.Err = fmt.Errorf("producer: schedule %s (id %s): %w", j.label(), j.id, err)
		return
	}
	res.Schedule, res.RunAt = name, j.runAt
	if p.status != nil {
		hash, err := jobs.PayloadHash(j.kind, env.Args)
		if err == nil {
			err = p.status.RecordScheduledJob(ctx, j.kind, j.key, j.id, hash, j.runAt, p.clock())
		}
		if err != nil {
			res.StatusErr = fmt.Errorf("producer: record %s as scheduled: %w", j.id, err)
		}
	}
}

// recordQueued writes the job's "queued" record.
func (p *Producer) recordQueued(ctx context.Context, j *job) error {
	env, err := jobs.ParseEnvelope(j.envelope())
	if err != nil {
		return fmt.Errorf("producer: record %s as queued: %w", j.id, err)
	}
	hash, err := jobs.PayloadHash(j.kind, env.Args)
	if err != nil {
		return fmt.Errorf("producer: record %s as queued: %w", j.id, err)
	}
	if err := p.status.RecordEnqueued(ctx, j.kind, j.key, j.id, hash, p.clock()); err != nil {
		return fmt.Errorf("producer: record %s as queued: %w", j.id, err)
	}
	return nil
}

// job is a validated job, ready to send.
type job struct {
	id, kind, key string // key is the effective key
	body          string
	size          int // body + attributes, as SQS counts them
	delay         int32
	scheduled     bool      // delayed through the scheduler, to run at runAt
	runAt         time.Time // when delayed: not before
	group, dedup  string
	attrs         map[string]types.MessageAttributeValue
	awsTrace      string // the AWSTraceHeader system attribute, or ""
	// env is the envelope once offload has moved it to S3 (body is then the pointer, ptr its
	// object); "" while body is the envelope.
	env string
	ptr *payload.Pointer
	// ownID: the id was made for this job by this call (no WithID), so no other message can point
	// to its object.
	ownID bool
}

// envelope returns the job's envelope JSON.
func (j *job) envelope() string {
	if j.env != "" {
		return j.env
	}
	return j.body
}

// label names the job in errors: its kind, or "job" when it has none.
func (j *job) label() string {
	if j.kind == "" {
		return "job"
	}
	return j.kind
}

// scratch holds the buffers one prepare call reuses.
type scratch struct {
	args bytes.Buffer
	enc  *json.Encoder
	body []byte
	opts options
}

var scratchPool = sync.Pool{New: func() any {
	s := &scratch{body: make([]byte, 0, 512)}
	s.enc = json.NewEncoder(&s.args)
	s.enc.SetEscapeHTML(false)
	return s
}}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// maxPooledBuffer keeps an occasional huge job from pinning its buffers in the pool.
const maxPooledBuffer = 2 * MaxBatchRequestSize

func putScratch(s *scratch) {
	if s.args.Cap() > maxPooledBuffer || cap(s.body) > maxPooledBuffer {
		return
	}
	s.opts = options{}
	scratchPool.Put(s)
}

// traceContext is the caller's trace context, copied into the jobs a call builds.
type traceContext struct {
	tp string // W3C traceparent, for meta.traceparent
	// tpMeta, when not nil, is a shared read-only {"traceparent": tp} map for jobs without meta of
	// their own (EnqueueBatch).
	tpMeta   map[string]string
	awsTrace string // X-Ray header, for the AWSTraceHeader system attribute
}

func traceOf(ctx context.Context) traceContext {
	return traceContext{tp: jobs.TraceParentFromContext(ctx), awsTrace: jobs.AWSTraceHeaderFromContext(ctx)}
}

// awsTraceAttribute is the MessageSystemAttributes map that carries an X-Ray trace header. (A
// system attribute does not count towards the message's size.)
func awsTraceAttribute(h string) map[string]types.MessageSystemAttributeValue {
	return map[string]types.MessageSystemAttributeValue{
		string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(h)},
	}
}

// prepare validates a job and builds its message, with the trace context tc. anyDelay accepts
// delays that need the scheduler although the producer has none (Prepare: the sender decides
// later).
func (p *Producer) prepare(s *scratch, args jobs.Args, opts []Option, tc *traceContext, anyDelay bool) (j job, err error) {
	tp, tpMeta := tc.tp, tc.tpMeta
	if args == nil {
		return j, invalid("args are nil")
	}
	if v := reflect.ValueOf(args); v.Kind() == reflect.Pointer && v.IsNil() {
		return j, invalid("args are a nil %T", args)
	}
	j.kind = args.Kind()
	if err := jobs.ValidateKind(j.kind); err != nil {
		j.kind = "" // not a kind: keep it out of labels and results
		return j, invalid("args %T: %v", args, err)
	}

	o := &s.opts
	*o = options{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}

	if o.queueSet && o.queue != p.name {
		return j, &validationError{msg: fmt.Sprintf("WithQueue(%q): this producer sends to one queue, %s (give it Config.Queues to send to the stack's other queues)", o.queue, p.queueName()), also: queues.ErrUnknownQueue}
	}
	if o.maxAttemptsSet && o.maxAttempts < 1 {
		return j, invalid("max attempts %d: must be at least 1", o.maxAttempts)
	}
	if o.runAtSet {
		d := o.runAt.Sub(p.clock())
		if d <= 0 {
			return j, invalid("run time %s is not in the future", o.runAt.UTC().Format(time.RFC3339))
		}
		o.delay, o.delaySet = d, true
	}
	if o.delaySet {
		if j.delay, j.scheduled, err = delaySeconds(o.delay, p.fifo, p.scheduler != nil || anyDelay); err != nil {
			return j, err
		}
		if o.delay > 0 {
			j.runAt = p.clock().Add(o.delay)
			if o.runAtSet {
				j.runAt = o.runAt
			}
		}
	}
	if o.keySet {
		if err := checkKey(o.key); err != nil {
			return j, err
		}
	}
	if o.groupSet {
		if err := checkToken("message group id", o.group); err != nil {
			return j, err
		}
		j.group = o.group
	} else if p.fifo {
		return j, invalid("no message group id: FIFO queue %s needs one for every job (use producer.WithGroupID)", p.queueName())
	}
	if o.dedupSet {
		if !p.fifo {
			return j, invalid("deduplication id %q on standard queue %s: deduplication ids apply only to FIFO queues", o.dedup, p.queueName())
		}
		if err := checkToken("deduplication id", o.dedup); err != nil {
			return j, err
		}
	}
	for k := range o.meta {
		if k == "" {
			return j, invalid("meta key is empty")
		}
	}
	attrSize, err := checkAttributes(o.attrs)
	if err != nil {
		return j, err
	}

	if o.idSet {
		if err := checkID(o.id); err != nil {
			return j, err
		}
		j.id = o.id
	} else {
		j.id, j.ownID = p.ids.NewID(), true
	}
	j.key = j.id
	if o.keySet {
		j.key = o.key
	}
	if p.fifo {
		if o.dedupSet {
			j.dedup = o.dedup
		} else {
			j.dedup = deduplicationID(j.kind, j.key)
		}
	}

	s.args.Reset()
	if err := s.enc.Encode(args); err != nil {
		return j, invalid("args %T do not encode to JSON: %v", args, err)
	}
	raw := s.args.Bytes()
	raw = raw[:len(raw)-1] // Encode appends a newline
	if raw[0] != '{' {
		return j, invalid("args %T encode to a JSON %s; args must encode to a JSON object (a struct or a map)", args, jsonType(raw[0]))
	}
	if len(raw)+attrSize > p.maxSize {
		return j, tooLarge("args are %d bytes and attributes %d: the message would exceed %d bytes%s", len(raw), attrSize, p.maxSize, p.limitNote())
	}

	meta := o.meta
	if tp != "" {
		switch {
		case meta != nil:
			if _, ok := meta[jobs.MetaTraceParent]; !ok {
				meta[jobs.MetaTraceParent] = tp
			}
		case tpMeta != nil:
			meta = tpMeta
		default:
			meta = map[string]string{jobs.MetaTraceParent: tp}
		}
	}
	env := jobs.Envelope{
		V:          jobs.EnvelopeVersion,
		ID:         j.id,
		Kind:       j.kind,
		Args:       raw,
		EnqueuedAt: p.clock(),
		Meta:       meta,
	}
	if o.keySet {
		env.Key = o.key
	}
	if o.maxAttemptsSet {
		env.MaxAttempts = o.maxAttempts
	}
	if err := env.Validate(); err != nil {
		return j, invalid("%v", err)
	}
	s.body = env.AppendJSON(s.body[:0])
	j.size = len(s.body) + attrSize
	if j.size > p.maxSize {
		return j, tooLarge("message is %d bytes (body %d + attributes %d), above the limit of %d bytes%s", j.size, len(s.body), attrSize, p.maxSize, p.limitNote())
	}
	j.body = string(s.body)
	j.attrs = o.attrs
	j.awsTrace = tc.awsTrace
	return j, nil
}

func jsonType(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// queueName returns the last path element of the queue URL, for messages.
func (p *Producer) queueName() string {
	u := strings.TrimRight(p.queueURL, "/")
	return u[strings.LastIndexByte(u, '/')+1:]
}

// keepConnection is passed with every SQS call: without it the SDK may lose a response under a
// race in its HTTP layer and send the job a second time (see internal/sdkhttp).
func keepConnection(o *sqs.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}

// limitNote explains the size limit: SQS's, or the payload store's when large jobs go through
// S3.
func (p *Producer) limitNote() string {
	if p.payload == nil {
		return fmt.Sprintf(": the queue's MaximumMessageSize of %d bytes (producer.Config.QueueMaxMessageSize) less 8 KiB kept for the worker; set producer.Config.Payload to send larger jobs through S3", p.queueMax)
	}
	return " (the largest job sent through S3: payload.Config.MaxSize)"
}

// offload sends a job through S3 when it is larger than an SQS message may be (or always, with
// Config.PayloadAlways): it writes the envelope under the job's key and makes the message the
// pointer, with the size attribute. j.size becomes the pointer message's size, which is what
// counts against SQS's limits.
func (p *Producer) offload(ctx context.Context, j *job) error {
	if p.payload == nil || (!p.always && j.size <= p.sqsMax) {
		return nil
	}
	env := j.body
	ptr, err := p.payload.Put(ctx, p.payload.Key(j.id), []byte(env))
	if err != nil {
		return fmt.Errorf("store the job's %d bytes in S3: %w", len(env), err)
	}
	attrs := make(map[string]types.MessageAttributeValue, len(j.attrs)+1)
	for name, v := range j.attrs {
		attrs[name] = v
	}
	size, name := payload.SizeValue(len(env)), p.payload.SizeAttribute()
	attrs[name] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(size)}
	ownAttrs := j.size - len(env)
	j.env, j.body, j.attrs, j.ptr = env, ptr.Body(), attrs, &ptr
	j.size = len(j.body) + ownAttrs + len(name) + len("Number") + len(size)
	return nil
}

// rejected reports whether an SQS error says for certain that SQS did not take the message: an
// answer with a 4xx status (a missing queue, a refused permission, throttling, invalid
// contents). A timeout, a broken connection, a cancelled context or a 5xx answer leave it
// unknown.
func rejected(err error) bool {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		return s >= 400 && s < 500
	}
	return false
}

// dropRejected deletes the S3 object of a job whose message SQS refused for certain, when no
// other message can point to it (its id was made by this call), and returns a note for the
// job's error when that delete failed. Objects of jobs with a caller's id stay: an earlier send
// of the same job may be in the queue.
func (p *Producer) dropRejected(ctx context.Context, j *job, definite bool) string {
	if j.ptr == nil || !j.ownID || !definite {
		return ""
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	if err := p.payload.Delete(dctx, *j.ptr); err != nil {
		return fmt.Sprintf(" (its S3 object %s could not be deleted, and stays until the bucket's lifecycle rule expires it: %v)", j.ptr, err)
	}
	return ""
}

// dropTimeout bounds the delete of a refused job's object.
const dropTimeout = 10 * time.Second
