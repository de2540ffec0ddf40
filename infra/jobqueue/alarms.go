package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"
)

// Alarm name suffixes: each alarm is named AlarmName(Props.Name, suffix), <Name>-jobs-<suffix>.
const (
	AlarmDLQVisible           = "dlq-visible"
	AlarmOldestMessage        = "oldest-message"
	AlarmWorkerErrors         = "worker-errors"
	AlarmWorkerThrottles      = "worker-throttles"
	AlarmSchedulerDLQVisible  = "scheduler-dlq-visible"
	AlarmRecursiveLoopStopped = "recursive-loop-stopped"
)

// alarmSuffixes lists the suffix of every alarm the construct can create (the core's, the API's
// in api.go, the DynamoDB outbox's in outbox.go, the PostgreSQL outbox's in pgoutbox.go), for
// the name checks of Props.Validate. Every alarm is created by JobQueue.alarm, so that its name
// is AlarmName(Name, suffix), which the alarm topic's policy covers.
var alarmSuffixes = []string{AlarmDLQVisible, AlarmOldestMessage, AlarmWorkerErrors, AlarmWorkerThrottles,
	AlarmSchedulerDLQVisible, AlarmRecursiveLoopStopped,
	AlarmApi5xx, AlarmApiThrottles,
	AlarmOutboxIteratorAge, AlarmOutboxRelayFailures, AlarmOutboxDeadJobs, AlarmOutboxRelayFunctionErrors,
	AlarmOutboxDeadRows, AlarmOutboxRelayErrors, AlarmOutboxStale}

// MetricRecursiveInvocationsDropped is the metric Lambda emits (namespace AWS/Lambda, dimension
// FunctionName) each time it stops an invocation it found to be part of a recursive loop; it is
// not emitted when the function's RecursiveLoop is Allow. Source: "Use Lambda recursive loop
// detection to prevent infinite loops",
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html#invocation-recursion-cloudwatch
// (read 2026-12-01).
const MetricRecursiveInvocationsDropped = "RecursiveInvocationsDropped"

// alarms builds the alarm topic (optionally with an e-mail subscription), its policy, and the
// alarms.
//
// EnforceSSL makes CDK write a topic policy holding only the TLS deny, and a topic policy
// replaces SNS's default one, so without an Allow nothing lets CloudWatch publish and every alarm
// action fails ("not authorized to perform: SNS:Publish"). The Allow follows CloudWatch's "Using
// Amazon CloudWatch alarms" page, section on the Amazon SNS topic's access policy
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html, read
// 2026-12-01): sns:Publish for the service principal cloudwatch.amazonaws.com, with
// aws:SourceAccount and aws:SourceArn, whose value is the ARN of the alarm that notifies; here
// the ARN pattern of this stack's alarm names, <Name>-jobs-*.
func (jq *JobQueue) alarms() {
	c := jq.Construct
	p := jq.Props
	jq.AlarmTopic = awssns.NewTopic(c, jsii.String("AlarmTopic"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
	stack := awscdk.Stack_Of(c)
	jq.AlarmTopic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AllowThisStacksAlarmsToPublish"),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*jq.AlarmTopic.TopicArn()),
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"aws:SourceAccount": stack.Account()},
			"ArnLike": map[string]any{"aws:SourceArn": stack.FormatArn(&awscdk.ArnComponents{
				Service:      jsii.String("cloudwatch"),
				Resource:     jsii.String("alarm"),
				ResourceName: jsii.String(AlarmName(p.Name, "*")),
				ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
			})},
		},
	}))
	if p.AlarmEmail != "" {
		jq.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	}

	maxOver := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")}
	sumOver := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	jq.alarm("DLQVisibleAlarm", AlarmDLQVisible, "The job DLQ has visible messages: dead jobs need attention (sqsworker dlq).",
		jq.DLQ.MetricApproximateNumberOfMessagesVisible(maxOver), 1)
	jq.alarm("OldestMessageAlarm", AlarmOldestMessage, "The oldest job has waited over 15 minutes: the worker is not keeping up.",
		jq.Queue.MetricApproximateAgeOfOldestMessage(maxOver), 900)
	jq.alarm("WorkerErrorsAlarm", AlarmWorkerErrors, "The worker function failed invocations (whole batches returned an error).",
		jq.Worker.MetricErrors(sumOver), 1)
	jq.alarm("WorkerThrottlesAlarm", AlarmWorkerThrottles, "The worker function was throttled: throttled invokes use up receive counts.",
		jq.Worker.MetricThrottles(sumOver), 1)
	if jq.SchedulerDLQ != nil {
		jq.alarm("SchedulerDLQVisibleAlarm", AlarmSchedulerDLQVisible, "The scheduler DLQ has visible messages: scheduled jobs could not be delivered to the queue.",
			jq.SchedulerDLQ.MetricApproximateNumberOfMessagesVisible(maxOver), 1)
	}
	// Lambda emits the metric only while detection is on (Terminate).
	if p.RecursiveLoop == awslambda.RecursiveLoop_TERMINATE {
		jq.alarm("RecursiveLoopAlarm", AlarmRecursiveLoopStopped,
			"Lambda stopped worker invocations it took for a recursive loop (about 16 sends in one chain of requests): "+
				"the messages return to the queue and reach the DLQ after maxReceiveCount, without an sqsworker.failure reason. "+
				"See infra/README.md, recursive loop detection.",
			jq.Worker.Metric(jsii.String(MetricRecursiveInvocationsDropped), sumOver), 1)
	}
}

// alarm adds an alarm named AlarmName(Name, suffix) (covered by the topic policy) that notifies
// the alarm topic when the metric reaches threshold in one period. Missing data is not breaching
// unless missing says otherwise. Every alarm of the construct is made here: an alarm without
// its own name gets one CloudFormation generates, which the topic policy does not cover, so its
// notifications would be refused.
func (jq *JobQueue) alarm(id, suffix, desc string, m awscloudwatch.IMetric, threshold float64, missing ...awscloudwatch.TreatMissingData) {
	treat := awscloudwatch.TreatMissingData_NOT_BREACHING
	if len(missing) > 0 {
		treat = missing[0]
	}
	a := awscloudwatch.NewAlarm(jq.Construct, jsii.String(id), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(AlarmName(jq.Props.Name, suffix)),
		AlarmDescription:   jsii.String(desc),
		Metric:             m,
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   treat,
	})
	a.AddAlarmAction(awscloudwatchactions.NewSnsAction(jq.AlarmTopic))
	jq.Alarms = append(jq.Alarms, a)
}
