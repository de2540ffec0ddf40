package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// SchedulerService is EventBridge Scheduler's service principal.
const SchedulerService = "scheduler.amazonaws.com"

// scheduling builds the schedule group, the role schedules send with, and the scheduler DLQ
// (nothing with DisableScheduling).
//
// The role's trust policy lets only EventBridge Scheduler assume it, and only for schedules of
// this account (aws:SourceAccount) in this stack's group (aws:SourceArn = the group's ARN). AWS's
// "Confused deputy prevention" page for Scheduler
// (https://docs.aws.amazon.com/scheduler/latest/UserGuide/cross-service-confused-deputy-prevention.html,
// read 2026-12-01) calls aws:SourceArn with the full ARN the most effective protection, and says
// the value must be a schedule group's ARN, never a schedule's or a name prefix.
func (jq *JobQueue) scheduling() {
	p := jq.Props
	if p.DisableScheduling {
		return
	}
	c := jq.Construct
	// Deleted with the stack, deletion protection or not: a retained group would keep firing its
	// schedules at the deleted queue and role, and a redeploy with the same name would fail.
	jq.ScheduleGroup = awsscheduler.NewScheduleGroup(c, jsii.String("ScheduleGroup"), &awsscheduler.ScheduleGroupProps{
		ScheduleGroupName: jsii.String(ScheduleGroupName(p.Name)),
		RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
	})
	jq.SchedulerRole = awsiam.NewRole(c, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String(SchedulerService), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{
				"StringEquals": map[string]any{
					"aws:SourceAccount": awscdk.Stack_Of(c).Account(),
					"aws:SourceArn":     jq.ScheduleGroup.ScheduleGroupArn(),
				},
			},
		}),
		Description: jsii.String("EventBridge Scheduler sends scheduled jobs to " + QueueName(p.Name, p.FIFO)),
	})
	// Scheduler sends the job (an SQS target calls SendMessage) and looks nothing up.
	jq.grantSendOnly(jq.Queue, jq.SchedulerRole)
	// Schedules name this queue as their DeadLetterConfig: deliveries the scheduler cannot make
	// (queue deleted, role broken) land here instead of being dropped. A standard queue even for
	// FIFO stacks: Scheduler DLQs must be standard queues.
	jq.SchedulerDLQ = awssqs.NewQueue(c, jsii.String("SchedulerDLQ"), &awssqs.QueueProps{
		QueueName:       jsii.String(SchedulerDLQName(p.Name)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: secs(DLQRetention),
		// Scheduler's dead-letter event carries the schedule's input, the job.
		MaxMessageSizeBytes: jsii.Number(MaxMessageSize),
	})
	// Scheduler's dead-letter delivery needs sqs:SendMessage alone ("Configuring a schedule's
	// dead-letter queue", EventBridge Scheduler user guide).
	jq.SchedulerDLQ.Grant(jq.SchedulerRole, *jsii.Strings(SendOnlyActions...)...)
	suppress(jq.SchedulerDLQ, nagRule{
		ID:     "AwsSolutions-SQS3",
		Reason: "This queue is itself a dead-letter queue: schedules name it in their DeadLetterConfig, which cdk-nag cannot see (it only follows SQS redrive policies).",
	})
}

// GrantEnqueue lets a producer send jobs: SendMessage on the queue (and on each of Props.Queues), and the look-ups the sqsworker
// CLI makes, GetQueueUrl and GetQueueAttributes (SendAndLookUpActions; with kms:GenerateDataKey
// and kms:Decrypt on the customer key when there is one) and, when scheduling is enabled, writing and
// deleting schedules in the group plus iam:PassRole on the scheduler role, to EventBridge
// Scheduler only (iam:PassedToService, as AWS's AmazonEventBridgeSchedulerFullAccess policy
// conditions it; https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_iam-condition-keys.html#ck_PassedToService);
// with Props.PayloadBucket, s3:PutObject on the bucket's objects (payload.go).
func (jq *JobQueue) GrantEnqueue(grantee awsiam.IGrantable) {
	jq.grantSend(jq.Queue, grantee)
	// Every queue of Props.Queues too.
	jq.grantNamedQueuesSend(grantee, true)
	jq.grantEnqueuePayload(grantee) // s3:PutObject on the payload bucket, when there is one
	if jq.ScheduleGroup == nil {
		return
	}
	jq.ScheduleGroup.GrantWriteSchedules(grantee)
	jq.ScheduleGroup.GrantDeleteSchedules(grantee)
	jq.ScheduleGroup.GrantReadSchedules(grantee)
	jq.grantPassSchedulerRole(grantee)
}

// jobSchedulesArn is the ARN of every schedule in the stack's job schedule group,
// arn:…:scheduler:<region>:<account>:schedule/<group>/*: one-time schedule names are per job.
func (jq *JobQueue) jobSchedulesArn() string {
	return *awscdk.Stack_Of(jq.Construct).FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("scheduler"), Resource: jsii.String("schedule"),
		ResourceName: jsii.String(ScheduleGroupName(jq.Props.Name) + "/*"), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
}

// grantPassSchedulerRole lets grantee pass the scheduler role to EventBridge Scheduler only
// (iam:PassedToService), in a statement of its own.
func (jq *JobQueue) grantPassSchedulerRole(grantee awsiam.IGrantable) {
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings("iam:PassRole"),
		ResourceArns: jsii.Strings(*jq.SchedulerRole.RoleArn()),
		Conditions: &map[string]*map[string]any{
			"StringEquals": {"iam:PassedToService": SchedulerService},
		},
	})
}
