// Command api is an HTTP producer for sqsworker behind a Lambda function URL:
//
//	POST /jobs       {"kind":"email.send","args":{…},"delay":"30s"}  → 202 {"id","key","status_url"}
//	GET  /jobs/{id}  → 200 the job's status (404 unknown; 501 without SQSWORKER_TABLE)
//
// The Idempotency-Key header becomes the job's key. It is configured from its environment
// (SQSWORKER_QUEUE_URL required, SQSWORKER_TABLE, SQSWORKER_LOG_LEVEL); each missing or invalid
// setting is reported on its own line on stderr, and the process exits with status 1.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

func main() {
	api, err := setup(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(api.Handle)
}

// setup reads the configuration with getenv and builds the API. The error has one line per
// problem.
func setup(ctx context.Context, getenv func(string) string) (*API, error) {
	cfg, err := config.LoadAPI(getenv)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	prod, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL})
	if err != nil {
		return nil, err
	}
	api := &API{Producer: prod, Logger: logger}
	if cfg.Table != "" {
		t, err := status.New(status.Config{Client: dynamodb.NewFromConfig(awsCfg), Table: cfg.Table})
		if err != nil {
			return nil, err
		}
		api.Status = t
	}
	return api, nil
}
