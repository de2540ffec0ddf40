package jobqueue

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// Completion events (pkg/jobevents, functions/events): the job table's stream, the events
// function behind an event source mapping of it, and the EventBridge bus it publishes to.

// Defaults of EventsProps, and what the events function is configured with.
const (
	DefaultEventsAsset     = "../dist/events-arm64.zip"
	DefaultEventsMemoryMB  = 128
	DefaultEventsTimeout   = 30 * time.Second
	DefaultEventsBatchSize = 100
	DefaultEventsRetries   = 10
	// EventsSource is the events' source (functions/events's default, pkg/jobevents.DefaultSource).
	EventsSource = "sqsworker"
	// EventsDetailType is the detail-type of a job's event (pkg/jobevents.DetailType).
	EventsDetailType = "Job Finished"
	// EventsBatchDetailType is the detail-type of a batch's (pkg/jobevents.BatchDetailType).
	EventsBatchDetailType = "Batch Finished"
	EnvEventBus           = "SQSWORKER_EVENT_BUS"
	EnvEventSource        = "SQSWORKER_EVENT_SOURCE"
)

// EventsFilterPattern is the mapping's filter criteria: inserts and modifications whose new image
// is in a final state, a job's or a batch's (it mirrors pkg/jobevents.FilterPattern, which this module does not
// import). Lambda evaluates it before invoking: the claims, renewals, progress writes and retries
// of running jobs cost no invocation.
const EventsFilterPattern = `{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"st":{"S":["succeeded","dead","cancelled","done"]}}}}`

// Alarm name suffixes of the completion events.
const (
	AlarmEventsIteratorAge = "events-iterator-age"
	AlarmEventsFailures    = "events-failures"
	AlarmEventsErrors      = "events-function-errors"
)

func init() {
	alarmSuffixes = append(alarmSuffixes, AlarmEventsIteratorAge, AlarmEventsFailures, AlarmEventsErrors)
}

// EventBusName is the bus EventsProps.CreateBus creates, "<name>-jobs".
func EventBusName(name string) string { return name + "-jobs" }

// EventsFailuresQueueName is the queue to which the events mapping sends the batches it gives up
// on, "<name>-jobs-events-failures".
func EventsFailuresQueueName(name string) string { return name + "-jobs-events-failures" }

// EventsProps turns on completion events (docs/JOB-CONTROL.md): a NEW_AND_OLD_IMAGES stream on the
// job table, the events function (functions/events) fed by it through an event source mapping
// (filter EventsFilterPattern, ReportBatchItemFailures, bisection, bounded retries, an on-failure
// queue), events:PutEvents on one bus only, and alarms. Its zero value publishes on the account's
// default bus with the defaults below.
type EventsProps struct {
	// Asset is the events function's zip built by `make build` (default
	// ../dist/events-arm64.zip).
	Asset string
	// Bus is the bus the events go to. Defaults to nil: the account's default bus, unless
	// CreateBus.
	Bus awsevents.IEventBus
	// CreateBus creates a bus of the stack, named EventBusName(Name), and publishes there
	// (subscribers' rules then live on that bus). Mutually exclusive with Bus.
	CreateBus bool
	// MemoryMB of the function (default 128) and its Timeout (default 30 s).
	MemoryMB int
	Timeout  time.Duration
	// BatchSize of the stream event source (default 100, at most 10,000).
	BatchSize int
	// RetryAttempts is the event source's MaximumRetryAttempts for a batch that failed (default
	// 10, at most 10,000). A batch given up on is named (shard and sequence numbers) in the
	// on-failure queue: its events are not published (the records are still in the table).
	RetryAttempts int
}

func (e EventsProps) withDefaults() EventsProps {
	if e.Asset == "" {
		e.Asset = DefaultEventsAsset
	}
	if e.MemoryMB == 0 {
		e.MemoryMB = DefaultEventsMemoryMB
	}
	if e.Timeout == 0 {
		e.Timeout = DefaultEventsTimeout
	}
	if e.BatchSize == 0 {
		e.BatchSize = DefaultEventsBatchSize
	}
	if e.RetryAttempts == 0 {
		e.RetryAttempts = DefaultEventsRetries
	}
	return e
}

// validate reports the rules the events' props (after defaults) break.
func (e EventsProps) validate() []error {
	e = e.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("jobqueue: Events."+format, args...)) }
	if _, err := os.Stat(e.Asset); err != nil {
		bad("Asset %s is missing: run `make build` at the repository root first (%v)", e.Asset, err)
	}
	if e.Bus != nil && e.CreateBus {
		bad("Bus and CreateBus are mutually exclusive: give a bus, or let the stack create one")
	}
	if e.MemoryMB < 128 || e.MemoryMB > 10240 {
		bad("MemoryMB=%d must be between 128 and 10240", e.MemoryMB)
	}
	if e.Timeout < 3*time.Second || e.Timeout > 15*time.Minute || e.Timeout%time.Second != 0 {
		bad("Timeout=%s must be whole seconds between 3s and 15m", e.Timeout)
	}
	if e.BatchSize < 1 || e.BatchSize > 10000 {
		bad("BatchSize=%d: a DynamoDB stream event source takes 1–10000", e.BatchSize)
	}
	if e.RetryAttempts < 0 || e.RetryAttempts > 10000 {
		bad("RetryAttempts=%d: MaximumRetryAttempts takes 0–10000", e.RetryAttempts)
	}
	return errs
}

// Events is the completion events part of a JobQueue (nil without Props.Events).
type Events struct {
	Function awslambda.Function
	LogGroup awslogs.LogGroup
	// Bus is where the events go: the one given, the stack's, or the account's default bus.
	Bus awsevents.IEventBus
	// Failures receives what the stream event source gives up on after its retries.
	Failures awssqs.Queue
}

// addEvents builds the completion events when Props.Events is set (the table's stream is turned
// on in table()).
func (jq *JobQueue) addEvents() {
	if jq.Props.Events == nil {
		return
	}
	e := jq.Props.Events.withDefaults()
	c := jq.Construct
	p := jq.Props
	ev := &Events{}
	jq.Events = ev
	switch {
	case e.Bus != nil:
		ev.Bus = e.Bus
	case e.CreateBus:
		ev.Bus = awsevents.NewEventBus(c, jsii.String("EventBus"), &awsevents.EventBusProps{
			EventBusName: jsii.String(EventBusName(p.Name)),
			Description:  jsii.String("Completion events of the sqsworker jobs of " + TableName(p.Name)),
		})
	default:
		ev.Bus = awsevents.EventBus_FromEventBusName(c, jsii.String("DefaultEventBus"), jsii.String("default"))
	}

	ev.Failures = awssqs.NewQueue(c, jsii.String("EventsFailures"), &awssqs.QueueProps{
		QueueName:           jsii.String(EventsFailuresQueueName(p.Name)),
		Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     secs(DLQRetention),
		MaxMessageSizeBytes: jsii.Number(MaxMessageSize),
	})
	suppress(ev.Failures, nagRule{
		ID:     "AwsSolutions-SQS3",
		Reason: "This queue is itself a failure destination: the job table stream's event source mapping names the batches it gives up on here (OnFailure), which cdk-nag cannot see.",
	})

	ev.LogGroup = awslogs.NewLogGroup(c, jsii.String("EventsLogs"), &awslogs.LogGroupProps{Retention: p.LogRetention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY})
	role := awsiam.NewRole(c, jsii.String("EventsRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("sqsworker completion events " + p.Name),
	})
	ev.LogGroup.GrantWrite(role)
	env := map[string]*string{EnvEventBus: ev.Bus.EventBusName(), EnvEventSource: jsii.String(EventsSource)}
	if p.LogLevel != "" {
		env[EnvLogLevel] = jsii.String(p.LogLevel)
	}
	ev.Function = awslambda.NewFunction(c, jsii.String("EventsFunction"), &awslambda.FunctionProps{
		Role:         role,
		LogGroup:     ev.LogGroup,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(e.Asset), nil),
		MemorySize:   jsii.Number(float64(e.MemoryMB)),
		Timeout:      secs(e.Timeout),
		Environment:  &env,
		Description:  jsii.String("Publishes the completion events of " + TableName(p.Name) + " to EventBridge"),
	})
	// events:PutEvents on the one bus, nothing else (no table access: the stream carries the
	// images).
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: ev.Function, Actions: jsii.Strings("events:PutEvents"), ResourceArns: jsii.Strings(*ev.Bus.EventBusArn()),
	})

	var filter map[string]any
	if err := json.Unmarshal([]byte(EventsFilterPattern), &filter); err != nil {
		panic(err) // a constant
	}
	ev.Function.AddEventSource(awslambdaeventsources.NewDynamoEventSource(jq.Table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(e.BatchSize)),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(float64(e.RetryAttempts)),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               awslambdaeventsources.NewSqsDlq(ev.Failures),
		Filters:                 &[]*map[string]any{awslambda.FilterCriteria_Filter(&filter)},
	}))
	suppress(role.Node().TryFindChild(jsii.String("DefaultPolicy")), nagRule{
		ID:        "AwsSolutions-IAM5",
		Reason:    "dynamodb:ListStreams on *, which the stream event source grants because ListStreams has no resource-level permission (the stream reads are scoped to the job table's stream).",
		AppliesTo: []any{"Resource::*"},
	})

	five := awscdk.Duration_Minutes(jsii.Number(5))
	jq.alarm("EventsIteratorAgeAlarm", AlarmEventsIteratorAge,
		"The completion events are over a minute behind the job table's stream (IteratorAge): subscribers hear late, and records near 24 hours old are lost to the stream.",
		ev.Function.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")}), 60_000)
	jq.alarm("EventsFailuresAlarm", AlarmEventsFailures,
		"The job table stream's event source gave up on batches after their retries (the on-failure queue has messages): their completion events were not published.",
		ev.Failures.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")}), 1)
	jq.alarm("EventsErrorsAlarm", AlarmEventsErrors, "The completion events function failed invocations.",
		ev.Function.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}), 1)

	out := func(id string, v *string, desc string) {
		o := awscdk.NewCfnOutput(c, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
		o.OverrideLogicalId(jsii.String(*c.Node().Id() + id))
	}
	out("EventBusName", ev.Bus.EventBusName(), "The EventBridge bus of the completion events (source "+EventsSource+", detail-type "+EventsDetailType+" or "+EventsBatchDetailType+")")
	out("EventsFunctionName", ev.Function.FunctionName(), "The completion events function")
	out("EventsFailuresQueueUrl", ev.Failures.QueueUrl(), "Where the job table stream's event source names the batches it gives up on")
}

// eventsNames are the names Props.Events derives from Name (for validateName).
func (p Props) eventsNames() []derivedName {
	if p.Events == nil {
		return nil
	}
	out := []derivedName{{"events failures queue name", EventsFailuresQueueName(p.Name), "SQS", 80}}
	if p.Events.CreateBus {
		out = append(out, derivedName{"event bus name", EventBusName(p.Name), "EventBridge", 256})
	}
	return out
}
