package jobqueue

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"
)

// What the two outbox relays (outbox.go, pgoutbox.go) share: the schedule group of their
// recurring schedules, those schedules and their roles, and their grant to send jobs.

// RelaySchedulerActions are the Scheduler calls of a relay's producer: a job delayed beyond
// SQS's 15 minutes becomes a one-time schedule (pkg/schedule Client.ScheduleJob, which takes
// a ConflictException for "already scheduled" and reads nothing). A relay never cancels, lists
// or updates schedules.
var RelaySchedulerActions = []string{"scheduler:CreateSchedule"}

// relayScheduleGroup returns the schedule group of the relays' recurring schedules
// (OutboxScheduleGroupName), creating it on first use. It is deleted with the stack, deletion
// protection or not (its schedules invoke functions that go with the stack), and nobody is
// granted schedule actions in it: the roles of its schedules trust Scheduler for it alone.
func (jq *JobQueue) relayScheduleGroup() awsscheduler.ScheduleGroup {
	if jq.OutboxScheduleGroup == nil {
		jq.OutboxScheduleGroup = awsscheduler.NewScheduleGroup(jq.Construct, jsii.String("OutboxScheduleGroup"), &awsscheduler.ScheduleGroupProps{
			ScheduleGroupName: jsii.String(OutboxScheduleGroupName(jq.Props.Name)),
			RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
		})
	}
	return jq.OutboxScheduleGroup
}

// relaySchedule adds a recurring schedule (every rate, whole minutes) in the relays' group that
// invokes fn with input (none when ""), with no retries (the next run is the retry) and, when maxAge > 0, that
// maximum event age; and its role, <id>Role.
//
// The role's trust policy lets only EventBridge Scheduler assume it, for this account
// (aws:SourceAccount) and for schedules of the relays' group (aws:SourceArn = the group's ARN),
// as scheduling.go does for the job schedules: AWS's "Confused deputy prevention" page for
// Scheduler (https://docs.aws.amazon.com/scheduler/latest/UserGuide/cross-service-confused-deputy-prevention.html,
// read 2026-12-01) calls aws:SourceArn with the full ARN the most effective protection, and
// requires the ARN of a schedule group there, never a schedule's or a name prefix; hence a group
// of the construct's own rather than the account's default group. Its policy allows exactly
// lambda:InvokeFunction on fn's unqualified ARN, which is what the schedule invokes (CDK's L2
// LambdaInvoke target would add fn's versions and aliases, <ARN>:*), hence the L1 schedule.
func (jq *JobQueue) relaySchedule(id string, fn awslambda.IFunction, rate time.Duration, input string, maxAge time.Duration,
	roleDesc, desc string) (awsiam.Role, awsscheduler.CfnSchedule) {
	c := jq.Construct
	group := jq.relayScheduleGroup()
	role := awsiam.NewRole(c, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String(SchedulerService), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{
				"aws:SourceAccount": awscdk.Stack_Of(c).Account(),
				"aws:SourceArn":     group.ScheduleGroupArn(),
			}},
		}),
		Description: jsii.String(roleDesc),
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: role, Actions: jsii.Strings("lambda:InvokeFunction"), ResourceArns: jsii.Strings(*fn.FunctionArn()),
	})
	retry := &awsscheduler.CfnSchedule_RetryPolicyProperty{MaximumRetryAttempts: jsii.Number(0)}
	if maxAge > 0 {
		retry.MaximumEventAgeInSeconds = jsii.Number(maxAge.Seconds())
	}
	target := &awsscheduler.CfnSchedule_TargetProperty{Arn: fn.FunctionArn(), RoleArn: role.RoleArn(), RetryPolicy: retry}
	if input != "" {
		target.Input = jsii.String(input)
	}
	unit := "minutes"
	if rate == time.Minute {
		unit = "minute"
	}
	sched := awsscheduler.NewCfnSchedule(c, jsii.String(id), &awsscheduler.CfnScheduleProps{
		// A Ref, not the literal name: CloudFormation then creates the group first.
		GroupName:          group.Node().DefaultChild().(awsscheduler.CfnScheduleGroup).Ref(),
		Description:        jsii.String(desc),
		ScheduleExpression: jsii.String(fmt.Sprintf("rate(%d %s)", rate/time.Minute, unit)),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		State:              jsii.String("ENABLED"),
		// As CDK's L2 Schedule writes it; a rate does not depend on it.
		ScheduleExpressionTimezone: jsii.String("Etc/UTC"),
		Target:                     target,
	})
	// The first run must find the role's policy attached.
	sched.Node().AddDependency(role)
	return role, sched
}

// grantRelayEnqueue gives a relay exactly what its producer calls: SendMessage on the queue and no
// other SQS action (SendOnlyActions, with the customer key's data-key actions: grantSendOnly; the
// producer calls SendMessage and SendMessageBatch only), with scheduling RelaySchedulerActions on the
// stack's job schedule group and iam:PassRole on the scheduler role to Scheduler only (as
// GrantEnqueue), and with payloads (the PostgreSQL relay) s3:PutObject on the payload bucket's
// objects when there is one.
func (jq *JobQueue) grantRelayEnqueue(grantee awsiam.IGrantable, payloads bool) {
	jq.grantSendOnly(jq.Queue, grantee)
	jq.grantNamedQueuesSend(grantee, false) // every queue of Props.Queues: jobs go to their kind's
	if payloads {
		jq.grantEnqueuePayload(grantee)
	}
	if jq.ScheduleGroup == nil {
		return
	}
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(RelaySchedulerActions...),
		ResourceArns: jsii.Strings(jq.jobSchedulesArn()),
	})
	jq.grantPassSchedulerRole(grantee)
}
