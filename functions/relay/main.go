// Command relay is the DynamoDB transactional outbox's relay Lambda function
// (pkg/outbox/dynamooutbox). It is invoked two ways:
//
//   - by the event source mapping of the outbox table's stream (filter: inserts; with
//     ReportBatchItemFailures, BisectBatchOnFunctionError, a bounded MaximumRetryAttempts and an
//     on-failure queue): it claims the batch's jobs with a conditional write each, sends them
//     with SendMessageBatch and deletes them, answering with the records whose claim failed;
//   - by an EventBridge Scheduler schedule, rate(1 minute), with the input {"mode":"sweep"}: it
//     sends what the stream path missed (jobs older than SQSWORKER_OUTBOX_SWEEP_AFTER, retries
//     whose backoff has passed), until the table has nothing due or the deadline nears.
//
// Configuration (functions/internal/config, docs/FUNCTIONS.md): SQSWORKER_OUTBOX_TABLE and
// SQSWORKER_QUEUE_URL are required; SQSWORKER_OUTBOX_SWEEP_AFTER, SQSWORKER_OUTBOX_MAX_ATTEMPTS,
// SQSWORKER_OUTBOX_LEASE, SQSWORKER_LOG_LEVEL and the scheduler settings (SQSWORKER_SCHEDULE_GROUP,
// SQSWORKER_QUEUE_ARN, SQSWORKER_SCHEDULER_ROLE_ARN, SQSWORKER_SCHEDULER_DLQ_ARN, for delays
// beyond 15 minutes) are optional. Every missing or invalid setting is reported on its own line on
// stderr, and the process exits with status 1. Metrics (EMF, namespace sqsworker, dimensions
// Service=relay and Table): per batch and per sweep that claimed anything, the counts
// OutboxClaimed, OutboxSent, OutboxFailed, OutboxDead (jobs that died in it), OutboxReleased and
// OutboxDeferred; after every sweep, the gauge OutboxDeadJobs (how many dead jobs the table holds),
// which the stack's dead-job alarm watches.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/internal/logattr"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

func main() {
	h, err := setup(context.Background(), os.Getenv, os.Stderr, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.StartHandler(h)
}

// setup reads the configuration with getenv and builds the handler. Logs go to logw (JSON),
// metrics to metricsw (EMF).
func setup(ctx context.Context, getenv func(string) string, logw, metricsw io.Writer) (*handler, error) {
	cfg, err := config.LoadRelay(getenv)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: logattr.DurationText}))
	slog.SetDefault(logger)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// The outbox's claims and completes run dynamooutbox.DefaultConcurrency requests at once.
	config.SizePool(&awsCfg, dynamooutbox.DefaultConcurrency+2)
	pcfg := producer.Config{SQS: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL}
	if cfg.Scheduling() {
		sc, err := schedule.NewClient(schedule.Config{Scheduler: scheduler.NewFromConfig(awsCfg), Group: cfg.ScheduleGroup,
			QueueARN: cfg.QueueARN, RoleARN: cfg.SchedulerRoleARN, DeadLetterARN: cfg.SchedulerDLQARN})
		if err != nil {
			return nil, err
		}
		pcfg.Scheduler = sc
	}
	p, err := producer.New(pcfg)
	if err != nil {
		return nil, err
	}
	return newHandler(dynamodb.NewFromConfig(awsCfg), cfg, []*producer.Producer{p}, logger, metricsw)
}

// newHandler builds the relay's handler on a DynamoDB client (tests pass the emulator's).
func newHandler(ddb dynamooutbox.DynamoDBAPI, cfg config.Relay, producers []*producer.Producer, logger *slog.Logger, metricsw io.Writer) (*handler, error) {
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: cfg.OutboxTable, SweepAfter: cfg.SweepAfter, Logger: logger})
	if err != nil {
		return nil, err
	}
	m := &emf{w: metricsw, table: cfg.OutboxTable}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: producers, MaxAttempts: cfg.MaxAttempts, Lease: cfg.Lease,
		Logger: logger})
	if err != nil {
		return nil, err
	}
	sr, err := dynamooutbox.NewStreamRelay(dynamooutbox.StreamRelayConfig{Outbox: ob, Relay: relay, Lease: cfg.Lease, Logger: logger,
		OnBatch: func(st outbox.Stats) { m.write(st, -1) }})
	if err != nil {
		return nil, err
	}
	logger.Info("sqsworker outbox relay ready", slog.String("table", cfg.OutboxTable), slog.String("queue_url", cfg.QueueURL),
		slog.Duration("sweep_after", cfg.SweepAfter), slog.Int("max_attempts", cfg.MaxAttempts), slog.Bool("scheduling", cfg.Scheduling()))
	return &handler{outbox: ob, stream: sr, relay: relay, metrics: m, logger: logger}, nil
}
