package main

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

func newUpCmd(g *globals) *cobra.Command {
	var fifo, payloads bool
	var maxReceive, visibility, port int
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Provision a stack's queue, DLQ (with its redrive policy) and job table",
		Long: `up creates the queues <stack>-jobs and <stack>-jobs-dlq (".fifo" with --fifo) with a
redrive policy, the DynamoDB job table <stack>-jobs (idempotency and status, with its
indexes and TTL), the EventBridge Scheduler schedule group <stack>-jobs and the transactional
outbox table <stack>-outbox (with its stream); with --payloads also the S3 bucket
<stack>-payloads (or --payload-bucket) for jobs larger than SQS allows. It is idempotent.

With --endpoint (or AWS_ENDPOINT_URL) it provisions that emulator or LocalStack and exits.
Without one it starts the embedded emulator on localhost:--port (4566 by default),
provisions the stack there and keeps serving it until Ctrl-C: run your own worker and the
other sqsworker commands against it from other terminals, with
AWS_ENDPOINT_URL=http://localhost:4566. Its state ends with the command. It answers only
requests addressed to this machine (localhost, 127.0.0.1 or [::1]), and none a browser sends
for another site's page: a web page cannot drive it (403 with the reason). It fires no
schedules: 'sqsworker run --endpoint …' and the container example run the dispatcher that
does. To run the worker function in the same terminal, 'sqsworker run' alone starts and
provisions the emulator itself.

On AWS, stacks are deployed with the CDK app in infra/ (make deploy), not with up.`,
		Example: `  sqsworker up --stack myapp                    # serve the embedded emulator on localhost:4566
  sqsworker up --stack myapp --port 4567        # on another port
  AWS_ENDPOINT_URL=http://localhost:4566 sqsworker up --stack other   # one more stack there
  sqsworker up --stack myapp --fifo --max-receive-count 30 --endpoint http://localhost:4566`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			switch {
			case maxReceive < 1 || maxReceive > 1000:
				return &usageError{fmt.Errorf("--max-receive-count %d: want 1-1000 (SQS's limits)", maxReceive)}
			case visibility < 1 || visibility > 43200:
				return &usageError{fmt.Errorf("--visibility-timeout %d: want 1-43200 seconds (at most 12 hours)", visibility)}
			}
			ctx := cmd.Context()
			keepRunningOnBrokenPipe()
			b, err := startLocal(ctx, cmd, g, port)
			if err != nil {
				return err
			}
			defer b.Close()
			st, err := awslocal.Provision(ctx, sqs.NewFromConfig(b.Config), awslocal.StackOptions{
				Name: stack, FIFO: fifo, MaxReceiveCount: maxReceive, VisibilityTimeout: visibility,
			})
			if err != nil {
				return err
			}
			table, err := awslocal.ProvisionTable(ctx, b.DynamoDB(), stack)
			if err != nil {
				return err
			}
			group, err := awslocal.ProvisionScheduleGroup(ctx, scheduler.NewFromConfig(b.Config), stack)
			if err != nil {
				return err
			}
			outboxTable := awslocal.OutboxTableName(stack)
			if _, err := dynamooutbox.CreateTable(ctx, b.DynamoDB(), outboxTable); err != nil {
				return err
			}
			bucket := ""
			if payloads {
				if bucket, err = provisionPayloadBucket(ctx, b, g, stack); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "endpoint  %s (%s)\n", b.URL, b.Kind)
			fmt.Fprintf(out, "queue     %s\n          %s\n", b.QueueURL(st.QueueURL), st.QueueARN)
			fmt.Fprintf(out, "dlq       %s\n          %s\n", b.QueueURL(st.DLQURL), st.DLQARN)
			fmt.Fprintf(out, "table     %s\n", table)
			fmt.Fprintf(out, "schedules %s (schedule group)\n", group)
			fmt.Fprintf(out, "outbox    %s (transactional outbox, with its stream)\n", outboxTable)
			if bucket != "" {
				fmt.Fprintf(out, "payloads  %s (S3 bucket)\n", bucket)
			}
			if b.Kind != awslocal.Embedded {
				return nil
			}
			fmt.Fprintf(out, "\nserving the embedded emulator at %s until Ctrl-C (its state ends with it). In another terminal:\n"+
				"  export AWS_ENDPOINT_URL=%s\n  sqsworker enqueue email.send '{\"to\":\"ada@example.com\"}' --stack %s\n",
				b.URL, b.URL, stack)
			<-ctx.Done()
			fmt.Fprintln(cmd.ErrOrStderr(), "stopped")
			return nil
		},
	}
	cmd.Flags().BoolVar(&fifo, "fifo", false, "create FIFO queues")
	cmd.Flags().IntVar(&maxReceive, "max-receive-count", 15, "redrive policy maxReceiveCount, 1-1000 (≥ 3 × the largest MaxAttempts)")
	cmd.Flags().IntVar(&visibility, "visibility-timeout", 30, "queue visibility timeout in seconds, 1-43200 (≥ 6 × the function timeout)")
	addPortFlag(cmd, &port)
	cmd.Flags().BoolVar(&payloads, "payloads", false, "also create the S3 bucket for jobs larger than SQS allows (<stack>-payloads, or --payload-bucket)")
	return cmd
}
