package awslocal

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// ScheduleGroupName returns a stack's EventBridge Scheduler schedule group: "<stack>-jobs".
func ScheduleGroupName(stack string) string { return stack + "-jobs" }

// SchedulerDLQName returns the queue a stack's schedules name as their dead-letter queue,
// "<stack>-jobs-scheduler-dlq", as the CDK stack names it (infra/jobqueue SchedulerDLQName): a
// standard queue even on FIFO stacks, since Scheduler dead-letter queues must be standard.
func SchedulerDLQName(stack string) string { return stack + "-jobs-scheduler-dlq" }

// SchedulerRoleARN is the role the schedules of a local stack name (emulators accept any ARN;
// on AWS the CDK stack creates the real role).
func SchedulerRoleARN(stack string) string {
	return "arn:aws:iam::000000000000:role/" + stack + "-scheduler"
}

// ScheduleGroupProvisioner is the part of the Scheduler client ProvisionScheduleGroup uses.
type ScheduleGroupProvisioner interface {
	CreateScheduleGroup(context.Context, *scheduler.CreateScheduleGroupInput, ...func(*scheduler.Options)) (*scheduler.CreateScheduleGroupOutput, error)
}

// ProvisionScheduleGroup creates (or finds) the stack's schedule group and returns its name.
func ProvisionScheduleGroup(ctx context.Context, client ScheduleGroupProvisioner, stack string) (string, error) {
	if err := validStackName(stack); err != nil {
		return "", err
	}
	name := ScheduleGroupName(stack)
	_, err := client.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(name)})
	var conflict *schedtypes.ConflictException
	if err != nil && !errors.As(err, &conflict) {
		return "", fmt.Errorf("awslocal: create schedule group %s: %w", name, err)
	}
	return name, nil
}
