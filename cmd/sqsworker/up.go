package main

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

func newUpCmd(g *globals) *cobra.Command {
	var fifo bool
	var maxReceive, visibility int
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Provision a stack's queue, DLQ (with its redrive policy) and job table",
		Long: `up creates the queues <stack>-jobs and <stack>-jobs-dlq (".fifo" with --fifo) with a
redrive policy, the DynamoDB job table <stack>-jobs (idempotency and status, with its
indexes and TTL) and the EventBridge Scheduler schedule group <stack>-jobs, on the endpoint given by --endpoint or AWS_ENDPOINT_URL. It is idempotent.
Without an endpoint it starts the embedded emulator, which ends with the command; use it
against a running emulator or LocalStack.`,
		Example: `  AWS_ENDPOINT_URL=http://localhost:4566 sqsworker up --stack myapp
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
			b, err := awslocal.Start(cmd.Context(), awslocal.Options{Endpoint: g.endpoint, Region: g.region})
			if err != nil {
				return err
			}
			defer b.Close()
			st, err := awslocal.Provision(cmd.Context(), sqs.NewFromConfig(b.Config), awslocal.StackOptions{
				Name: stack, FIFO: fifo, MaxReceiveCount: maxReceive, VisibilityTimeout: visibility,
			})
			if err != nil {
				return err
			}
			table, err := awslocal.ProvisionTable(cmd.Context(), b.DynamoDB(), stack)
			if err != nil {
				return err
			}
			group, err := awslocal.ProvisionScheduleGroup(cmd.Context(), scheduler.NewFromConfig(b.Config), stack)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "endpoint  %s (%s)\n", b.URL, b.Kind)
			fmt.Fprintf(out, "queue     %s\n          %s\n", st.QueueURL, st.QueueARN)
			fmt.Fprintf(out, "dlq       %s\n          %s\n", st.DLQURL, st.DLQARN)
			fmt.Fprintf(out, "table     %s\n", table)
			fmt.Fprintf(out, "schedules %s (schedule group)\n", group)
			return nil
		},
	}
	cmd.Flags().BoolVar(&fifo, "fifo", false, "create FIFO queues")
	cmd.Flags().IntVar(&maxReceive, "max-receive-count", 15, "redrive policy maxReceiveCount (≥ 3 × the largest MaxAttempts)")
	cmd.Flags().IntVar(&visibility, "visibility-timeout", 30, "queue visibility timeout in seconds (≥ 6 × the function timeout)")
	return cmd
}
