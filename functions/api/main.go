// Command api is an HTTP producer for sqsworker behind a Lambda function URL:
//
//	POST /jobs       {"kind":"email.send","args":{…},"delay":"30s"}  → 202 {"id","key","status_url"}
//	GET  /jobs/{id}  → 200 the job's status (404 unknown; 501 without SQSWORKER_TABLE);
//	                   ?wait=20s long-polls for its final state (at most 20 s, and the function's timeout)
//
// It admits only the kinds of its allow-list (SQSWORKER_API_KINDS, required), each with a limit
// on its args' size and optionally a JSON Schema (SQSWORKER_API_SCHEMAS). The Idempotency-Key
// header becomes the job's key; with a job table (SQSWORKER_TABLE) a repeated key gets the first
// answer, and the same key with another body 409. With AWS_IAM auth, keys and job ids are
// scoped by the caller's IAM principal: one caller can neither use nor read another's. GET
// shows the key, result, last error and reason only with SQSWORKER_API_SHOW_DETAILS. A request may
// ask for a deduplication rule ("unique", "debounce", "throttle") for the kinds SQSWORKER_API_DEDUP
// allows it. See docs/FUNCTIONS.md and docs/DEDUP.md.
//
// It is configured from its environment; each missing or invalid setting (a schema that does
// not compile included) is reported on its own line on stderr, and the process exits with
// status 1.
package main

import (
	"context"
	"errors"
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
	"github.com/sqsworker/sqsworker/internal/logattr"
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
		ctx, end := ot.Start(ctx, otelsetup.Invocation{Trigger: "http", Headers: req.Headers,
			Method: req.RequestContext.HTTP.Method, Path: req.RequestContext.HTTP.Path})
		resp, err := api.Handle(ctx, req)
		end(resp.StatusCode, err)
		return resp, err
	})
}

// setup reads the configuration with getenv and builds the API, and its tracing when the
// environment asks for it (nil otherwise). The error has one line per problem.
func setup(ctx context.Context, getenv func(string) string) (*API, *otelsetup.Setup, error) {
	cfg, err := config.LoadAPI(getenv)
	policy, perr := NewPolicy(cfg, os.ReadFile)
	if err := errors.Join(err, perr); err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: logattr.DurationText}))
	slog.SetDefault(logger)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// One request at a time; GET reads twice at once: the SDK's 10 idle connections suffice.
	config.SizePool(&awsCfg, 2)
	ot, err := otelsetup.New(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	pcfg := producer.Config{SQS: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL}
	if cfg.Queues.Set != nil { // several queues: each kind to its queue (SQSWORKER_ROUTES)
		pcfg.Queues, pcfg.Routes = cfg.Queues.Set, cfg.Queues.Routes
	}
	if ot != nil {
		pcfg.Observer = ot.Tracing.Producer()
	}
	prod, err := producer.New(pcfg)
	if err != nil {
		return nil, nil, err
	}
	api := &API{Producer: prod, Policy: policy, ShowDetails: cfg.ShowDetails, Logger: logger}
	if cfg.Table != "" {
		t, err := status.New(status.Config{Client: dynamodb.NewFromConfig(awsCfg, awsendpoint.DynamoDB(awsCfg)), Table: cfg.Table,
			Layout: cfg.TableLayout})
		if err != nil {
			return nil, nil, err
		}
		api.Status, api.Reserver = t, t
		if len(cfg.Dedup) > 0 {
			if api.Dedup, err = newDeduper(awsCfg, cfg, prod, t); err != nil {
				return nil, nil, err
			}
		}
	}
	kinds := make([]string, len(cfg.Kinds))
	for i, k := range cfg.Kinds {
		kinds[i] = k.Kind
	}
	logger.Info("sqsworker api ready", slog.String("queue_url", cfg.QueueURL), slog.String("table", cfg.Table),
		slog.Any("kinds", kinds), slog.Int("schemas", len(cfg.Schemas)), slog.Bool("show_details", cfg.ShowDetails),
		slog.Bool("tracing", ot != nil), slog.Any("dedup", cfg.Dedup))
	return api, ot, nil
}
