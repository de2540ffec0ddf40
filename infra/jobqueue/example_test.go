package jobqueue_test

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/jobqueue"
)

// A CDK app of your own: the job system beside your service, whose role may enqueue. The
// construct builds the queue and its DLQ, the job table, the worker function with its SQS event
// source, the schedule group and its role, alarms, a dashboard and the outputs the CLI reads
// (infra/README.md lists every resource and prop). It is compiled, not run: synthesizing needs
// the worker's zip.
func ExampleNew() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("shop"), nil)

	jq, err := jobqueue.New(stack, "Jobs", jobqueue.Props{
		Name:               "shop",                     // shop-jobs, shop-jobs-dlq, table shop-jobs, …
		WorkerAsset:        "../dist/worker-arm64.zip", // `make build`, or your own worker main's zip
		MaxAttempts:        8,                          // the largest of your kinds; maxReceiveCount = 3 × 8
		AlarmEmail:         "ops@example.com",
		DeletionProtection: true, // the job table is kept when the stack is deleted
	})
	if err != nil {
		panic(err) // a prop out of range: the message says which and why
	}

	service := awsiam.NewRole(stack, jsii.String("ServiceRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
	})
	jq.GrantEnqueue(service) // sqs:SendMessage, and the scheduler's actions for long delays

	app.Synth(nil)
}
