// Command pgrelay is the PostgreSQL outbox relay as a Lambda function: EventBridge Scheduler
// invokes it every minute (infra/jobqueue's PostgresOutbox), and each invocation drains the
// outbox (pkg/outbox/pgoutbox) into the queue until nothing is due or the invocation is near its
// deadline, then writes one EMF line of metrics (sent, failed, dead in this invocation; pending
// and dead rows, the oldest pending row's age; relay errors) and returns a summary. Overlapping
// invocations are safe: claims never hand a row to two relays. Build it like the other
// functions (make build).
//
// Configuration (functions/internal/config.LoadPGRelay, docs/FUNCTIONS.md):
// SQSWORKER_QUEUE_URL, the database as SQSWORKER_OUTBOX_DSN or SQSWORKER_OUTBOX_SECRET_ARN (a
// Secrets Manager secret in the RDS format, read at each new connection and cached for five
// minutes, so a rotated password is picked up), SQSWORKER_OUTBOX_TABLE, SQSWORKER_TABLE (the job
// table: record jobs as queued), the relay's batch size, lease and attempts, and EventBridge
// Scheduler for jobs delayed beyond 15 minutes.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/internal/logattr"
)

func main() {
	h, err := setup(context.Background(), os.Getenv, os.Stderr, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.StartHandler(h)
}

// setup reads the configuration and builds the handler; logs go to logw (JSON), metrics to
// metricsw (EMF). The error has one line per problem.
func setup(ctx context.Context, getenv func(string) string, logw, metricsw io.Writer) (*handler, error) {
	cfg, err := config.LoadPGRelay(getenv)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: logattr.DurationText}))
	slog.SetDefault(logger)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// One pass at a time, its sends one after the other: the SDK's 10 idle connections suffice.
	config.SizePool(&awsCfg, 2)
	return newHandler(ctx, cfg, awsCfg, logger, metricsw, getenv("AWS_LAMBDA_FUNCTION_NAME"))
}
