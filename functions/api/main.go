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

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/functions/internal/otelsetup"
	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

func main() {
	api, ot, err := setup(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if ot == nil {
		lambda.Start(api.Handle)
		return
	}
	// Tracing: each request runs in an invocation span (the parent of the producer's spans).
	lambda.Start(func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		var resp events.LambdaFunctionURLResponse
		_, err := ot.Invoke(ctx, "http", func(ctx context.Context) ([]byte, error) {
			var err error
			resp, err = api.Handle(ctx, req)
			return nil, err
		})
		return resp, err
	})
}

// setup reads the configuration with getenv and builds the API, and its tracing when the
// environment asks for it (nil otherwise). The error has one line per problem.
func setup(ctx context.Context, getenv func(string) string) (*API, *otelsetup.Setup, error) {
	cfg, err := config.LoadAPI(getenv)
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	ot, err := otelsetup.New(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	pcfg := producer.Config{SQS: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL}
	if ot != nil {
		pcfg.Observer = ot.Tracing.Producer()
	}
	prod, err := producer.New(pcfg)
	if err != nil {
		return nil, nil, err
	}
	api := &API{Producer: prod, Logger: logger}
	if cfg.Table != "" {
		t, err := status.New(status.Config{Client: dynamodb.NewFromConfig(awsCfg, awsendpoint.DynamoDB(awsCfg)), Table: cfg.Table})
		if err != nil {
			return nil, nil, err
		}
		api.Status = t
	}
	return api, ot, nil
}
