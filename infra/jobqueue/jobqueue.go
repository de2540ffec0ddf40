package jobqueue

import (
	"fmt"
	"os"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Names of the table's keys, indexes and TTL attribute; they mirror pkg/idempotency (TableInput),
// which this module does not import so that infra stays independent of the library's SDK deps.
const (
	AttrPK        = "pk"
	AttrGSI1PK    = "gsi1pk"
	AttrGSI1SK    = "gsi1sk"
	AttrJobID     = "job_id"
	AttrExpires   = "exp"
	IndexByStatus = "by_status"
	IndexByID     = "by_id"
)

// ByStatusProjection is the INCLUDE projection of IndexByStatus (pkg/idempotency.TableInput).
var ByStatusProjection = []string{"kind", "key", "job_id", "st", "runs", "reason", "upd", "last_at"}

// Environment variable names of the worker (functions/internal/config).
const (
	EnvQueueURL       = "SQSWORKER_QUEUE_URL"
	EnvDLQURL         = "SQSWORKER_DLQ_URL"
	EnvTable          = "SQSWORKER_TABLE"
	EnvLogLevel       = "SQSWORKER_LOG_LEVEL"
	EnvConcurrency    = "SQSWORKER_CONCURRENCY"
	EnvDeadlineMargin = "SQSWORKER_DEADLINE_MARGIN"
	EnvScheduleGroup  = "SQSWORKER_SCHEDULE_GROUP"
	// Set only with Props.WorkerEnqueues, for a worker main that enqueues follow-up jobs: the
	// fields of schedule.Config (the scheduler ones only when scheduling is enabled).
	EnvQueueARN         = "SQSWORKER_QUEUE_ARN"
	EnvSchedulerRoleARN = "SQSWORKER_SCHEDULER_ROLE_ARN"
	EnvSchedulerDLQARN  = "SQSWORKER_SCHEDULER_DLQ_ARN"
)

// JobQueue is a deployed job system.
type JobQueue struct {
	constructs.Construct
	Props         Props // with defaults applied
	Queue         awssqs.Queue
	DLQ           awssqs.Queue
	Table         awsdynamodb.Table
	Worker        awslambda.Function
	LogGroup      awslogs.LogGroup
	ScheduleGroup awsscheduler.ScheduleGroup // nil when DisableScheduling
	SchedulerRole awsiam.Role                // nil when DisableScheduling
	SchedulerDLQ  awssqs.Queue               // nil when DisableScheduling: where failed schedule deliveries go
	AlarmTopic    awssns.Topic
	Alarms        []awscloudwatch.Alarm
	Dashboard     awscloudwatch.Dashboard
}

// QueueName, DLQName, TableName, ScheduleGroupName and SchedulerDLQName mirror pkg/awslocal (this
// module does not import the library).
func QueueName(name string, fifo bool) string { return suffix(name+"-jobs", fifo) }
func DLQName(name string, fifo bool) string   { return suffix(name+"-jobs-dlq", fifo) }
func TableName(name string) string            { return name + "-jobs" }
func ScheduleGroupName(name string) string    { return name + "-jobs" }
func SchedulerDLQName(name string) string     { return name + "-jobs-scheduler-dlq" }

func suffix(s string, fifo bool) string {
	if fifo {
		return s + ".fifo"
	}
	return s
}

func secs(d interface{ Seconds() float64 }) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// New validates props and builds the job system under scope. It returns an error (and creates
// nothing) when the props break a rule (Props.Validate) or the worker asset is missing.
func New(scope constructs.Construct, id string, props Props) (*JobQueue, error) {
	if err := props.Validate(); err != nil {
		return nil, err
	}
	p := props.withDefaults()
	if _, err := os.Stat(p.WorkerAsset); err != nil {
		return nil, fmt.Errorf("jobqueue: worker asset %s is missing: run `make build` at the repository root first (%v)", p.WorkerAsset, err)
	}

	c := constructs.NewConstruct(scope, jsii.String(id))
	jq := &JobQueue{Construct: c, Props: p}

	// Queues: SSE-SQS (or the customer key), TLS only; the DLQ keeps messages 14 days.
	queueProps := func(name string) *awssqs.QueueProps {
		qp := &awssqs.QueueProps{
			QueueName:  jsii.String(name),
			Encryption: awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL: jsii.Bool(true),
		}
		if p.EncryptionKey != nil {
			qp.Encryption = awssqs.QueueEncryption_KMS
			qp.EncryptionMasterKey = p.EncryptionKey
		}
		if p.FIFO {
			qp.Fifo = jsii.Bool(true)
			qp.ContentBasedDeduplication = jsii.Bool(true)
		}
		return qp
	}
	dlqProps := queueProps(DLQName(p.Name, p.FIFO))
	dlqProps.RetentionPeriod = secs(DLQRetention)
	jq.DLQ = awssqs.NewQueue(c, jsii.String("DLQ"), dlqProps)

	qProps := queueProps(QueueName(p.Name, p.FIFO))
	qProps.VisibilityTimeout = secs(p.VisibilityTimeout)
	qProps.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: jq.DLQ, MaxReceiveCount: jsii.Number(float64(p.MaxReceiveCount))}
	jq.Queue = awssqs.NewQueue(c, jsii.String("Queue"), qProps)

	// The table: exactly pkg/idempotency.TableInput, TTL on exp, PITR on.
	removal := awscdk.RemovalPolicy_DESTROY
	if p.DeletionProtection {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	jq.Table = awsdynamodb.NewTable(c, jsii.String("Table"), &awsdynamodb.TableProps{
		TableName:           jsii.String(TableName(p.Name)),
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(AttrExpires),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(p.DeletionProtection),
		RemovalPolicy:      removal,
	})
	jq.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:        jsii.String(IndexByStatus),
		PartitionKey:     &awsdynamodb.Attribute{Name: jsii.String(AttrGSI1PK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:          &awsdynamodb.Attribute{Name: jsii.String(AttrGSI1SK), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType:   awsdynamodb.ProjectionType_INCLUDE,
		NonKeyAttributes: jsii.Strings(ByStatusProjection...),
	})
	jq.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(IndexByID),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(AttrJobID), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	// The worker function.
	env := map[string]*string{
		EnvQueueURL: jq.Queue.QueueUrl(),
		EnvDLQURL:   jq.DLQ.QueueUrl(),
		EnvTable:    jq.Table.TableName(),
	}
	if p.LogLevel != "" {
		env[EnvLogLevel] = jsii.String(p.LogLevel)
	}
	if p.Concurrency > 0 {
		env[EnvConcurrency] = jsii.String(strconv.Itoa(p.Concurrency))
	}
	if p.DeadlineMargin > 0 {
		env[EnvDeadlineMargin] = jsii.String(p.DeadlineMargin.String())
	}
	if !p.DisableScheduling {
		env[EnvScheduleGroup] = jsii.String(ScheduleGroupName(p.Name))
	}
	jq.LogGroup = awslogs.NewLogGroup(c, jsii.String("WorkerLogs"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: removal,
	})
	// Its own role, without the AWSLambdaBasicExecutionRole managed policy (logs:* on every
	// group): it may write only to its log group.
	role := awsiam.NewRole(c, jsii.String("WorkerRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("sqsworker worker " + p.Name),
	})
	jq.LogGroup.GrantWrite(role)
	fnProps := &awslambda.FunctionProps{
		Role:         role,
		LogGroup:     jq.LogGroup,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(p.WorkerAsset), nil),
		MemorySize:   jsii.Number(float64(p.MemoryMB)),
		Timeout:      secs(p.Timeout),
		Environment:  &env,
	}
	if p.ReservedConcurrency > 0 {
		fnProps.ReservedConcurrentExecutions = jsii.Number(float64(p.ReservedConcurrency))
	}
	jq.Worker = awslambda.NewFunction(c, jsii.String("Worker"), fnProps)

	esProps := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(float64(p.BatchSize)),
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if p.Provisioned() {
		ppc := &awslambda.ProvisionedPollerConfig{}
		if p.MinPollers != 0 {
			ppc.MinimumPollers = jsii.Number(float64(p.MinPollers))
		}
		if p.MaxPollers != 0 {
			ppc.MaximumPollers = jsii.Number(float64(p.MaxPollers))
		}
		esProps.ProvisionedPollerConfig = ppc
	} else {
		esProps.MaxConcurrency = jsii.Number(float64(p.MaxConcurrency))
	}
	if p.BatchingWindow > 0 {
		esProps.MaxBatchingWindow = secs(p.BatchingWindow)
	}
	// The event source grants the function consume rights on its queue (receive, delete, change
	// visibility, get attributes/URL; kms:Decrypt on the customer key when there is one).
	jq.Worker.AddEventSource(awslambdaeventsources.NewSqsEventSource(jq.Queue, esProps))
	jq.grantSend(jq.DLQ, jq.Worker)
	jq.Table.GrantReadWriteData(jq.Worker)

	// Scheduling: the group, and a role only scheduler.amazonaws.com from this account assumes.
	if !p.DisableScheduling {
		jq.ScheduleGroup = awsscheduler.NewScheduleGroup(c, jsii.String("ScheduleGroup"), &awsscheduler.ScheduleGroupProps{
			ScheduleGroupName: jsii.String(ScheduleGroupName(p.Name)),
			RemovalPolicy:     removal,
		})
		jq.SchedulerRole = awsiam.NewRole(c, jsii.String("SchedulerRole"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
				Conditions: &map[string]any{
					"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Stack_Of(c).Account()},
				},
			}),
			Description: jsii.String("EventBridge Scheduler sends scheduled jobs to " + QueueName(p.Name, p.FIFO)),
		})
		jq.grantSend(jq.Queue, jq.SchedulerRole)
		// Schedules name this queue as their DeadLetterConfig: deliveries the scheduler cannot
		// make (queue deleted, role broken) land here instead of being dropped. A standard queue
		// even for FIFO stacks: Scheduler DLQs must be standard queues.
		jq.SchedulerDLQ = awssqs.NewQueue(c, jsii.String("SchedulerDLQ"), &awssqs.QueueProps{
			QueueName:       jsii.String(SchedulerDLQName(p.Name)),
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      jsii.Bool(true),
			RetentionPeriod: secs(DLQRetention),
		})
		jq.SchedulerDLQ.GrantSendMessages(jq.SchedulerRole)
		suppress(jq.SchedulerDLQ, nagRule{
			ID:     "AwsSolutions-SQS3",
			Reason: "This queue is itself a dead-letter queue: schedules name it in their DeadLetterConfig, which cdk-nag cannot see (it only follows SQS redrive policies).",
		})
	}

	workerNag := []any{map[string]any{"regex": "/^Resource::<.*Table.*\\.Arn>\\/index\\/\\*$/"}}
	workerReason := "The wildcard is <table ARN>/index/*: GrantReadWriteData scopes the worker to this table's own GSIs (by_status, by_id), which it queries."
	if p.WorkerEnqueues {
		jq.GrantEnqueue(jq.Worker)
		jq.Worker.AddEnvironment(jsii.String(EnvQueueARN), jq.Queue.QueueArn(), nil)
		if jq.SchedulerRole != nil {
			jq.Worker.AddEnvironment(jsii.String(EnvSchedulerRoleARN), jq.SchedulerRole.RoleArn(), nil)
			jq.Worker.AddEnvironment(jsii.String(EnvSchedulerDLQARN), jq.SchedulerDLQ.QueueArn(), nil)
			workerNag = append(workerNag, map[string]any{"regex": "/^Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule\\/" + ScheduleGroupName(p.Name) + "\\/\\*$/"})
			workerReason += " With WorkerEnqueues, the second wildcard is schedule/<this stack's group>/*: one-time schedule names are per job, so the worker may manage schedules only inside its own group."
		}
	}
	suppress(role.Node().TryFindChild(jsii.String("DefaultPolicy")), nagRule{
		ID:        "AwsSolutions-IAM5",
		Reason:    workerReason,
		AppliesTo: workerNag,
	})

	jq.alarms()
	jq.dashboard()
	jq.outputs()
	return jq, nil
}

// nagRule is one cdk-nag suppression. The construct writes cdk-nag's metadata itself (the
// "cdk_nag" key NagSuppressions uses) so that users of the construct do not need cdk-nag.
type nagRule struct {
	ID        string
	Reason    string
	AppliesTo []any
}

// suppress records rules on c's CloudFormation resource (c itself or its default child).
func suppress(c constructs.IConstruct, rules ...nagRule) {
	if c == nil {
		panic("jobqueue: no construct to attach cdk-nag suppressions to")
	}
	res, ok := c.(awscdk.CfnResource)
	if !ok {
		res = c.Node().DefaultChild().(awscdk.CfnResource)
	}
	var list []any
	for _, r := range rules {
		m := map[string]any{"id": r.ID, "reason": r.Reason}
		if r.AppliesTo != nil {
			m["applies_to"] = r.AppliesTo
		}
		list = append(list, m)
	}
	res.AddMetadata(jsii.String("cdk_nag"), map[string]any{"rules_to_suppress": list})
}

// grantSend lets grantee send to q, the queue or the DLQ. With a customer key it grants only what
// SendMessage to a KMS-encrypted queue needs on the key, kms:GenerateDataKey and kms:Decrypt,
// where CDK's GrantSendMessages would add kms:Encrypt and kms:ReEncrypt*.
func (jq *JobQueue) grantSend(q awssqs.Queue, grantee awsiam.IGrantable) {
	key := jq.Props.EncryptionKey
	if key == nil {
		q.GrantSendMessages(grantee)
		return
	}
	q.Grant(grantee, jsii.String("sqs:SendMessage"), jsii.String("sqs:GetQueueAttributes"), jsii.String("sqs:GetQueueUrl"))
	key.Grant(grantee, jsii.String("kms:GenerateDataKey"), jsii.String("kms:Decrypt"))
}

// GrantEnqueue lets a producer send jobs: SendMessage on the queue (with kms:GenerateDataKey and
// kms:Decrypt on the customer key when there is one) and, when scheduling is enabled, writing and
// deleting schedules in the group plus iam:PassRole on the scheduler role.
func (jq *JobQueue) GrantEnqueue(grantee awsiam.IGrantable) {
	jq.grantSend(jq.Queue, grantee)
	if jq.ScheduleGroup != nil {
		jq.ScheduleGroup.GrantWriteSchedules(grantee)
		jq.ScheduleGroup.GrantDeleteSchedules(grantee)
		jq.ScheduleGroup.GrantReadSchedules(grantee)
		jq.SchedulerRole.GrantPassRole(grantee.GrantPrincipal())
	}
}

func (jq *JobQueue) alarms() {
	c := jq.Construct
	jq.AlarmTopic = awssns.NewTopic(c, jsii.String("AlarmTopic"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
	if jq.Props.AlarmEmail != "" {
		jq.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(jq.Props.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(jq.AlarmTopic)
	five := awscdk.Duration_Minutes(jsii.Number(5))
	add := func(id, desc string, m awscloudwatch.Metric, threshold float64) {
		a := awscloudwatch.NewAlarm(c, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		jq.Alarms = append(jq.Alarms, a)
	}
	maxOver := &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")}
	sumOver := &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}
	add("DLQVisibleAlarm", "The job DLQ has visible messages: dead jobs need attention (sqsworker dlq).",
		jq.DLQ.MetricApproximateNumberOfMessagesVisible(maxOver), 1)
	add("OldestMessageAlarm", "The oldest job has waited over 15 minutes: the worker is not keeping up.",
		jq.Queue.MetricApproximateAgeOfOldestMessage(maxOver), 900)
	add("WorkerErrorsAlarm", "The worker function failed invocations (whole batches returned an error).",
		jq.Worker.MetricErrors(sumOver), 1)
	add("WorkerThrottlesAlarm", "The worker function was throttled: throttled invokes use up receive counts.",
		jq.Worker.MetricThrottles(sumOver), 1)
	if jq.SchedulerDLQ != nil {
		add("SchedulerDLQVisibleAlarm", "The scheduler DLQ has visible messages: scheduled jobs could not be delivered to the queue.",
			jq.SchedulerDLQ.MetricApproximateNumberOfMessagesVisible(maxOver), 1)
	}
}

// MetricsNamespace is pkg/metrics.DefaultNamespace; the worker's EMF metrics carry the
// dimensions Service, Queue (the queue's name) and Kind.
const MetricsNamespace = "sqsworker"

// dashboard shows the worker's metrics per kind (found by SEARCH, since kinds are not known at
// synthesis), queue depth and age, DLQ depth and duration percentiles.
func (jq *JobQueue) dashboard() {
	p := jq.Props
	five := awscdk.Duration_Minutes(jsii.Number(5))
	queue := QueueName(p.Name, p.FIFO)
	search := func(label, metric, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,Service,Queue,Kind} MetricName="%s" Queue="%s"', '%s', 300)`,
				MetricsNamespace, metric, queue, stat)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        jsii.String(label),
			Period:       five,
		})
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	stat := func(s string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String(s)}
	}
	jq.Dashboard = awscloudwatch.NewDashboard(jq.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(p.Name + "-jobs"),
	})
	// Each AddWidgets call is one row.
	jq.Dashboard.AddWidgets(
		graph("Jobs succeeded / failed per kind", search("succeeded", "JobsSucceeded", "Sum"), search("failed", "JobsFailed", "Sum")),
		graph("Jobs retried / dead-lettered per kind", search("retried", "JobsRetried", "Sum"), search("dead-lettered", "JobsDeadLettered", "Sum")),
	)
	jq.Dashboard.AddWidgets(
		graph("Job duration p50 / p99 per kind (ms)", search("p50", "JobDuration", "p50"), search("p99", "JobDuration", "p99")),
		graph("Queue latency p99 per kind (ms)", search("p99", "JobQueueLatency", "p99")),
	)
	jq.Dashboard.AddWidgets(
		graph("Queue depth and DLQ depth",
			jq.Queue.MetricApproximateNumberOfMessagesVisible(stat("Maximum")),
			jq.Queue.MetricApproximateNumberOfMessagesNotVisible(stat("Maximum")),
			jq.DLQ.MetricApproximateNumberOfMessagesVisible(stat("Maximum"))),
		graph("Age of the oldest message (s)", jq.Queue.MetricApproximateAgeOfOldestMessage(stat("Maximum"))),
	)
	jq.Dashboard.AddWidgets(
		graph("Worker duration p50 / p90 / p99 (ms)",
			jq.Worker.MetricDuration(stat("p50")), jq.Worker.MetricDuration(stat("p90")), jq.Worker.MetricDuration(stat("p99"))),
		graph("Worker invocations, errors, throttles",
			jq.Worker.MetricInvocations(stat("Sum")), jq.Worker.MetricErrors(stat("Sum")), jq.Worker.MetricThrottles(stat("Sum"))),
	)
}

func (jq *JobQueue) outputs() {
	c := jq.Construct
	// Output keys are the construct's id and the output's name ("JobsSchedulerRoleArn" in the
	// app's stack), without the hash CDK would append: producers and the sqsworker CLI look
	// them up by name.
	out := func(id string, v *string, desc string) {
		o := awscdk.NewCfnOutput(c, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
		o.OverrideLogicalId(jsii.String(*c.Node().Id() + id))
	}
	out("QueueUrl", jq.Queue.QueueUrl(), "The job queue's URL (SQSWORKER_QUEUE_URL)")
	out("QueueArn", jq.Queue.QueueArn(), "The job queue's ARN")
	out("DLQUrl", jq.DLQ.QueueUrl(), "The job DLQ's URL (SQSWORKER_DLQ_URL)")
	out("DLQArn", jq.DLQ.QueueArn(), "The job DLQ's ARN")
	out("TableName", jq.Table.TableName(), "The job table (SQSWORKER_TABLE)")
	out("AlarmTopicArn", jq.AlarmTopic.TopicArn(), "The SNS topic the alarms notify")
	if jq.ScheduleGroup != nil {
		out("ScheduleGroupName", jq.ScheduleGroup.ScheduleGroupName(), "The Scheduler group (SQSWORKER_SCHEDULE_GROUP)")
		out("SchedulerRoleArn", jq.SchedulerRole.RoleArn(), "The role schedules use to send to the queue")
		out("SchedulerDLQArn", jq.SchedulerDLQ.QueueArn(), "The DLQ schedules name for undeliverable jobs")
	}
}
