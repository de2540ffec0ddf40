package dlq

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// SQSAPI is the part of the SQS client this package uses; *sqs.Client implements it.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, optFns ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error)
}

// Resetter resets a job's status record before its dead letter goes back to the job queue, so
// that the job is claimable again with a fresh attempt budget. *status.Table implements it.
type Resetter interface {
	// ResetForRedrive resets the record of the job key (kind, key): its run count to 0 unless
	// keepRuns, and its state from dead (or retrying, or running with an expired lease) to
	// retrying. No record is not an error.
	ResetForRedrive(ctx context.Context, kind, key string, keepRuns bool) error
}

// PayloadStore reads and deletes the S3 objects of dead letters whose body is a pointer (jobs
// larger than SQS allows, pkg/payload), and writes the envelopes a redrive sends back.
// *payload.Store implements it.
type PayloadStore interface {
	// Get reads the object p names.
	Get(ctx context.Context, p payload.Pointer) ([]byte, error)
	// Delete deletes the object p names (PurgePayloads).
	Delete(ctx context.Context, p payload.Pointer) error
	// Put writes a redriven job's envelope under key and returns its pointer.
	Put(ctx context.Context, key string, body []byte) (payload.Pointer, error)
	// Key returns the key of a job's payload, derived from its id.
	Key(jobID string) string
	// SizeAttribute is the size attribute's name to send with the store's pointers.
	SizeAttribute() string
}

var _ PayloadStore = (*payload.Store)(nil)

// Errors this package returns (wrapped, with what they concern).
var (
	// ErrInvalid: a bad argument or Config field; the message names it.
	ErrInvalid = errors.New("dlq: invalid argument")
	// ErrNotFound: no dead letter for that job id.
	ErrNotFound = errors.New("dlq: job not found in the dead-letter queue")
	// ErrConfirm: Purge's confirmation is not the DLQ's queue name.
	ErrConfirm = errors.New("dlq: purge not confirmed")
	// ErrNoPayloadStore: a dead letter's job is kept in S3 (its body is a pointer) and
	// Config.Payload is nil, so its envelope, and with it the job's id and kind, was not read.
	// Payload.Err and NotFoundError.Cause wrap it.
	ErrNoPayloadStore = errors.New("dlq: the job is kept in S3 and no payload store is configured to read it")
)

// NotFoundError is the error of Show, RedriveJob and DeleteMessage when no dead letter matches.
// It wraps ErrNotFound, and Cause when set. When some dead letters keep their job in S3 and could
// not be read, the job may be one of them: Unresolved counts them.
type NotFoundError struct {
	// JobID or MessageID is what was looked for.
	JobID, MessageID string
	// Unresolved counts the dead letters the scan could not identify: their body is an S3
	// pointer, their failure attribute does not name the job, and the object was not read.
	Unresolved int
	// Cause is why the first of those could not be read: it wraps ErrNoPayloadStore when
	// Config.Payload is nil. Nil when Unresolved is 0.
	Cause error
}

func (e *NotFoundError) Error() string {
	what := fmt.Sprintf("job id %q", e.JobID)
	if e.MessageID != "" {
		what = fmt.Sprintf("message id %q", e.MessageID)
	}
	msg := ErrNotFound.Error() + ": " + what
	if e.Unresolved > 0 {
		msg += fmt.Sprintf("; %d dead letters keep their job in S3 and could not be identified (%v)", e.Unresolved, e.Cause)
	}
	return msg
}

// Unwrap returns ErrNotFound and Cause.
func (e *NotFoundError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrNotFound, e.Cause}
	}
	return []error{ErrNotFound}
}

// unresolved counts the dead letters a scan could not identify, for a NotFoundError.
type unresolved struct {
	n     int
	cause error
}

func (u *unresolved) add(m dead) {
	if m.JobID != "" || m.Payload == nil || m.Payload.Err == nil {
		return
	}
	if u.n == 0 {
		u.cause = m.Payload.Err
	}
	u.n++
}

// Config configures a [DLQ]. SQS, DLQURL and SourceURL are required; every other field's zero
// value is its default.
type Config struct {
	// SQS is the SQS client, usually sqs.NewFromConfig(cfg). Required.
	SQS SQSAPI
	// DLQURL is the URL of the dead-letter queue. Required.
	DLQURL string
	// SourceURL is the URL of the job queue whose dead letters these are, where redrives send
	// them. Required.
	SourceURL string
	// SourceARN is the ARN of the job queue, the DestinationArn of StartMessageMoveTask. Looked
	// up with GetQueueAttributes when empty.
	SourceARN string
	// DLQARN is the ARN of the dead-letter queue, the SourceArn of StartMessageMoveTask. Looked
	// up with GetQueueAttributes when empty.
	DLQARN string
	// Status, when set, resets the job's status record (run count, state) as its dead letter is
	// redriven; *status.Table implements it. Optional.
	Status Resetter
	// Payload, when set, reads the envelopes of dead letters whose body is an S3 pointer (Peek
	// lists such a job with its id and kind, Show, RedriveJob and DeleteMessage find it by its
	// id, a redrive resets its status record), writes the envelope a redrive sends back (under a
	// key of its own, with attempts_before reset as for an inline job, and a fresh object for the
	// bucket's lifecycle rule to count from), and deletes their objects (PurgePayloads). An object
	// is read only when the failure attribute does not name the job (a dead letter the worker
	// could not read, or one SQS moved itself), or to redrive it. Optional: without it a pointer
	// dead letter is shown as its pointer, its Payload.Err wrapping ErrNoPayloadStore when the
	// job's id was needed, and redriven as it is (its object, and the attempts_before in it,
	// unchanged).
	Payload PayloadStore
	// RatePerSecond bounds the messages a redrive moves per second (StartMessageMoveTask's
	// MaxNumberOfMessagesPerSecond, at most 500, and the fallback mover's pace). Defaults to 100.
	RatePerSecond int
	// PeekVisibility is how long a peeked message stays hidden before Peek makes it visible
	// again (at once, unless Peek is interrupted). Defaults to 5s.
	PeekVisibility time.Duration
	// Now returns the time. Defaults to time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done (the fallback mover's rate limit). Defaults to a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Defaults of [Config].
const (
	DefaultRatePerSecond  = 100
	DefaultPeekVisibility = 5 * time.Second
)

// SQS limits and this package's fixed settings.
const (
	maxBatch        = 10               // entries of one batch request, messages of one receive
	maxRequestBytes = 1 << 20          // one SendMessageBatch request: all entries
	holdVisibility  = 30 * time.Second // what a scan or a mover holds while it works on it
	maxVisibility   = 12 * time.Hour
	receiveWait     = 1 // seconds: short long polls, see the package documentation
	cleanupTimeout  = 30 * time.Second
)

// ReasonMaxReceiveCount is [Message.Reason] for a dead letter without a failure attribute: SQS's
// redrive policy moved it after maxReceiveCount receives (the worker crashed or timed out).
const ReasonMaxReceiveCount = "max_receive_count"

// DLQ inspects and redrives one dead-letter queue. It is safe for concurrent use, but two
// redrives of the same queue at the same time compete for its messages.
type DLQ struct {
	cfg  Config
	fifo bool // the source queue is a FIFO queue
}

// New returns a DLQ, or an error wrapping ErrInvalid that names the bad Config field.
func New(cfg Config) (*DLQ, error) {
	switch {
	case cfg.SQS == nil:
		return nil, fmt.Errorf("%w: Config.SQS is nil", ErrInvalid)
	case cfg.DLQURL == "":
		return nil, fmt.Errorf("%w: Config.DLQURL is empty", ErrInvalid)
	case cfg.SourceURL == "":
		return nil, fmt.Errorf("%w: Config.SourceURL is empty", ErrInvalid)
	case cfg.DLQURL == cfg.SourceURL:
		return nil, fmt.Errorf("%w: Config.DLQURL and Config.SourceURL are the same queue", ErrInvalid)
	case cfg.RatePerSecond < 0:
		return nil, fmt.Errorf("%w: Config.RatePerSecond is %d, want ≥ 0", ErrInvalid, cfg.RatePerSecond)
	case cfg.PeekVisibility < 0 || cfg.PeekVisibility > maxVisibility:
		return nil, fmt.Errorf("%w: Config.PeekVisibility is %v, want 0–12h", ErrInvalid, cfg.PeekVisibility)
	}
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.PeekVisibility == 0 {
		cfg.PeekVisibility = DefaultPeekVisibility
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	return &DLQ{cfg: cfg, fifo: isFIFO(cfg.SourceURL)}, nil
}

func isFIFO(queueURL string) bool {
	return strings.HasSuffix(strings.TrimRight(queueURL, "/"), ".fifo")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Message is a dead letter as a CLI shows it.
type Message struct {
	// MessageID is the SQS message id of the dead letter.
	MessageID string
	// Body is the message body, normally a job envelope.
	Body string
	// Attributes are the message attributes, the failure attribute included: string and number
	// values as they are, binary ones in standard base64.
	Attributes map[string]string
	// Failure is the decoded failure attribute, nil when absent (SQS's redrive policy moved the
	// message, not the worker) or unreadable.
	Failure *worker.Failure
	// Kind and JobID identify the job: from the envelope, or from the failure attribute when the
	// body is not an envelope.
	Kind, JobID string
	// Reason is why the job was dead-lettered: the failure's reason, or ReasonMaxReceiveCount
	// when there is no failure attribute.
	Reason string
	// Attempts is the number of attempts the job had spent: the failure's count, else the
	// envelope's attempts_before.
	Attempts int
	// FailedAt is when the worker dead-lettered the job; zero when unknown.
	FailedAt time.Time
	// SentAt is when the dead letter was sent to the DLQ (SQS's SentTimestamp); zero when
	// unknown.
	SentAt time.Time
	// ReceiveCount is SQS's ApproximateReceiveCount of the dead letter; peeks count.
	ReceiveCount int
	// Payload is set when the body is an S3 pointer (the job's envelope is an object in S3):
	// where it is and its size. Nil for an inline body.
	Payload *Payload
}

// Payload is the S3 object of a dead letter whose body is a pointer.
type Payload struct {
	// Bucket and Key locate the object.
	Bucket, Key string
	// Size is the payload's size in bytes, from the message's size attribute; -1 when the
	// message has none.
	Size int64
	// Err is why the object could not be read when it was needed (the failure attribute does
	// not name the job, or a redrive): the job's id and kind then come from the failure attribute
	// alone. It wraps ErrNoPayloadStore when Config.Payload is nil.
	Err error
}

// dead is a received dead letter: what it shows, its envelope when the body is one, and the
// SQS message.
type dead struct {
	Message
	env    *jobs.Envelope // nil when the body is not an envelope (nor resolved from S3)
	envErr error          // why it is not
	raw    sqstypes.Message
	ptr    payload.Pointer // the body's pointer, when Payload is set
	// redrive is the pointer to the envelope a redrive rewrote to S3 (rewritePayloads), with its
	// size; nil when the dead letter goes back as it came.
	redrive     *payload.Pointer
	redriveSize int
}

// identify resolves a pointer dead letter whose failure attribute does not name its job (id and
// kind), so that every reader (Peek, Show, RedriveJob, DeleteMessage, and through this package
// the CLI and the console) lists and finds a job kept in S3 like any other. One S3 read per such
// dead letter; none for an inline body or a failure attribute that names the job.
func (d *DLQ) identify(ctx context.Context, m *dead) {
	if m.Payload != nil && (m.JobID == "" || m.Kind == "") {
		d.resolve(ctx, m)
	}
}

// resolve reads the envelope of a pointer dead letter from S3 (Config.Payload), filling in the
// job's id, kind and attempts the failure attribute did not give. It is the one place this
// package turns a pointer into its job. Without a store (Payload.Err then wraps
// ErrNoPayloadStore), or when the object cannot be read (recorded in Payload.Err), the dead
// letter stays as decode left it.
func (d *DLQ) resolve(ctx context.Context, m *dead) {
	if m.env != nil || m.Payload == nil || m.Payload.Err != nil {
		return
	}
	if d.cfg.Payload == nil {
		m.Payload.Err = fmt.Errorf("%w (%s)", ErrNoPayloadStore, m.ptr)
		return
	}
	data, err := d.cfg.Payload.Get(ctx, m.ptr)
	if err == nil {
		var env jobs.Envelope
		if env, err = jobs.ParseEnvelope(string(data)); err == nil {
			m.env = &env
			if m.JobID == "" {
				m.JobID = env.ID
			}
			if m.Kind == "" {
				m.Kind = env.Kind
			}
			if m.Failure == nil {
				m.Attempts = env.AttemptsBefore
			}
			return
		}
	}
	m.Payload.Err = err
}

// decode reads a received message.
func decode(m sqstypes.Message) dead {
	d := dead{raw: m, Message: Message{MessageID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)}}
	if len(m.MessageAttributes) > 0 {
		d.Attributes = make(map[string]string, len(m.MessageAttributes))
		for name, v := range m.MessageAttributes {
			if v.StringValue != nil {
				d.Attributes[name] = *v.StringValue
			} else {
				d.Attributes[name] = base64.StdEncoding.EncodeToString(v.BinaryValue)
			}
		}
	}
	if v, ok := m.MessageAttributes[worker.FailureAttribute]; ok && v.StringValue != nil {
		var f worker.Failure
		if json.Unmarshal([]byte(*v.StringValue), &f) == nil {
			d.Failure = &f
		}
	}
	if env, err := jobs.ParseEnvelope(d.Body); err == nil {
		d.env = &env
		d.Kind, d.JobID, d.Attempts = env.Kind, env.ID, env.AttemptsBefore
	} else {
		d.envErr = err
		if payload.MaybePointer(d.Body) {
			if p, perr := payload.ParsePointer(d.Body); perr == nil {
				d.Payload = &Payload{Bucket: p.Bucket, Key: p.Key, Size: -1}
				size, _, ok := payload.SizeFrom(func(name string) (string, bool) {
					v, found := m.MessageAttributes[name]
					return aws.ToString(v.StringValue), found
				})
				if ok {
					d.Payload.Size = size
				}
				d.ptr = p
			}
		}
	}
	if f := d.Failure; f != nil {
		d.Reason, d.Attempts = f.Reason, f.Attempts
		if d.env == nil {
			d.Kind, d.JobID = f.Kind, f.JobID
		}
		if t, err := time.Parse(time.RFC3339Nano, f.FailedAt); err == nil {
			d.FailedAt = t
		}
	} else {
		d.Reason = ReasonMaxReceiveCount
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		d.SentAt = time.UnixMilli(ms).UTC()
	}
	d.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	return d
}

// receive receives up to n messages (1–10) of a queue, hiding them for visibility, with every
// message and system attribute.
//
// The receive is not cut off when ctx is cancelled (it waits at most receiveWait): a receive
// abandoned after SQS took its messages would leave them invisible for the whole visibility, and
// nothing would say so. The caller, who sees ctx done, makes what it received visible again. The
// request keeps its connection (internal/sdkhttp), so that the SDK does not lose an answer to a
// race in its HTTP layer and retry the receive.
func (d *DLQ) receive(ctx context.Context, queueURL string, n int, visibility time.Duration) ([]sqstypes.Message, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), receiveWait*time.Second+receiveMargin)
	defer cancel()
	out, err := d.cfg.SQS.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         int32(min(max(n, 1), maxBatch)),
		VisibilityTimeout:           int32(ceilSeconds(visibility)),
		WaitTimeSeconds:             receiveWait,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	}, keepConnection)
	if err != nil {
		return nil, fmt.Errorf("dlq: receive from %s: %w", queueURL, err)
	}
	return out.Messages, nil
}

// receiveMargin is added to the long poll for a receive's whole round trip.
const receiveMargin = 30 * time.Second

// keepConnection is passed with receives (see internal/sdkhttp).
func keepConnection(o *sqs.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}

func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// held collects the receipt handles of the messages a scan or a mover holds, to make them visible
// again at once when it is done with them. A message received again (its visibility ran out
// during a long run) is held by its latest receipt handle: SQS accepts only that one.
type held struct {
	d        *DLQ
	queueURL string
	handles  []string
	index    map[string]int // message id → its entry in handles
}

func (h *held) add(m sqstypes.Message) {
	rh := aws.ToString(m.ReceiptHandle)
	id := aws.ToString(m.MessageId)
	if id == "" {
		h.handles = append(h.handles, rh)
		return
	}
	if i, ok := h.index[id]; ok {
		h.handles[i] = rh
		return
	}
	if h.index == nil {
		h.index = map[string]int{}
	}
	h.index[id] = len(h.handles)
	h.handles = append(h.handles, rh)
}

// len returns the number of messages held.
func (h *held) len() int { return len(h.handles) }

// release makes the held messages visible again, even when ctx is already cancelled (within a
// bounded time). A message whose change fails becomes visible when its visibility timeout ends.
func (h *held) release(ctx context.Context) error {
	if len(h.handles) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	for part := range chunks(h.handles, maxBatch) {
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(part))
		for i, rh := range part {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(rh), VisibilityTimeout: 0,
			}
		}
		out, err := h.d.cfg.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: aws.String(h.queueURL), Entries: entries,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	h.handles, h.index = nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("dlq: make messages visible again (they will be when their visibility timeout ends): %w", errors.Join(errs...))
	}
	return nil
}

// chunks yields s in parts of at most n.
func chunks[T any](s []T, n int) func(yield func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// scan receives the DLQ's messages, holding each for visibility, and calls fn with every message
// not seen before, until fn returns stop, a receive brings nothing new, or an error. Every message
// it held is made visible again before it returns, except those fn took (returned take for):
// fn deletes or moves those itself.
func (d *DLQ) scan(ctx context.Context, queueURL string, visibility time.Duration, batch int,
	fn func(m dead) (take, stop bool, err error)) (err error) {
	h := &held{d: d, queueURL: queueURL}
	defer func() {
		if rerr := h.release(ctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		msgs, err := d.receive(ctx, queueURL, batch, visibility)
		if err != nil {
			return err
		}
		fresh := 0
		stop := false
		for _, m := range msgs {
			id := aws.ToString(m.MessageId)
			if seen[id] || stop {
				h.add(m)
				continue
			}
			seen[id] = true
			fresh++
			take, s, err := fn(decode(m))
			if !take {
				h.add(m)
			}
			if err != nil {
				for _, rest := range msgs {
					if !seen[aws.ToString(rest.MessageId)] {
						h.add(rest)
					}
				}
				return err
			}
			stop = s
		}
		if stop || fresh == 0 {
			return nil
		}
	}
}

// Peek returns up to limit dead letters (0 means 10) without removing them: it receives them,
// hiding each for Config.PeekVisibility, and makes them visible again at once. A peek still
// counts as a receive: it bumps each message's ApproximateReceiveCount (and would count toward a
// redrive policy on the DLQ itself, if it had one). When the final visibility change fails, the
// messages are returned with the error, and become visible when PeekVisibility ends.
func (d *DLQ) Peek(ctx context.Context, limit int) ([]Message, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: Peek max is %d, want ≥ 0", ErrInvalid, limit)
	}
	if limit == 0 {
		limit = maxBatch
	}
	var out []Message
	err := d.scan(ctx, d.cfg.DLQURL, d.cfg.PeekVisibility, limit, func(m dead) (bool, bool, error) {
		d.identify(ctx, &m) // a job kept in S3 that the failure attribute does not name
		out = append(out, m.Message)
		return false, len(out) >= limit, nil
	})
	return out, err
}

// Show returns the dead letter of the job jobID (the envelope's id, or the failure attribute's
// job id when the body is not an envelope; for a job kept in S3, the id in its object), scanning
// the DLQ as Peek does, or a *NotFoundError (wrapping ErrNotFound). When several copies of the job
// are dead-lettered, the first one found is returned.
func (d *DLQ) Show(ctx context.Context, jobID string) (Message, error) {
	if jobID == "" {
		return Message{}, fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	var found *Message
	var un unresolved
	err := d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		d.identify(ctx, &m)
		if m.JobID == jobID {
			d.resolve(ctx, &m) // a pointer named by its failure attribute: say whether its object is readable
			found = &m.Message
			return false, true, nil
		}
		un.add(m)
		return false, false, nil
	})
	if found != nil {
		return *found, err
	}
	if err != nil {
		return Message{}, err
	}
	return Message{}, &NotFoundError{JobID: jobID, Unresolved: un.n, Cause: un.cause}
}

// Purge deletes every message of the DLQ (SQS's PurgeQueue). confirm must be the DLQ's queue
// name (the last part of its URL), or Purge returns an error wrapping ErrConfirm and deletes
// nothing. SQS allows one purge per queue every 60 seconds, and deletes the messages within up
// to 60 seconds of the call.
func (d *DLQ) Purge(ctx context.Context, confirm string) error {
	name := QueueName(d.cfg.DLQURL)
	if confirm != name {
		return fmt.Errorf("%w: to purge, confirm with the DLQ's queue name %q (got %q)", ErrConfirm, name, confirm)
	}
	if _, err := d.cfg.SQS.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(d.cfg.DLQURL)}); err != nil {
		var inProgress *sqstypes.PurgeQueueInProgress
		if errors.As(err, &inProgress) {
			return fmt.Errorf("dlq: purge %s: a purge is already in progress (SQS allows one per queue every 60 s): %w", name, err)
		}
		return fmt.Errorf("dlq: purge %s: %w", name, err)
	}
	return nil
}

// PurgePayloads is Purge for a DLQ whose dead letters may keep their jobs in S3: it first scans
// the DLQ for the pointers of its dead letters (each message made visible again at once), then
// purges the queue, then deletes the objects those pointers name (Config.Payload, which is
// required). It returns how many objects it deleted. A dead letter that arrives between the scan
// and the purge is purged with its object left in S3, for the bucket's lifecycle rule to expire.
// A failed delete is in the returned error; the purge has happened all the same.
func (d *DLQ) PurgePayloads(ctx context.Context, confirm string) (int, error) {
	if d.cfg.Payload == nil {
		return 0, fmt.Errorf("%w: PurgePayloads needs Config.Payload", ErrInvalid)
	}
	name := QueueName(d.cfg.DLQURL)
	if confirm != name {
		return 0, fmt.Errorf("%w: to purge, confirm with the DLQ's queue name %q (got %q)", ErrConfirm, name, confirm)
	}
	var ptrs []payload.Pointer
	seen := map[payload.Pointer]bool{}
	if err := d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		if m.Payload != nil && !seen[m.ptr] {
			seen[m.ptr] = true
			ptrs = append(ptrs, m.ptr)
		}
		return false, false, nil
	}); err != nil {
		return 0, fmt.Errorf("dlq: purge %s: find the dead letters' objects (nothing was purged): %w", name, err)
	}
	if err := d.Purge(ctx, confirm); err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var errs []error
	deleted := 0
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, p := range ptrs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := d.cfg.Payload.Delete(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			deleted++
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return deleted, fmt.Errorf("dlq: purged %s, but %d of %d objects were not deleted (the bucket's lifecycle rule expires them): %w",
			name, len(errs), len(ptrs), errors.Join(errs...))
	}
	return deleted, nil
}

// QueueName returns the queue name of a queue URL: its last path segment.
func QueueName(queueURL string) string {
	if u, err := url.Parse(queueURL); err == nil && u.Path != "" {
		queueURL = u.Path
	}
	queueURL = strings.TrimRight(queueURL, "/")
	return queueURL[strings.LastIndexByte(queueURL, '/')+1:]
}
