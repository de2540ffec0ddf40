package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// schedulerRoleEnv names the environment variable that gives --scheduler-role its default.
const schedulerRoleEnv = "SQSWORKER_SCHEDULER_ROLE_ARN"

// needsScheduler reports whether a job delayed by delay goes through a one-time EventBridge
// Scheduler schedule rather than SQS DelaySeconds: a delay beyond SQS's 15 minutes, or any delay
// on a FIFO queue (FIFO queues have no per-message delay). It is producer.WithDelay's rule.
func needsScheduler(delay time.Duration, fifo bool) bool {
	return delay > producer.MaxDelay || fifo && delay > 0
}

// roleARNExample is the shape of an IAM role ARN, for messages.
const roleARNExample = "arn:aws:iam::123456789012:role/NAME"

// checkRoleARN reports why s is not an IAM role ARN: arn:<partition>:iam::<12 digits>:role/<name>,
// where the name may have a path (role/path/name). what names the value in the message.
func checkRoleARN(what, s string) error {
	bad := func(why string) error {
		return &usageError{fmt.Errorf("%s %q is not an IAM role ARN: %s (want %s)", what, s, why, roleARNExample)}
	}
	if s == "" {
		return bad("it is empty")
	}
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		if !strings.Contains(s, ":") {
			return bad("pass the role's ARN, not its name")
		}
		return bad("an ARN has six ':'-separated fields, starting with \"arn\"")
	}
	partition, service, region, account, resource := parts[1], parts[2], parts[3], parts[4], parts[5]
	switch {
	case !isPartition(partition):
		return bad(fmt.Sprintf("partition %q is not one, such as aws, aws-cn or aws-us-gov", partition))
	case service != "iam":
		return bad(fmt.Sprintf("service %q is not iam", service))
	case region != "":
		return bad(fmt.Sprintf("IAM ARNs have no region, found %q", region))
	case !isAccountID(account):
		return bad(fmt.Sprintf("account %q is not 12 digits", account))
	case !strings.HasPrefix(resource, "role/"):
		return bad(fmt.Sprintf("resource %q is not role/<name>", resource))
	}
	name := resource[strings.LastIndexByte(resource, '/')+1:]
	if !isRoleName(name) {
		return bad(fmt.Sprintf("role name %q is not 1-64 characters of letters, digits and +=,.@_-", name))
	}
	return nil
}

// isPartition reports whether s looks like an AWS partition: "aws" or "aws-<suffix>".
func isPartition(s string) bool {
	if s != "aws" && !strings.HasPrefix(s, "aws-") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return !strings.HasSuffix(s, "-")
}

// isAccountID reports whether s is an AWS account id: 12 digits.
func isAccountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isRoleName reports whether s is a valid IAM role name: 1-64 characters of [\w+=,.@-].
func isRoleName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_+=,.@-", c) >= 0) {
			return false
		}
	}
	return true
}

// schedulingTarget is what resolveJobScheduling needs to know about the stack and the command.
type schedulingTarget struct {
	// Stack is the stack name; the schedule group, the scheduler DLQ and the local role derive
	// from it.
	Stack string
	// QueueName and QueueURL are the stack's job queue, the target of the schedules.
	QueueName, QueueURL string
	// FIFO reports whether the queue is a FIFO queue.
	FIFO bool
	// Local reports whether the endpoint is an emulator (see awsClients.local): it then accepts
	// any role ARN, and its schedules are fired by the local dispatcher.
	Local bool
	// Where names the endpoint in messages.
	Where string
	// Role is --scheduler-role, "" when it was not given (see schedulerRole).
	Role string
	// Why says why the scheduler's role is needed, opening the errors of a role schedulerRole
	// cannot find. Defaults to needRole (a delayed job).
	Why string
	// Alternative ends the message that refuses a FIFO queue without content-based
	// deduplication with what else the command can do (", or enqueue without --delay").
	Alternative string
}

// queueLookup is the part of the SQS client resolveJobScheduling uses. *sqs.Client implements it.
type queueLookup interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ queueLookup = (*sqs.Client)(nil)

// resolveJobScheduling returns the schedule.Config of the one-time schedules that carry the
// stack's delayed jobs: the role (as schedulerRole chose it), the schedule group <stack>-jobs, the
// queue's ARN and, when the stack has one, the scheduler's dead-letter queue. The caller sets
// Config.Scheduler. It makes one GetQueueAttributes call on the queue and one GetQueueUrl (plus
// GetQueueAttributes when it exists) for the scheduler DLQ.
func resolveJobScheduling(ctx context.Context, q queueLookup, t schedulingTarget, role string) (schedule.Config, error) {
	attrs, err := queueAttributes(ctx, q, t.QueueURL, sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNameContentBasedDeduplication)
	if err != nil {
		return schedule.Config{}, fmt.Errorf("read the attributes of queue %s: %w", t.QueueName, err)
	}
	queueARN := attrs[string(sqstypes.QueueAttributeNameQueueArn)]
	if queueARN == "" {
		return schedule.Config{}, fmt.Errorf("queue %s on %s has no QueueArn attribute", t.QueueName, t.Where)
	}
	// A Scheduler target cannot set a deduplication id: on AWS, every firing into a FIFO queue
	// without content-based deduplication would be refused (the local dispatcher sets its own).
	if t.FIFO && !t.Local && attrs[string(sqstypes.QueueAttributeNameContentBasedDeduplication)] != "true" {
		return schedule.Config{}, fmt.Errorf("FIFO queue %s has content-based deduplication off: EventBridge Scheduler cannot set a deduplication id, "+
			"so SQS would refuse every job a schedule sends it. Turn ContentBasedDeduplication on (the CDK stack does)%s", t.QueueName, t.Alternative)
	}
	dlqARN, err := schedulerDLQARN(ctx, q, t.Stack)
	if err != nil {
		return schedule.Config{}, err
	}
	return schedule.Config{
		Group:         awslocal.ScheduleGroupName(t.Stack),
		QueueARN:      queueARN,
		RoleARN:       role,
		DeadLetterARN: dlqARN,
	}, nil
}

// schedulerRoleOutput ends the key of the CloudFormation output in which the CDK stack
// (infra/jobqueue) publishes the role EventBridge Scheduler assumes; stackRoleOutput is the whole
// key in the stack of infra/main.go, whose construct is named "Jobs".
const (
	schedulerRoleOutput = "SchedulerRoleArn"
	stackRoleOutput     = "Jobs" + schedulerRoleOutput
)

// stackDescriber is the part of the CloudFormation client schedulerRole uses.
// *cloudformation.Client implements it.
type stackDescriber interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

var _ stackDescriber = (*cloudformation.Client)(nil)

// needRole opens the errors of a role schedulerRole cannot find, for a delayed job.
const needRole = "this delay goes through an EventBridge Scheduler schedule, which needs the IAM role the scheduler assumes to send to the queue"

// why returns t.Why, or needRole.
func (t schedulingTarget) why() string {
	if t.Why != "" {
		return t.Why
	}
	return needRole
}

// schedulerRole chooses the role EventBridge Scheduler assumes to send the job: --scheduler-role,
// else $SQSWORKER_SCHEDULER_ROLE_ARN, else, on an emulator, the local stack's role (any ARN works
// there), else the output JobsSchedulerRoleArn of the CloudFormation stack named after the stack, read
// with one DescribeStacks call (see stackSchedulerRole). The flag and the variable are checked
// without any call; on an emulator cfn is never called (connect builds none there).
func schedulerRole(ctx context.Context, cfn stackDescriber, t schedulingTarget, getenv func(string) string) (string, error) {
	if t.Role != "" {
		return t.Role, checkRoleARN("--scheduler-role", t.Role)
	}
	if env := getenv(schedulerRoleEnv); env != "" {
		return env, checkRoleARN("$"+schedulerRoleEnv, env)
	}
	if t.Local {
		return awslocal.SchedulerRoleARN(t.Stack), nil
	}
	if cfn == nil {
		// An AWS host given as --endpoint: that URL is not CloudFormation's, so connect builds no
		// client to ask (a usage error, as before CloudFormation was asked).
		return "", &usageError{fmt.Errorf("%s: pass --scheduler-role ARN or set %s. %s", t.why(), schedulerRoleEnv, describeStacksHint(t.Stack))}
	}
	return stackSchedulerRole(ctx, cfn, t)
}

// stackSchedulerRole reads the scheduler's role from the output JobsSchedulerRoleArn of the
// CloudFormation stack named t.Stack (infra/main.go names the stack after its "stack" context
// value, which is --stack), and checks it with checkRoleARN.
//
// Exit codes: the stack missing, the output missing or ambiguous, and a value that is no role ARN
// are usage errors (2), as the missing role they stand for has always been: the role must then
// come from the command line (--scheduler-role, or the variable), or --stack or --region is
// wrong. A failed call (access denied, throttling, an unreachable endpoint) is an error (1), as
// every failed AWS call of the CLI is: the command line is right, and may succeed once the cause
// is fixed.
func stackSchedulerRole(ctx context.Context, cfn stackDescriber, t schedulingTarget) (string, error) {
	out, err := cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(t.Stack)})
	if err != nil && !stackNotFound(err) {
		return "", fmt.Errorf("read the scheduler's role from CloudFormation stack %s: %w\n  pass --scheduler-role ARN or set %s. %s",
			t.Stack, err, schedulerRoleEnv, describeStacksHint(t.Stack))
	}
	if err != nil || len(out.Stacks) == 0 {
		return "", &usageError{fmt.Errorf("%s, and no CloudFormation stack named %s was found on %s to read it from (the CDK stack publishes it as its output %s): "+
			"check --stack and --region, or pass --scheduler-role ARN or set %s", t.why(), t.Stack, t.Where, stackRoleOutput, schedulerRoleEnv)}
	}
	st := out.Stacks[0]
	var keys, values []string
	for _, o := range st.Outputs {
		if isSchedulerRoleOutput(aws.ToString(o.OutputKey)) {
			keys, values = append(keys, aws.ToString(o.OutputKey)), append(values, aws.ToString(o.OutputValue))
		}
	}
	if len(keys) == 0 {
		status := ""
		if st.StackStatus != "" {
			status = " (" + string(st.StackStatus) + ")"
		}
		return "", &usageError{fmt.Errorf("%s, and CloudFormation stack %s%s has no output %s: it was deployed with scheduling disabled, or it is not an sqsworker stack. "+
			"Deploy it with scheduling enabled, or pass --scheduler-role ARN or set %s", t.why(), t.Stack, status, stackRoleOutput, schedulerRoleEnv)}
	}
	if len(keys) > 1 {
		return "", &usageError{fmt.Errorf("%s, and CloudFormation stack %s has %d outputs that may be it (%s): pass --scheduler-role ARN or set %s",
			t.why(), t.Stack, len(keys), strings.Join(keys, ", "), schedulerRoleEnv)}
	}
	if err := checkRoleARN(fmt.Sprintf("output %s of CloudFormation stack %s", keys[0], t.Stack), values[0]); err != nil {
		return "", &usageError{fmt.Errorf("%w; pass --scheduler-role ARN or set %s", err, schedulerRoleEnv)}
	}
	return values[0], nil
}

// stackNotFound reports whether err is CloudFormation's answer for a stack that does not exist:
// DescribeStacks answers a ValidationError "Stack with id NAME does not exist" (the SDK's
// StackNotFoundException is for other operations; it is accepted too).
func stackNotFound(err error) bool {
	var nf *cftypes.StackNotFoundException
	if errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist")
}

// isSchedulerRoleOutput reports whether a stack output's key names the scheduler's role: a key
// ending in SchedulerRoleArn ("JobsSchedulerRoleArn", what infra/jobqueue names it in the stack of
// infra/main.go, or SchedulerRoleArn itself), optionally followed by the 8 hex digits CDK appends
// to the logical id of an output inside a construct when the construct does not fix it
// ("JobsSchedulerRoleArnA23EDD26").
func isSchedulerRoleOutput(key string) bool {
	if n := len(key) - 8; n > 0 && isUpperHex(key[n:]) && strings.HasSuffix(key[:n], schedulerRoleOutput) {
		return true
	}
	return strings.HasSuffix(key, schedulerRoleOutput)
}

// isUpperHex reports whether s is made of the digits 0-9 and A-F.
func isUpperHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// describeStacksHint is the command that prints the stack's role, for messages.
func describeStacksHint(stack string) string {
	return fmt.Sprintf("The CDK stack publishes the role as its output %s:\n"+
		"  aws cloudformation describe-stacks --stack-name %s --query \"Stacks[0].Outputs[?contains(OutputKey, '%s')].OutputValue\" --output text",
		stackRoleOutput, stack, schedulerRoleOutput)
}

// schedulerDLQARN returns the ARN of the stack's scheduler dead-letter queue, or "" when the stack
// has none (stacks made by `sqsworker up`, or CDK stacks without scheduling).
func schedulerDLQARN(ctx context.Context, q queueLookup, stack string) (string, error) {
	name := awslocal.SchedulerDLQName(stack)
	out, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		var qe *sqstypes.QueueDoesNotExist
		if errors.As(err, &qe) || apiErrorCode(err) == "AWS.SimpleQueueService.NonExistentQueue" {
			return "", nil
		}
		return "", fmt.Errorf("look up queue %s: %w", name, err)
	}
	attrs, err := queueAttributes(ctx, q, aws.ToString(out.QueueUrl), sqstypes.QueueAttributeNameQueueArn)
	if err != nil {
		return "", fmt.Errorf("read the ARN of queue %s: %w", name, err)
	}
	return attrs[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// queueAttributes reads some attributes of one queue.
func queueAttributes(ctx context.Context, q queueLookup, url string, names ...sqstypes.QueueAttributeName) (map[string]string, error) {
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// scheduleGroupMissing explains a schedule the scheduler refused because the stack's schedule
// group does not exist, or returns nil for another error.
func scheduleGroupMissing(err error, c *awsClients, stack string, fifo bool) error {
	if !errors.Is(err, producer.ErrInvalid) && apiErrorCode(err) == "ResourceNotFoundException" {
		group := awslocal.ScheduleGroupName(stack)
		if !c.local {
			return fmt.Errorf("schedule group %s not found on %s: deploy the stack with scheduling enabled (the CDK stack creates it), "+
				"or enqueue with a delay of at most 15 minutes on a standard queue: %w", group, c.where, err)
		}
		up := "sqsworker up --stack " + stack
		if fifo {
			up += " --fifo"
		}
		up += " --endpoint " + c.where
		return fmt.Errorf("schedule group %s not found on %s: create it with `%s`", group, c.where, up)
	}
	return nil
}
