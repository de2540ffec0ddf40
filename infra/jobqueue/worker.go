package jobqueue

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// Environment variable names of the worker (functions/internal/config).
const (
	EnvQueueURL       = "SQSWORKER_QUEUE_URL"
	EnvDLQURL         = "SQSWORKER_DLQ_URL"
	EnvTable          = "SQSWORKER_TABLE"
	EnvLogLevel       = "SQSWORKER_LOG_LEVEL"
	EnvConcurrency    = "SQSWORKER_CONCURRENCY"
	EnvDeadlineMargin = "SQSWORKER_DEADLINE_MARGIN"
	EnvScheduleGroup  = "SQSWORKER_SCHEDULE_GROUP"
	// EnvExpectRecords is set (true) when a producer of the stack records jobs before they run
	// (Props.Api): see idempotency.MiddlewareConfig.ExpectRecords.
	EnvExpectRecords = "SQSWORKER_EXPECT_RECORDS"
	// Set only with Props.WorkerEnqueues, for a worker main that enqueues follow-up jobs: the
	// fields of schedule.Config (the scheduler ones only when scheduling is enabled).
	EnvQueueARN         = "SQSWORKER_QUEUE_ARN"
	EnvSchedulerRoleARN = "SQSWORKER_SCHEDULER_ROLE_ARN"
	EnvSchedulerDLQARN  = "SQSWORKER_SCHEDULER_DLQ_ARN"
)

// worker builds the worker function, its role and log group, and its SQS event source.
func (jq *JobQueue) worker() {
	p := jq.Props
	c := jq.Construct
	env := map[string]*string{
		EnvQueueURL: jq.Queue.QueueUrl(),
		EnvDLQURL:   jq.DLQ.QueueUrl(),
		EnvTable:    jq.Table.TableName(),
	}
	if len(p.Queues) > 0 {
		// Several queues: each batch's queue (and DLQ) from its event source; a fixed URL would
		// send every queue's retries to one (wireNamedQueues sets SQSWORKER_QUEUES).
		delete(env, EnvQueueURL)
		delete(env, EnvDLQURL)
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
	// Deleted with the stack, deletion protection or not (only the table is retained).
	jq.LogGroup = awslogs.NewLogGroup(c, jsii.String("WorkerLogs"), &awslogs.LogGroupProps{
		Retention:     p.LogRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	// Its own role, without the AWSLambdaBasicExecutionRole managed policy (logs:* on every
	// group): it may write only to its log group.
	jq.WorkerRole = awsiam.NewRole(c, jsii.String("WorkerRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("sqsworker worker " + p.Name),
	})
	jq.LogGroup.GrantWrite(jq.WorkerRole)
	fnProps := &awslambda.FunctionProps{
		Role:         jq.WorkerRole,
		LogGroup:     jq.LogGroup,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(p.WorkerAsset), nil),
		MemorySize:   jsii.Number(float64(p.MemoryMB)),
		Timeout:      secs(p.Timeout),
		Environment:  &env,
		// Written out even at Lambda's default, so that the template says what runs.
		RecursiveLoop: p.RecursiveLoop,
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
}

// grantWorker gives the worker what it calls beyond consuming its queue, and with
// WorkerEnqueues what a producer has plus the environment a schedule.Config needs.
func (jq *JobQueue) grantWorker() {
	p := jq.Props
	// Its own queue, always: pkg/worker re-sends a job whose RetryAfter is beyond the visibility
	// cap, and a job still waiting for its run_at, to the queue it came from (SendMessageBatch,
	// authorized as sqs:SendMessage). Without it those jobs fail with AccessDenied and burn
	// their attempts.
	jq.grantSend(jq.Queue, jq.Worker)
	jq.grantSend(jq.DLQ, jq.Worker)
	jq.grantWorkerTable(jq.Worker)
	if !p.WorkerEnqueues {
		return
	}
	jq.GrantEnqueue(jq.Worker)
	jq.Worker.AddEnvironment(jsii.String(EnvQueueARN), jq.Queue.QueueArn(), nil)
	if jq.SchedulerRole == nil {
		return
	}
	jq.Worker.AddEnvironment(jsii.String(EnvSchedulerRoleARN), jq.SchedulerRole.RoleArn(), nil)
	jq.Worker.AddEnvironment(jsii.String(EnvSchedulerDLQARN), jq.SchedulerDLQ.QueueArn(), nil)
	suppress(jq.WorkerRole.Node().TryFindChild(jsii.String("DefaultPolicy")), nagRule{
		ID: "AwsSolutions-IAM5",
		Reason: "With WorkerEnqueues the worker may manage schedules in this stack's group only: the wildcard is " +
			"schedule/<this stack's group>/*, since one-time schedule names are per job.",
		AppliesTo: []any{map[string]any{"regex": "/^Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule\\/" + ScheduleGroupName(p.Name) + "\\/\\*$/"}},
	})
}
