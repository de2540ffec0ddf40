// Command events is the completion events Lambda function (pkg/jobevents): behind an event source
// mapping of the job table's DynamoDB stream (NEW_AND_OLD_IMAGES; filter criteria
// jobevents.FilterPattern: final states only; ReportBatchItemFailures, BisectBatchOnFunctionError,
// bounded retries, an on-failure queue), it publishes one EventBridge event per job that entered
// succeeded, dead or cancelled, and answers with the first record it could not publish.
//
// Configuration (functions/internal/config, docs/FUNCTIONS.md): SQSWORKER_EVENT_BUS (the bus's
// name or ARN; default: the account's default bus), SQSWORKER_EVENT_SOURCE (default "sqsworker"),
// SQSWORKER_LOG_LEVEL. An invalid setting is reported on its own line on stderr, and the process
// exits with status 1. It needs events:PutEvents on its bus, and the stream reads the mapping
// makes; it reads and writes no table.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/jobevents"
)

func main() {
	pub, err := setup(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(pub.HandleDynamoDB)
}

// setup reads the configuration with getenv and builds the publisher; logs go to logw (JSON).
func setup(ctx context.Context, getenv func(string) string, logw io.Writer) (*jobevents.Publisher, error) {
	cfg, err := config.LoadEvents(getenv)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// One PutEvents call at a time.
	config.SizePool(&awsCfg, 2)
	return newPublisher(eventbridge.NewFromConfig(awsCfg), cfg, logger)
}

// newPublisher builds the publisher on an EventBridge client (tests pass the emulator's).
func newPublisher(eb jobevents.EventBridgeAPI, cfg config.Events, logger *slog.Logger) (*jobevents.Publisher, error) {
	pub, err := jobevents.New(jobevents.Config{EventBridge: eb, EventBus: cfg.EventBus, Source: cfg.Source, Logger: logger})
	if err != nil {
		return nil, err
	}
	logger.Info("sqsworker events ready", slog.String("event_bus", cfg.EventBus), slog.String("source", cfg.Source))
	return pub, nil
}
