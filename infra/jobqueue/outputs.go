package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// outputs writes the stack outputs producers and the sqsworker CLI read.
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
