package jobqueue

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// The outbox table's names; they mirror pkg/outbox/dynamooutbox (TableInput), which this module
// does not import.
const (
	OutboxAttrPK          = "pk"
	OutboxAttrSK          = "sk"
	OutboxAttrGSIPK       = "gpk"
	OutboxAttrOrd         = "ord"
	OutboxAttrJobID       = "job_id"
	OutboxIndexByState    = "by_state"
	OutboxIndexByID       = "by_id"
	OutboxStreamFilter    = "INSERT" // dynamooutbox.StreamFilterPattern: {"eventName":["INSERT"]}
	DefaultRelayAsset     = "../dist/relay-arm64.zip"
	DefaultRelayMemoryMB  = 256
	DefaultRelayTimeout   = 30 * time.Second
	DefaultRelayBatchSize = 100
	DefaultOutboxAttempts = 10
	DefaultStreamRetries  = 3
	DefaultSweepAfter     = time.Minute
)

// Alarm name suffixes of the DynamoDB outbox (AlarmName(Props.Name, suffix)); distinct from the
// PostgreSQL outbox's (pgoutbox.go), so that a stack may have both.
const (
	AlarmOutboxIteratorAge         = "outbox-iterator-age"
	AlarmOutboxRelayFailures       = "outbox-relay-failures"
	AlarmOutboxDeadJobs            = "outbox-dead-jobs"
	AlarmOutboxRelayFunctionErrors = "outbox-relay-function-errors"
)

// RelayTableActions (on the outbox table) and RelayIndexActions (on its two indexes, by name)
// are the DynamoDB calls of the relay function (functions/relay, pkg/outbox/dynamooutbox): it
// claims, releases and kills jobs with UpdateItem, deletes sent ones with DeleteItem, reads a
// job with GetItem and a batch of them with BatchGetItem, and queries the table (a FIFO group's
// head) and the indexes (by_state: the sweep's due jobs and CountDead; by_id: a job's key).
var (
	RelayTableActions = []string{"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	RelayIndexActions = []string{"dynamodb:Query"}
)

// OutboxByStateProjection is the INCLUDE projection of OutboxIndexByState.
var OutboxByStateProjection = []string{"available_at", "created_at"}

// outboxKeyPrefixes are the partition key prefixes of outbox items ("job#<id>", "fifo#<queue>#<group>").
var outboxKeyPrefixes = []string{"job#*", "fifo#*"}

// queuedRecordAttributes are the attributes of the job table a producer's queued record writes
// (status.QueuedWrite): GrantOutboxWrite allows no others.
var queuedRecordAttributes = []string{"pk", "kind", "key", "st", "runs", "upd", "exp", "job_id", "hash"}

// Environment variables of the relay function (functions/internal/config).
const (
	EnvOutboxTable       = "SQSWORKER_OUTBOX_TABLE"
	EnvOutboxSweepAfter  = "SQSWORKER_OUTBOX_SWEEP_AFTER"
	EnvOutboxMaxAttempts = "SQSWORKER_OUTBOX_MAX_ATTEMPTS"
	EnvOutboxLease       = "SQSWORKER_OUTBOX_LEASE"
)

// OutboxProps turns on the transactional outbox (docs/OUTBOX.md, "DynamoDB"): a table of its own
// with a stream, the relay function fed by the stream (an event source mapping that passes
// inserts only, with ReportBatchItemFailures, bisection, bounded retries and an on-failure
// queue), a sweep schedule invoking the relay every minute, alarms and dashboard widgets. Its zero
// value is the defaults below.
type OutboxProps struct {
	// RelayAsset is the relay zip built by `make build` (default ../dist/relay-arm64.zip).
	RelayAsset string
	// MemoryMB of the relay (default 256).
	MemoryMB int
	// Timeout of the relay (default 30s); a claim's lease is the timeout plus 30 s, so that a
	// relay that timed out leaves its jobs to the sweeper soon after.
	Timeout time.Duration
	// BatchSize of the stream event source (default 100, at most 10,000).
	BatchSize int
	// RetryAttempts is the event source's MaximumRetryAttempts for a batch that failed (default 3,
	// at most 10,000). Jobs of a discarded batch stay in the table: the sweeper sends them.
	RetryAttempts int
	// MaxAttempts is how many sends a job gets before it is dead (default 10).
	MaxAttempts int
	// SweepAfter is how old a job never attempted must be before the sweep takes it from the
	// stream path (default 1 minute).
	SweepAfter time.Duration
}

func (o OutboxProps) withDefaults() OutboxProps {
	if o.RelayAsset == "" {
		o.RelayAsset = DefaultRelayAsset
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = DefaultRelayMemoryMB
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultRelayTimeout
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultRelayBatchSize
	}
	if o.RetryAttempts == 0 {
		o.RetryAttempts = DefaultStreamRetries
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultOutboxAttempts
	}
	if o.SweepAfter == 0 {
		o.SweepAfter = DefaultSweepAfter
	}
	return o
}

// validate reports the rules the outbox's props (after defaults) break.
func (o OutboxProps) validate() []error {
	o = o.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("jobqueue: Outbox."+format, args...)) }
	if _, err := os.Stat(o.RelayAsset); err != nil {
		bad("RelayAsset %s is missing: run `make build` at the repository root first (%v)", o.RelayAsset, err)
	}
	if o.MemoryMB < 128 || o.MemoryMB > 10240 {
		bad("MemoryMB=%d must be between 128 and 10240", o.MemoryMB)
	}
	if o.Timeout < 10*time.Second || o.Timeout > 15*time.Minute || o.Timeout%time.Second != 0 {
		bad("Timeout=%s must be whole seconds between 10s and 15m (a sweep keeps 5 s for its last write-back)", o.Timeout)
	}
	if o.BatchSize < 1 || o.BatchSize > 10000 {
		bad("BatchSize=%d: a DynamoDB stream event source takes 1–10000", o.BatchSize)
	}
	if o.RetryAttempts < 0 || o.RetryAttempts > 10000 {
		bad("RetryAttempts=%d: MaximumRetryAttempts takes 0–10000 (bounded: the sweeper carries what is discarded)", o.RetryAttempts)
	}
	if o.MaxAttempts < 1 || o.MaxAttempts > 1000 {
		bad("MaxAttempts=%d must be between 1 and 1000", o.MaxAttempts)
	}
	if o.SweepAfter < 0 || o.SweepAfter > 24*time.Hour {
		bad("SweepAfter=%s must be between 0 and 24h", o.SweepAfter)
	}
	return errs
}

// OutboxTableName is the outbox table of the stack named name, "<name>-outbox" (it mirrors
// pkg/awslocal.OutboxTableName).
func OutboxTableName(name string) string { return name + "-outbox" }

// OutboxScheduleGroupName is the schedule group of the outbox relays' recurring schedules (the
// DynamoDB outbox's sweep, the PostgreSQL outbox's relay), "<name>-outbox": a group of their own,
// apart from the job schedule group that producers write to, so that the roles of those
// schedules trust EventBridge Scheduler for this group only (aws:SourceArn).
func OutboxScheduleGroupName(name string) string { return name + "-outbox" }

// OutboxFailuresQueueName is the queue to which the outbox stream's event source mapping sends
// the batches it discards after its retries, "<name>-outbox-relay-failures" (it mirrors
// pkg/awslocal).
func OutboxFailuresQueueName(name string) string { return name + "-outbox-relay-failures" }

// Outbox is the transactional outbox part of a JobQueue (nil without Props.Outbox).
type Outbox struct {
	Table         awsdynamodb.Table
	Relay         awslambda.Function
	RelayLogGroup awslogs.LogGroup
	// Failures receives what the stream event source discards after its retries (the batch's
	// shard and sequence numbers; the jobs stay in the table for the sweeper).
	Failures awssqs.Queue
	// Sweep is the rate(1 minute) schedule, in the group OutboxScheduleGroupName, that invokes
	// the relay with {"mode":"sweep"}; SweepRole is the role it invokes with.
	Sweep     awsscheduler.CfnSchedule
	SweepRole awsiam.Role
}

// addOutbox builds the outbox when Props.Outbox is set (Validate checked its props and its
// asset); it runs after the alarms and the dashboard exist, and adds its own.
func (jq *JobQueue) addOutbox() error {
	if jq.Props.Outbox == nil {
		return nil
	}
	o := jq.Props.Outbox.withDefaults()
	// The outbox table is retained and protected like the job table: it holds jobs whose
	// business transactions committed but which are not sent yet (and dead jobs to retry), which
	// nothing else can rebuild. Everything else of the outbox is deleted with the stack.
	tableRemoval := awscdk.RemovalPolicy_DESTROY
	if jq.Props.DeletionProtection {
		tableRemoval = awscdk.RemovalPolicy_RETAIN
	}
	c := jq.Construct
	p := jq.Props
	ob := &Outbox{}
	jq.Outbox = ob
	str := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
	}
	ob.Table = awsdynamodb.NewTable(c, jsii.String("OutboxTable"), &awsdynamodb.TableProps{
		TableName:           jsii.String(OutboxTableName(p.Name)),
		PartitionKey:        str(OutboxAttrPK),
		SortKey:             str(OutboxAttrSK),
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:              awsdynamodb.StreamViewType_NEW_IMAGE,
		TimeToLiveAttribute: jsii.String(AttrExpires),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(p.DeletionProtection),
		RemovalPolicy:      tableRemoval,
	})
	ob.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:        jsii.String(OutboxIndexByState),
		PartitionKey:     str(OutboxAttrGSIPK),
		SortKey:          str(OutboxAttrOrd),
		ProjectionType:   awsdynamodb.ProjectionType_INCLUDE,
		NonKeyAttributes: jsii.Strings(OutboxByStateProjection...),
	})
	ob.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(OutboxIndexByID),
		PartitionKey:   str(OutboxAttrJobID),
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	ob.Failures = awssqs.NewQueue(c, jsii.String("OutboxRelayFailures"), &awssqs.QueueProps{
		QueueName:           jsii.String(OutboxFailuresQueueName(p.Name)),
		Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     secs(DLQRetention),
		MaxMessageSizeBytes: jsii.Number(MaxMessageSize),
	})
	suppress(ob.Failures, nagRule{
		ID:     "AwsSolutions-SQS3",
		Reason: "This queue is itself a failure destination: the outbox stream's event source mapping sends the batches it discards here (OnFailure), which cdk-nag cannot see.",
	})

	// Deleted with the stack, deletion protection or not (as the worker's log group).
	ob.RelayLogGroup = awslogs.NewLogGroup(c, jsii.String("RelayLogs"), &awslogs.LogGroupProps{Retention: p.LogRetention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY})
	role := awsiam.NewRole(c, jsii.String("RelayRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("sqsworker outbox relay " + p.Name),
	})
	ob.RelayLogGroup.GrantWrite(role)
	env := map[string]*string{
		EnvOutboxTable:       ob.Table.TableName(),
		EnvQueueURL:          jq.Queue.QueueUrl(),
		EnvOutboxSweepAfter:  jsii.String(o.SweepAfter.String()),
		EnvOutboxMaxAttempts: jsii.String(strconv.Itoa(o.MaxAttempts)),
		EnvOutboxLease:       jsii.String((o.Timeout + 30*time.Second).String()),
	}
	if p.LogLevel != "" {
		env[EnvLogLevel] = jsii.String(p.LogLevel)
	}
	if jq.ScheduleGroup != nil {
		env[EnvScheduleGroup] = jsii.String(ScheduleGroupName(p.Name))
		env[EnvQueueARN] = jq.Queue.QueueArn()
		env[EnvSchedulerRoleARN] = jq.SchedulerRole.RoleArn()
		env[EnvSchedulerDLQARN] = jq.SchedulerDLQ.QueueArn()
	}
	ob.Relay = awslambda.NewFunction(c, jsii.String("Relay"), &awslambda.FunctionProps{
		Role:         role,
		LogGroup:     ob.RelayLogGroup,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(o.RelayAsset), nil),
		MemorySize:   jsii.Number(float64(o.MemoryMB)),
		Timeout:      secs(o.Timeout),
		Environment:  &env,
		Description:  jsii.String("Sends the transactional outbox's jobs of " + OutboxTableName(p.Name) + " to " + QueueName(p.Name, p.FIFO)),
	})
	// Exactly the relay's table calls (not CDK's Table.Grant, which would give every action on
	// the table's /index/* too): RelayTableActions on the table, RelayIndexActions on the two
	// indexes by name.
	table := ob.Table.TableArn()
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: ob.Relay, Actions: jsii.Strings(RelayTableActions...), ResourceArns: &[]*string{table},
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: ob.Relay, Actions: jsii.Strings(RelayIndexActions...),
		ResourceArns: jsii.Strings(*table+"/index/"+OutboxIndexByState, *table+"/index/"+OutboxIndexByID),
	})
	// Send to the queue; with scheduling, deliver long delays through the stack's group. No
	// payload bucket: an outbox item (400 KB at most) always fits in an SQS message.
	jq.grantRelayEnqueue(ob.Relay, false)

	// The stream's event source mapping: inserts only, partial failures by sequence number,
	// bisection, bounded retries, and an on-failure queue (the event source grants the stream
	// read and the send to the queue).
	ob.Relay.AddEventSource(awslambdaeventsources.NewDynamoEventSource(ob.Table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(o.BatchSize)),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(float64(o.RetryAttempts)),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               awslambdaeventsources.NewSqsDlq(ob.Failures),
		Filters: &[]*map[string]any{awslambda.FilterCriteria_Filter(&map[string]any{
			"eventName": awslambda.FilterRule_IsEqual(jsii.String(OutboxStreamFilter)),
		})},
	}))

	// The sweep: every minute, what the stream path missed, with no retries (the next sweep is a
	// minute away).
	ob.SweepRole, ob.Sweep = jq.relaySchedule("OutboxSweep", ob.Relay, time.Minute, `{"mode":"sweep"}`, 0,
		"EventBridge Scheduler invokes the outbox relay of "+p.Name+" to sweep",
		"Sweeps the outbox "+OutboxTableName(p.Name)+": sends the jobs the stream relay missed")

	suppress(role.Node().TryFindChild(jsii.String("DefaultPolicy")), nagRule{
		ID: "AwsSolutions-IAM5",
		Reason: "The wildcards are, with scheduling, schedule/<this stack's group>/* (one-time schedule names are per job), and dynamodb:ListStreams on *," +
			" which the stream event source grants because ListStreams has no resource-level permission (the stream reads are scoped to this table's stream).",
		AppliesTo: []any{
			"Resource::*",
			map[string]any{"regex": "/^Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule\\/" + ScheduleGroupName(p.Name) + "\\/\\*$/"},
		},
	})

	jq.outboxAlarms()
	jq.outboxDashboard()
	jq.outboxOutputs()
	return nil
}

// GrantOutboxWrite lets a producer enqueue jobs through the outbox, inside its own
// TransactWriteItems: PutItem on the outbox table, only for the key prefixes of outbox items
// (dynamodb:LeadingKeys "job#*" and "fifo#*"), and UpdateItem on the job table limited to the
// attributes of a queued record (status.QueuedWrite) with no returned values. The business
// table's permissions are the caller's to grant. It does nothing without Props.Outbox.
func (jq *JobQueue) GrantOutboxWrite(grantee awsiam.IGrantable) {
	if jq.Outbox == nil {
		return
	}
	grantee.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:PutItem"),
		Resources: &[]*string{jq.Outbox.Table.TableArn()},
		Conditions: &map[string]any{
			"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": outboxKeyPrefixes},
		},
	}))
	grantee.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:UpdateItem"),
		Resources: &[]*string{jq.Table.TableArn()},
		Conditions: &map[string]any{
			"ForAllValues:StringEquals": map[string]any{"dynamodb:Attributes": queuedRecordAttributes},
			"StringEqualsIfExists":      map[string]any{"dynamodb:ReturnValues": "NONE"},
		},
	}))
}

// outboxAlarms adds the outbox's alarms, named like every alarm of the construct
// (JobQueue.alarm).
func (jq *JobQueue) outboxAlarms() {
	ob := jq.Outbox
	five := awscdk.Duration_Minutes(jsii.Number(5))
	jq.alarm("OutboxIteratorAgeAlarm", AlarmOutboxIteratorAge,
		"The outbox relay is over a minute behind its stream (IteratorAge): jobs reach SQS late, and records near 24 hours old are lost to the stream (the sweeper still sends their jobs).",
		ob.Relay.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")}), 60_000)
	jq.alarm("OutboxRelayFailuresAlarm", AlarmOutboxRelayFailures,
		"The outbox stream's event source discarded batches after their retries (the on-failure queue has messages): the sweeper sends those jobs, but the relay is failing.",
		ob.Failures.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")}), 1)
	// The dead-job alarm watches a standing count, not the deaths: every sweep (each minute)
	// publishes the gauge OutboxDeadJobs, the dead jobs the table holds, so the alarm stays in
	// ALARM while any job is dead and clears once they are retried or deleted. Without data (no
	// sweep ran) it keeps its state.
	jq.alarm("OutboxDeadAlarm", AlarmOutboxDeadJobs,
		"Outbox jobs are dead: the relay gave up sending them, or could not read them; the alarm holds while any is (sqsworker outbox list --state dead; outbox show; outbox retry).",
		jq.outboxMetric("OutboxDeadJobs", "Maximum"), 1, awscloudwatch.TreatMissingData_IGNORE)
	// Its id differs from the PostgreSQL outbox's OutboxRelayErrorsAlarm: a stack may have both.
	jq.alarm("OutboxRelayFunctionErrorsAlarm", AlarmOutboxRelayFunctionErrors, "The outbox relay function failed invocations.",
		ob.Relay.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}), 1)
}

// outboxMetric is one of the relay's EMF counts (namespace sqsworker, Service=relay, Table).
func (jq *JobQueue) outboxMetric(name, stat string) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricsNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{"Service": jsii.String("relay"), "Table": jsii.String(OutboxTableName(jq.Props.Name))},
		Statistic:     jsii.String(stat),
		Period:        awscdk.Duration_Minutes(jsii.Number(5)),
	})
}

func (jq *JobQueue) outboxDashboard() {
	ob := jq.Outbox
	stat := func(s string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String(s)}
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6)})
	}
	jq.Dashboard.AddWidgets(
		graph("Outbox jobs sent / failed / died", jq.outboxMetric("OutboxSent", "Sum"), jq.outboxMetric("OutboxFailed", "Sum"), jq.outboxMetric("OutboxDead", "Sum")),
		graph("Outbox dead jobs (standing, max)", jq.outboxMetric("OutboxDeadJobs", "Maximum")),
		graph("Outbox relay iterator age (ms, max)", ob.Relay.Metric(jsii.String("IteratorAge"), stat("Maximum"))),
	)
	jq.Dashboard.AddWidgets(
		graph("Outbox relay invocations / errors", ob.Relay.MetricInvocations(stat("Sum")), ob.Relay.MetricErrors(stat("Sum"))),
		graph("Outbox relay failures queue depth", ob.Failures.MetricApproximateNumberOfMessagesVisible(stat("Maximum"))),
	)
}

func (jq *JobQueue) outboxOutputs() {
	c := jq.Construct
	out := func(id string, v *string, desc string) {
		o := awscdk.NewCfnOutput(c, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
		o.OverrideLogicalId(jsii.String(*c.Node().Id() + id))
	}
	out("OutboxTableName", jq.Outbox.Table.TableName(), "The transactional outbox table")
	out("OutboxRelayFunctionName", jq.Outbox.Relay.FunctionName(), "The outbox relay function")
	out("OutboxFailuresQueueUrl", jq.Outbox.Failures.QueueUrl(), "Where the outbox stream's event source sends the batches it discards")
}
