// Package jobqueue is the CDK construct that deploys one sqsworker job system: the queue and its
// DLQ, the job table, the worker function with its SQS event source, the Scheduler group and role,
// alarms, and the outputs producers and the sqsworker CLI read.
package jobqueue

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
)

// Defaults of Props.
const (
	DefaultMaxAttempts    = 5 // docs/ARCHITECTURE.md §4: MaxAttempts per kind, default 5
	DefaultMemoryMB       = 512
	DefaultTimeout        = 30 * time.Second
	DefaultBatchSize      = 10
	DefaultMaxConcurrency = 10
	DefaultWorkerAsset    = "../dist/worker-arm64.zip"
	DLQRetention          = 14 * 24 * time.Hour
)

// Props configures a JobQueue. The zero value is a standard queue with the defaults above.
type Props struct {
	// Name prefixes the resource names (pkg/awslocal): queue <Name>-jobs, DLQ <Name>-jobs-dlq,
	// table <Name>-jobs, schedule group <Name>-jobs, scheduler DLQ <Name>-jobs-scheduler-dlq,
	// dashboard <Name>-jobs, alarms <Name>-jobs-<suffix>; with an outbox the relays' schedule
	// group <Name>-outbox, with the DynamoDB outbox its table <Name>-outbox and failures queue
	// <Name>-outbox-relay-failures. Required: letters, digits, '-' and '_', at most 59
	// characters with scheduling (the schedule group's limit of 64), else 71 (66 with FIFO: the
	// DLQ's limit of 80 with ".fifo"), and 57 with either outbox (the relays' group).
	// MaxNameLength gives the limit for a set of props; see names.go.
	Name string
	// FIFO makes both queues FIFO with content-based deduplication (batch ≤ 10, no window).
	FIFO bool
	// EncryptionKey, when set, encrypts the queue and its DLQ with this customer-managed KMS key
	// (QueueEncryption KMS) instead of SSE-SQS. The worker gets kms:Decrypt (consume) and
	// kms:GenerateDataKey + kms:Decrypt (send to the DLQ) on it; GrantEnqueue and the scheduler
	// role get kms:GenerateDataKey + kms:Decrypt. The scheduler DLQ and the alarm topic keep their
	// own encryption. nil (the default): SSE-SQS.
	EncryptionKey awskms.IKey

	// MaxAttempts is the largest MaxAttempts of any kind the worker runs (default 5).
	MaxAttempts int
	// MaxReceiveCount is the redrive policy's maxReceiveCount (default and minimum 3 × MaxAttempts).
	MaxReceiveCount int
	// VisibilityTimeout of the queue (default 6 × Timeout + BatchingWindow).
	VisibilityTimeout time.Duration

	// WorkerAsset is the worker zip built by `make build` (default ../dist/worker-arm64.zip,
	// relative to infra/ where cdk runs).
	WorkerAsset string
	// MemoryMB of the worker function (default 512).
	MemoryMB int
	// Timeout of the worker function (default 30s, at most 15 minutes).
	Timeout time.Duration
	// ReservedConcurrency reserves this many of the account's concurrent executions for the
	// worker and caps it there. Must be ≥ MaxConcurrency when set, and leave the account at
	// least 100 unreserved (Lambda refuses the deploy otherwise). Defaults to 0: none, the
	// event source's MaxConcurrency bounds the worker. See infra/README.md, "Reserved
	// concurrency".
	ReservedConcurrency int
	// LogLevel, Concurrency and DeadlineMargin are passed as SQSWORKER_LOG_LEVEL,
	// SQSWORKER_CONCURRENCY and SQSWORKER_DEADLINE_MARGIN when set.
	LogLevel       string
	Concurrency    int
	DeadlineMargin time.Duration

	// BatchSize of the event source (default 10; FIFO ≤ 10; standard ≤ 10,000).
	BatchSize int
	// BatchingWindow of the event source (0: none; required ≥ 1s when BatchSize > 10; FIFO: 0).
	BatchingWindow time.Duration
	// MaxConcurrency is the event source's MaximumConcurrency, 2–1000 (default 10 unless
	// provisioned mode is chosen; the two are mutually exclusive).
	MaxConcurrency int
	// MinPollers and MaxPollers choose provisioned mode (ProvisionedPollerConfig) for
	// fast-scaling high-volume queues: minimum 2–200, maximum 2–MaxPollersLimit (2,000), min ≤
	// max. Setting either one selects the mode; 0 leaves that bound to Lambda's default (2 and 200).
	MinPollers int
	MaxPollers int
	// LogRetention of the worker's log group (default one month).
	LogRetention awslogs.RetentionDays

	// DeletionProtection turns on the table's deletion protection and retains the table when the
	// stack is deleted, and so for the outbox table with Outbox (it holds jobs committed but not
	// sent). They are the only resources retained: the queues, the schedule groups (and so their
	// schedules), the log groups, the payload bucket and the rest are deleted with the stack
	// either way.
	DeletionProtection bool
	// DisableScheduling omits the schedule group and the scheduler role.
	DisableScheduling bool
	// WorkerEnqueues lets jobs enqueue follow-up jobs from the worker (a custom worker main with
	// a producer): the worker gets what GrantEnqueue gives (SendMessage on the queue and, when
	// scheduling is enabled, the group's schedule actions and iam:PassRole on the scheduler role)
	// and the environment a schedule.Config needs (EnvQueueARN, EnvSchedulerRoleARN,
	// EnvSchedulerDLQARN). Default false: the worker only consumes, and has no Scheduler actions.
	WorkerEnqueues bool
	// WorkerStatusQueries is for a worker main whose jobs call pkg/status lookups (Table.GetByID,
	// Table.List): the worker also gets dynamodb:Query on the table's two indexes (by name) and
	// dynamodb:BatchGetItem on the table. Default false: the worker gets exactly what
	// functions/worker calls, GetItem, PutItem and UpdateItem on the table (WorkerTableActions),
	// which also covers pkg/status's Get, Record*, Cancel and ResetForRedrive.
	WorkerStatusQueries bool
	// RecursiveLoop is the worker's recursive loop detection setting: awslambda.RecursiveLoop_TERMINATE
	// (the default, Lambda's own) stops an invocation Lambda counts as the ~17th of one chain of
	// requests, and the alarm AlarmRecursiveLoopStopped watches for it; RecursiveLoop_ALLOW turns
	// detection off (and the metric, so that alarm is not created), for job designs that chain
	// more than 16 generations of follow-up jobs. See infra/README.md, "Recursive loop detection".
	RecursiveLoop awslambda.RecursiveLoop
	// AlarmEmail, when set, subscribes an address to the alarm topic.
	AlarmEmail string

	// Api, when set, deploys the HTTP producer (functions/api) behind a function URL: see
	// ApiProps (api.go). Defaults to nil: no API.
	Api *ApiProps
	// Outbox, when set, adds the transactional outbox (outbox.go). Defaults to nil: none.
	Outbox *OutboxProps
	// Batches turns on batches and chains in the worker (batches.go, pkg/batch): it counts the
	// children of batches and the steps of chains in the job table, and puts callbacks and next
	// steps into the outbox (SQSWORKER_BATCHES_OUTBOX_TABLE, and PutItem on the outbox table's
	// job keys). It needs Outbox, whose relay sends them. Defaults to false.
	Batches bool
	// Events, when set, publishes a completion event to EventBridge for every job that ends
	// (events.go): a stream on the job table, the events function, a grant to put events on one
	// bus. Defaults to nil: none.
	Events *EventsProps

	// PayloadBucket adds an S3 bucket for jobs larger than SQS allows (payload.go, pkg/payload):
	// encrypted, TLS-only, private, its objects expired after PayloadExpiry (those the worker
	// marks done after PayloadDoneExpiry); GrantEnqueue gives s3:PutObject under sqsworker/, the
	// worker the actions of PayloadWorkerActions and the rest, and its environment
	// SQSWORKER_PAYLOAD_BUCKET and SQSWORKER_PAYLOAD_CLEANUP=mark. Default false: no bucket.
	PayloadBucket bool
	// PostgresOutbox, when set, deploys the relay of a PostgreSQL transactional outbox (pgoutbox.go).
	PostgresOutbox *PostgresOutboxProps

	// Queues adds named queues beside the default one (namedqueues.go, docs/QUEUES.md):
	// "critical", "bulk", each with its own queue, DLQ, redrive budget, event source mapping and
	// MaximumConcurrency, alarms and dashboard row. The worker serves them all (it is then given
	// SQSWORKER_QUEUES instead of SQSWORKER_QUEUE_URL and SQSWORKER_DLQ_URL); producers
	// (GrantEnqueue), the API, the relays and the scheduler role may send to each. Defaults to
	// nil: the default queue alone, and a template as before.
	Queues []QueueProps
	// Routes routes kinds to queues, kind → queue name (DefaultQueueName or a name of Queues): the
	// functions get it as SQSWORKER_ROUTES (the API sends each kind to its queue; the worker
	// counts jobs that arrive elsewhere). A kind routed to a queue the stack does not have fails
	// Validate. Kinds registered with jobs.WithQueue in a worker main need no entry. Defaults to
	// nil: every kind to the default queue.
	Routes map[string]string
}

// Poller bounds for SQS event sources (checked 2026-11-29 with the docs search).
//
// The Lambda API reference, ProvisionedPollerConfig
// (https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html, current
// localized copy https://docs.aws.amazon.com/id_id/lambda/latest/api/API_ProvisionedPollerConfig.html),
// says that for SQS event source mappings MaximumPollers accepts 2–10,000 (default 200) and
// MinimumPollers needs at least 2 (default 2), with a valid range up to 200.
// The CloudFormation resource (AWS::Lambda::EventSourceMapping ProvisionedPollerConfig,
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-provisionedpollerconfig.html)
// still documents MaximumPollers 1–2,000, and aws-cdk-lib 2.276.0's SqsEventSource rejects a
// maximum above 2,000 ("Maximum provisioned pollers for SQS must be between 2 and 2000").
// Since this construct deploys through CDK and CloudFormation, it validates 2–2,000 so that a
// larger value fails here with a clear message rather than as a jsii panic; raise
// MaxPollersLimit when CDK and CloudFormation accept the API's 10,000.
const (
	MinPollersLow   = 2
	MinPollersLimit = 200
	MaxPollersLimit = 2000
)

// withDefaults returns p with the zero fields defaulted.
func (p Props) withDefaults() Props {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxReceiveCount == 0 {
		p.MaxReceiveCount = 3 * p.MaxAttempts
	}
	if p.WorkerAsset == "" {
		p.WorkerAsset = DefaultWorkerAsset
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = DefaultMemoryMB
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.BatchSize == 0 {
		p.BatchSize = DefaultBatchSize
	}
	if p.MaxConcurrency == 0 && !p.Provisioned() {
		p.MaxConcurrency = DefaultMaxConcurrency
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if p.VisibilityTimeout == 0 {
		p.VisibilityTimeout = 6*p.Timeout + p.BatchingWindow
	}
	if p.RecursiveLoop == "" {
		p.RecursiveLoop = awslambda.RecursiveLoop_TERMINATE
	}
	return p
}

// Provisioned reports whether p selects provisioned mode (MinPollers or MaxPollers set).
func (p Props) Provisioned() bool { return p.MinPollers != 0 || p.MaxPollers != 0 }

// Validate reports every rule p (after defaults) breaks, joined; nil when p is deployable.
func (p Props) Validate() error {
	p = p.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("jobqueue: "+format, args...)) }
	if err := validateName(p); err != nil {
		bad("%v", err)
	}
	if p.RecursiveLoop != awslambda.RecursiveLoop_TERMINATE && p.RecursiveLoop != awslambda.RecursiveLoop_ALLOW {
		bad("RecursiveLoop=%q must be awslambda.RecursiveLoop_TERMINATE or awslambda.RecursiveLoop_ALLOW", p.RecursiveLoop)
	}
	if p.MaxAttempts < 1 {
		bad("MaxAttempts=%d must be at least 1", p.MaxAttempts)
	}
	if p.MaxReceiveCount < 3*p.MaxAttempts {
		bad("MaxReceiveCount=%d must be at least 3 × MaxAttempts = %d (docs/ARCHITECTURE.md §4: the redrive policy is the safety net, not the retry policy)", p.MaxReceiveCount, 3*p.MaxAttempts)
	}
	if p.MaxReceiveCount > 1000 {
		bad("MaxReceiveCount=%d exceeds SQS's maximum of 1000", p.MaxReceiveCount)
	}
	if p.Timeout < time.Second || p.Timeout > 15*time.Minute || p.Timeout%time.Second != 0 {
		bad("Timeout=%s must be whole seconds between 1s and 15m", p.Timeout)
	}
	if p.BatchingWindow < 0 || p.BatchingWindow > 5*time.Minute || p.BatchingWindow%time.Second != 0 {
		bad("BatchingWindow=%s must be whole seconds between 0 and 5m", p.BatchingWindow)
	}
	if min := 6*p.Timeout + p.BatchingWindow; p.VisibilityTimeout < min {
		bad("queue VisibilityTimeout=%s must be at least 6 × function Timeout + BatchingWindow = %s (AWS's rule for SQS event sources)", p.VisibilityTimeout, min)
	}
	if p.VisibilityTimeout > 12*time.Hour || p.VisibilityTimeout%time.Second != 0 {
		bad("queue VisibilityTimeout=%s must be whole seconds and at most 12h", p.VisibilityTimeout)
	}
	if p.MemoryMB < 128 || p.MemoryMB > 10240 {
		bad("MemoryMB=%d must be between 128 and 10240", p.MemoryMB)
	}
	if p.Provisioned() {
		if p.MaxConcurrency != 0 {
			bad("MaxConcurrency=%d and provisioned mode (MinPollers=%d, MaxPollers=%d) are mutually exclusive: choose one", p.MaxConcurrency, p.MinPollers, p.MaxPollers)
		}
		if p.MinPollers != 0 && (p.MinPollers < MinPollersLow || p.MinPollers > MinPollersLimit) {
			bad("MinPollers=%d must be between %d and %d", p.MinPollers, MinPollersLow, MinPollersLimit)
		}
		if p.MaxPollers != 0 && (p.MaxPollers < MinPollersLow || p.MaxPollers > MaxPollersLimit) {
			bad("MaxPollers=%d must be between %d and %d (CloudFormation's and CDK's limit for SQS event sources; the Lambda API documents 10,000)", p.MaxPollers, MinPollersLow, MaxPollersLimit)
		}
		if p.MinPollers != 0 && p.MaxPollers != 0 && p.MinPollers > p.MaxPollers {
			bad("MinPollers=%d is above MaxPollers=%d", p.MinPollers, p.MaxPollers)
		}
	} else if p.MaxConcurrency < 2 || p.MaxConcurrency > 1000 {
		bad("MaxConcurrency=%d must be between 2 and 1000 (the event source's MaximumConcurrency)", p.MaxConcurrency)
	}
	if p.ReservedConcurrency < 0 {
		bad("ReservedConcurrency=%d must not be negative", p.ReservedConcurrency)
	}
	if p.ReservedConcurrency > 0 && !p.Provisioned() && p.ReservedConcurrency < p.MaxConcurrency {
		bad("ReservedConcurrency=%d is below MaxConcurrency=%d: throttled invokes use up receive counts and send jobs to the DLQ", p.ReservedConcurrency, p.MaxConcurrency)
	}
	if p.FIFO {
		if p.BatchSize < 1 || p.BatchSize > 10 {
			bad("BatchSize=%d: a FIFO queue's event source takes 1–10", p.BatchSize)
		}
		if p.BatchingWindow != 0 {
			bad("BatchingWindow=%s: a FIFO queue's event source takes no batching window", p.BatchingWindow)
		}
	} else {
		if p.BatchSize < 1 || p.BatchSize > 10000 {
			bad("BatchSize=%d: a standard queue's event source takes 1–10000", p.BatchSize)
		}
		if p.BatchSize > 10 && p.BatchingWindow < time.Second {
			bad("BatchSize=%d above 10 needs a BatchingWindow of at least 1s", p.BatchSize)
		}
	}
	if p.Concurrency < 0 {
		bad("Concurrency=%d must not be negative", p.Concurrency)
	}
	if p.Api != nil {
		errs = append(errs, p.Api.validate()...)
		errs = append(errs, p.validateApiDedup()...)
	}
	if p.Outbox != nil {
		errs = append(errs, p.Outbox.validate()...)
	}
	if p.Events != nil {
		errs = append(errs, p.Events.validate()...)
	}
	if p.PostgresOutbox != nil {
		errs = append(errs, p.PostgresOutbox.validate())
	}
	errs = append(errs, p.validateQueues()...)
	errs = append(errs, p.validateBatches())
	return errors.Join(errs...)
}
