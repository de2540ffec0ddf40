package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// SchedulerAPI is the part of the EventBridge Scheduler client this package uses;
// *scheduler.Client implements it. Tests can pass a fake.
type SchedulerAPI interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, optFns ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error)
}

var _ SchedulerAPI = (*scheduler.Client)(nil)

// EventBridge Scheduler limits this package checks before calling AWS.
const (
	// MaxInputBytes is the largest target input (the envelope, or the recurring template)
	// EventBridge Scheduler accepts: 256 KB. It is below SQS's 1 MiB message limit, so a job
	// delayed through a schedule must be smaller than one sent directly.
	MaxInputBytes = 256 * 1024
	// MaxNameLength is the longest schedule (and schedule group) name.
	MaxNameLength = 64
	// MaxDescriptionLength is the longest schedule description.
	MaxDescriptionLength = 512
	// MaxRetryAttempts is the largest target retry count, also AWS's default.
	MaxRetryAttempts = 185
	// MaxEventAge is the longest (and AWS's default) time Scheduler keeps retrying one firing.
	MaxEventAge = 24 * time.Hour
	// MinEventAge is the shortest allowed MaxEventAge.
	MinEventAge = time.Minute
	// MaxFlexibleWindow is the largest flexible time window.
	MaxFlexibleWindow = 1440 * time.Minute
	// MaxGroupIDLength is the longest SQS FIFO MessageGroupId.
	MaxGroupIDLength = 128
)

// DefaultGroup is the schedule group used when Config.Group is empty; it always exists.
const DefaultGroup = "default"

// Errors wrapped by the Client's errors; each error's message says what is wrong.
var (
	// ErrInvalid is wrapped by every validation error: nothing was sent to AWS.
	ErrInvalid = errors.New("schedule: invalid")
	// ErrNotFound is wrapped when a recurring schedule does not exist (or is not one of this
	// client's: see ErrNotOwned).
	ErrNotFound = errors.New("schedule: not found")
	// ErrNotOwned is wrapped when a schedule of that name exists in the group but is not a
	// recurring job schedule targeting this client's queue; the client neither reads, changes
	// nor deletes it.
	ErrNotOwned = errors.New("schedule: schedule belongs to another target")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Config configures a Client. Scheduler, QueueARN and RoleARN are required; the zero value of
// every other field is its default.
type Config struct {
	// Scheduler is the EventBridge Scheduler client, e.g. scheduler.NewFromConfig(cfg). Required.
	Scheduler SchedulerAPI
	// Group is the schedule group holding the client's schedules. It must exist (the "default"
	// group always does). Defaults to "default".
	Group string
	// QueueARN is the job queue, the target of every schedule. A ".fifo" queue needs a
	// message group id on every schedule, and content-based deduplication, since a Scheduler
	// target cannot set a deduplication id. Required.
	QueueARN string
	// RoleARN is the IAM role Scheduler assumes to send to the queue (it needs
	// sqs:SendMessage, and kms:GenerateDataKey/Decrypt for an encrypted queue). Required; any ARN
	// on emulators.
	RoleARN string
	// DeadLetterARN is an SQS queue receiving the firings Scheduler failed to deliver after
	// its retries. Optional: without it such firings are dropped.
	DeadLetterARN string
	// RetryMaxAttempts is how many times Scheduler retries a failed delivery, 1-185.
	// Defaults to 185 (AWS's default); -1 means no retries.
	RetryMaxAttempts int
	// MaxEventAge is how long Scheduler keeps retrying one firing, 1m-24h in whole seconds.
	// Defaults to 24h (AWS's default).
	MaxEventAge time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Client creates and manages EventBridge Scheduler schedules whose target is a job queue:
// one-time schedules for delayed jobs (ScheduleJob, CancelJob) and recurring schedules that
// enqueue a job on every occurrence (Upsert, Get, List, Delete). It is safe for concurrent use.
type Client struct {
	api         SchedulerAPI
	group       string
	queueARN    string
	roleARN     string
	dlqARN      string
	retries     int32
	maxEventAge int32
	fifo        bool
	now         func() time.Time
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Scheduler == nil {
		return nil, invalidf("Config.Scheduler is required")
	}
	if !isARN(cfg.QueueARN, "sqs") {
		return nil, invalidf("Config.QueueARN %q is not an SQS queue ARN (arn:aws:sqs:region:account:name)", cfg.QueueARN)
	}
	if !isARN(cfg.RoleARN, "") {
		return nil, invalidf("Config.RoleARN %q is not an ARN (the role Scheduler assumes to send to the queue)", cfg.RoleARN)
	}
	if cfg.DeadLetterARN != "" && !isARN(cfg.DeadLetterARN, "sqs") {
		return nil, invalidf("Config.DeadLetterARN %q is not an SQS queue ARN", cfg.DeadLetterARN)
	}
	group := cfg.Group
	if group == "" {
		group = DefaultGroup
	}
	if err := validateName("Config.Group", group); err != nil {
		return nil, err
	}
	retries := cfg.RetryMaxAttempts
	switch {
	case retries == 0:
		retries = MaxRetryAttempts
	case retries == -1:
		retries = 0
	case retries < -1 || retries > MaxRetryAttempts:
		return nil, invalidf("Config.RetryMaxAttempts %d is outside 1-%d (-1 for no retries)", retries, MaxRetryAttempts)
	}
	age := cfg.MaxEventAge
	if age == 0 {
		age = MaxEventAge
	}
	if age < MinEventAge || age > MaxEventAge || age%time.Second != 0 {
		return nil, invalidf("Config.MaxEventAge %s is outside 1m-24h or not whole seconds", age)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Client{
		api:         cfg.Scheduler,
		group:       group,
		queueARN:    cfg.QueueARN,
		roleARN:     cfg.RoleARN,
		dlqARN:      cfg.DeadLetterARN,
		retries:     int32(retries),
		maxEventAge: int32(age / time.Second),
		fifo:        strings.HasSuffix(cfg.QueueARN, ".fifo"),
		now:         now,
	}, nil
}

// Group returns the schedule group the client uses.
func (c *Client) Group() string { return c.group }

// isARN reports whether s looks like arn:partition:service:… (service "" matches any).
func isARN(s, service string) bool {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] == "" || parts[5] == "" {
		return false
	}
	return service == "" || parts[2] == service
}

// validateName checks a schedule or group name: 1-64 characters of [0-9a-zA-Z-_.].
func validateName(what, name string) error {
	if name == "" {
		return invalidf("%s is empty", what)
	}
	if len(name) > MaxNameLength {
		return invalidf("%s %.32q… is %d characters long, the limit is %d", what, name, len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !nameChar(name[i]) {
			return invalidf("%s %q: character %q at %d is not allowed (want [0-9a-zA-Z-_.])", what, name, name[i], i)
		}
	}
	return nil
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// validateGroupID checks a FIFO message group id against the queue: required on a FIFO queue,
// optional on a standard one (fair queues), 1-128 printable ASCII characters.
func (c *Client) validateGroupID(groupID string) error {
	if groupID == "" {
		if c.fifo {
			return invalidf("queue %s is FIFO: a message group id is required", c.queueARN)
		}
		return nil
	}
	if len(groupID) > MaxGroupIDLength {
		return invalidf("message group id %.32q… is %d characters long, the limit is %d", groupID, len(groupID), MaxGroupIDLength)
	}
	for i := 0; i < len(groupID); i++ {
		if groupID[i] < '!' || groupID[i] > '~' {
			return invalidf("message group id %q: character %q at %d is not allowed (printable ASCII only)", groupID, groupID[i], i)
		}
	}
	return nil
}

// Names of one-time job schedules: JobSchedulePrefix + job id when the id is short and made of
// name characters, else JobScheduleHashPrefix + 40 hex digits of the id's SHA-256. Recurring
// schedules may not use the prefix.
const (
	JobSchedulePrefix     = "sqsworker-job-"
	JobScheduleHashPrefix = "sqsworker-jobh-"
	reservedPrefix        = "sqsworker-"
)

// ScheduleName returns the name of the one-time schedule of jobID, a valid schedule name
// derived from the id alone (so that scheduling twice finds the first schedule, and CancelJob
// needs only the id).
func ScheduleName(jobID string) string {
	ok := jobID != "" && len(JobSchedulePrefix)+len(jobID) <= MaxNameLength
	for i := 0; ok && i < len(jobID); i++ {
		ok = nameChar(jobID[i])
	}
	if ok {
		return JobSchedulePrefix + jobID
	}
	sum := sha256.Sum256([]byte(jobID))
	return JobScheduleHashPrefix + hex.EncodeToString(sum[:20])
}

// ScheduleJob creates a one-time schedule that sends env to the queue at at (rounded up to the
// second; Scheduler fires within a minute of it), with groupID as the FIFO message group id
// ("" on a standard queue). The schedule deletes itself after it fires.
//
// It returns the schedule's name, [ScheduleName](env.ID). A schedule of that name already
// existing means the job is already scheduled: ScheduleJob then returns the name and nil, so
// retrying a ScheduleJob is safe. env must be valid, at in the future, and the envelope's JSON
// at most [MaxInputBytes]; otherwise the error wraps [ErrInvalid] and nothing is created.
func (c *Client) ScheduleJob(ctx context.Context, env jobs.Envelope, at time.Time, groupID string) (string, error) {
	in, err := c.jobScheduleInput(env, at, groupID, false)
	if err != nil {
		return "", err
	}
	if _, err := c.api.CreateSchedule(ctx, in); err != nil {
		if isConflict(err) {
			return *in.Name, nil
		}
		return "", fmt.Errorf("schedule: create schedule %s for job %s: %w", *in.Name, env.ID, err)
	}
	return *in.Name, nil
}

// ForQueue returns a Client like c whose schedules send to another queue of the stack (same
// group, role, retry policy and DLQ): the role must be allowed to send to that queue too (the CDK
// stack's is, for every queue of Props.Queues).
func (c *Client) ForQueue(queueARN string) (*Client, error) {
	if !isARN(queueARN, "sqs") {
		return nil, invalidf("queue ARN %q is not an SQS queue ARN (arn:aws:sqs:region:account:name)", queueARN)
	}
	cc := *c
	cc.queueARN, cc.fifo = queueARN, strings.HasSuffix(queueARN, ".fifo")
	return &cc, nil
}

// ScheduleJobOn is ScheduleJob onto another queue of the stack, given by its ARN (see ForQueue):
// a producer of several queues (producer.QueueScheduler) schedules each queue's delayed jobs
// through it.
func (c *Client) ScheduleJobOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, groupID string) (string, error) {
	cc, err := c.ForQueue(queueARN)
	if err != nil {
		return "", err
	}
	return cc.ScheduleJob(ctx, env, at, groupID)
}

// ScheduleResend creates a one-time schedule that sends env, a copy of a job that has run
// already (a job that sleeps with jobs.Sleep, a retry further ahead than SQS's visibility
// limit), to the queue at at, as ScheduleJob does, under [ResendScheduleName](env.ID, at): a name
// of its own for each copy, so that a job that sleeps again right after a schedule of its fired
// is not mistaken for a copy already scheduled (Scheduler deletes a fired schedule a little
// later). Scheduling the same copy twice is not an error. pkg/worker calls it through
// worker.Config.Scheduler. ListJobs and the console list these schedules with the others;
// CancelJob, which knows only the job id, does not delete them (a cancelled job's fired copy
// is acknowledged without running).
func (c *Client) ScheduleResend(ctx context.Context, env jobs.Envelope, at time.Time, groupID string) (string, error) {
	in, err := c.jobScheduleInput(env, at, groupID, true)
	if err != nil {
		return "", err
	}
	if _, err := c.api.CreateSchedule(ctx, in); err != nil {
		if isConflict(err) {
			return *in.Name, nil
		}
		return "", fmt.Errorf("schedule: create schedule %s for a copy of job %s: %w", *in.Name, env.ID, err)
	}
	return *in.Name, nil
}

// ScheduleResendOn is ScheduleResend onto another queue of the stack, given by its ARN (see
// ForQueue): a worker of several queues (worker.QueueScheduler) schedules each copy onto the
// queue its message came from.
func (c *Client) ScheduleResendOn(ctx context.Context, queueARN string, env jobs.Envelope, at time.Time, groupID string) (string, error) {
	cc, err := c.ForQueue(queueARN)
	if err != nil {
		return "", err
	}
	return cc.ScheduleResend(ctx, env, at, groupID)
}

// ResendScheduleName returns the name of the schedule of a copy of job jobID due at at (rounded
// up to the second, as the schedule's expression is): ScheduleName of the id followed by
// ".at" and the unix second.
func ResendScheduleName(jobID string, at time.Time) string {
	if r := at.Truncate(time.Second); !r.Equal(at) {
		at = r.Add(time.Second)
	}
	return ScheduleName(jobID + ".at" + strconv.FormatInt(at.Unix(), 10))
}

// jobScheduleInput validates and builds ScheduleJob's request (ScheduleResend's with resend).
func (c *Client) jobScheduleInput(env jobs.Envelope, at time.Time, groupID string, resend bool) (*scheduler.CreateScheduleInput, error) {
	body, err := env.MarshalJSON() // validates
	if err != nil {
		return nil, fmt.Errorf("%w: job %q: %w", ErrInvalid, env.ID, err)
	}
	if len(body) > MaxInputBytes {
		return nil, invalidf("job %s: envelope is %d bytes, above EventBridge Scheduler's target input limit of %d bytes (256 KB)", env.ID, len(body), MaxInputBytes)
	}
	if err := c.validateGroupID(groupID); err != nil {
		return nil, err
	}
	if at.IsZero() {
		return nil, invalidf("job %s: the time to run it is zero", env.ID)
	}
	if r := at.Truncate(time.Second); !r.Equal(at) {
		at = r.Add(time.Second) // never early
	}
	if now := c.now(); !at.After(now) {
		return nil, invalidf("job %s: run time %s is not in the future (now %s)", env.ID, at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if y := at.UTC().Year(); y > 2199 {
		return nil, invalidf("job %s: run time %s is after 2199, Scheduler's last year", env.ID, at.UTC().Format(time.RFC3339))
	}
	name := ScheduleName(env.ID)
	if resend {
		name = ResendScheduleName(env.ID, at)
	}
	return &scheduler.CreateScheduleInput{
		Name:                       aws.String(name),
		GroupName:                  aws.String(c.group),
		Description:                aws.String("sqsworker delayed job, kind " + env.Kind),
		ScheduleExpression:         aws.String(At(at, time.UTC)),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		State:                      types.ScheduleStateEnabled,
		Target:                     c.target(string(body), groupID),
	}, nil
}

// target returns the schedule target: the queue, with the retry policy and DLQ of the Config.
func (c *Client) target(input, groupID string) *types.Target {
	t := &types.Target{
		Arn:     aws.String(c.queueARN),
		RoleArn: aws.String(c.roleARN),
		Input:   aws.String(input),
		RetryPolicy: &types.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(c.retries),
			MaximumEventAgeInSeconds: aws.Int32(c.maxEventAge),
		},
	}
	if groupID != "" {
		t.SqsParameters = &types.SqsParameters{MessageGroupId: aws.String(groupID)}
	}
	if c.dlqARN != "" {
		t.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(c.dlqARN)}
	}
	return t
}

// CancelJob deletes the one-time schedule of jobID. A schedule that does not exist (it has
// fired, or was cancelled already) is not an error. A job whose schedule has fired is already
// in the queue: cancelling it there is the job status store's business.
func (c *Client) CancelJob(ctx context.Context, jobID string) error {
	if jobID == "" {
		return invalidf("job id is empty")
	}
	name := ScheduleName(jobID)
	_, err := c.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(c.group)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("schedule: delete schedule %s of job %s: %w", name, jobID, err)
	}
	return nil
}

func isConflict(err error) bool {
	var ce *types.ConflictException
	return errors.As(err, &ce) || apiErrorCode(err) == "ConflictException"
}

func isNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf) || apiErrorCode(err) == "ResourceNotFoundException"
}

func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
