// Command worker is the sqsworker consumer Lambda function: an SQS event source mapping (with
// ReportBatchItemFailures) invokes it with batches of jobs, and it answers with the partial batch
// response. Build it for the provided.al2023 runtime as a file named bootstrap, with
// -tags lambda.norpc (make build).
//
// It is configured from its environment (see functions/internal/config and docs/FUNCTIONS.md):
// every missing or invalid setting is reported on its own line on stderr, and the process exits
// with status 1. It registers the example job kinds; a real deployment copies this file and
// registers its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/functions/internal/config"
	"github.com/sqsworker/sqsworker/functions/internal/otelsetup"
	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/internal/logattr"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/worker"
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
// metrics to metricsw (EMF). The error has one line per problem.
func setup(ctx context.Context, getenv func(string) string, logw, metricsw io.Writer) (lambda.Handler, error) {
	cfg, err := config.LoadWorker(getenv)
	long, lerr := config.LoadLongJobs(getenv)
	if err = errors.Join(err, lerr); err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: logattr.DurationText}))
	slog.SetDefault(logger)

	// AWS_ENDPOINT_URL, AWS_REGION and the execution role's credentials are read by the SDK. On an
	// emulator's endpoint (sqsworker run), the DynamoDB client skips the response checksum that
	// emulators do not send; on AWS it keeps it.
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	config.SizePool(&awsCfg, cfg.IdleConnsPerHost())

	reg := jobs.NewRegistry()
	if err := examplejobs.Register(reg, jobs.Exponential{}, examplejobs.NewSideEffects()); err != nil {
		return nil, fmt.Errorf("register the job kinds: %w", err)
	}

	m := newQueueMetrics(cfg.QueueURL, metricsw)
	wcfg := worker.Config{
		Registry:       reg,
		SQS:            sqs.NewFromConfig(awsCfg),
		QueueURL:       cfg.QueueURL,
		DLQURL:         cfg.DLQURL,
		Concurrency:    cfg.Concurrency,
		DeadlineMargin: cfg.DeadlineMargin,
		Slice:          long.Slice,
		SliceGrace:     long.SliceGrace,
		OnBatch:        m.ObserveBatch,
		Logger:         logger,
	}
	var objects *payload.Store
	if cfg.PayloadBucket != "" {
		// On an emulator's endpoint (sqsworker run), buckets by path (<bucket>.localhost, the
		// virtual-hosted name, resolves nowhere on most machines), and checksums only where an
		// operation requires them: emulators send none, and the SDK would warn on every read.
		s3Client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
			if awsendpoint.Local(awsCfg) {
				o.UsePathStyle = true
				o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
				o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			}
		})
		if objects, err = payload.New(payload.Config{S3: s3Client, Bucket: cfg.PayloadBucket}); err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvPayloadBucket, err)
		}
		wcfg.Payload, wcfg.PayloadCleanup = objects, cfg.PayloadCleanup
	}
	if long.Scheduler() {
		// Copies of jobs that sleep (or retry) more than 15 minutes ahead wait in the scheduler.
		sc, err := schedule.NewClient(schedule.Config{Scheduler: scheduler.NewFromConfig(awsCfg), Group: long.ScheduleGroup,
			QueueARN: long.QueueARN, RoleARN: long.SchedulerRoleARN, DeadLetterARN: long.SchedulerDLQARN})
		if err != nil {
			return nil, err
		}
		wcfg.Scheduler = sc
	}
	if cfg.Table != "" {
		ddb := dynamodb.NewFromConfig(awsCfg, awsendpoint.DynamoDB(awsCfg))
		inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: cfg.Table,
			Layout: cfg.TableLayout})
		if err != nil {
			return nil, err
		}
		// Flow control first, outside the idempotency middleware (its deferrals spend no
		// attempt): `sqsworker pause KIND` works on every deployment; a real worker declares its
		// limits here (docs/FLOW.md). It reads the table's pause item at most once per 5 s.
		ft, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: cfg.Table})
		if err != nil {
			return nil, err
		}
		fl, err := flow.NewMiddleware(flow.Config{Store: ft, Logger: logger})
		if err != nil {
			return nil, err
		}
		wcfg.Middleware = append(wcfg.Middleware, fl)
		var store idempotency.Store = inner
		if cfg.BatchesOutboxTable != "" {
			// Children of batches and steps of chains are counted with their final write
			// (pkg/batch); callbacks and next steps go through the DynamoDB outbox.
			ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: cfg.BatchesOutboxTable, Logger: logger})
			if err != nil {
				return nil, err
			}
			bc, err := batch.New(batch.Config{Client: ddb, Table: cfg.Table, Layout: cfg.TableLayout, Outbox: ob, Logger: logger})
			if err != nil {
				return nil, err
			}
			if store, err = bc.WrapStore(inner); err != nil {
				return nil, err
			}
		}
		mcfg := idempotency.MiddlewareConfig{
			Store: store, Logger: logger, OnFinishError: m.FinishError, ExpectRecords: cfg.ExpectRecords,
		}
		if objects != nil {
			mcfg.Cursors = objects // long jobs' cursors above 16 KiB (docs/LONG-JOBS.md)
		}
		idem, err := idempotency.NewMiddleware(mcfg)
		if err != nil {
			return nil, err
		}
		wcfg.Middleware = append(wcfg.Middleware, idem)
	}
	if set := cfg.Queues.Set; set != nil {
		// Several queues: each kind's queue is its registration's (jobs.WithQueue), else
		// SQSWORKER_ROUTES'; a job that arrives elsewhere runs, and is counted.
		routes := queues.Chain{reg, cfg.Queues.Routes}
		if err := set.CheckRoutes(routes); err != nil {
			return nil, fmt.Errorf("%s: %w", config.EnvQueues, err)
		}
		wcfg.Routing = set.Routing(routes)
	}
	ot, err := otelsetup.New(ctx, getenv)
	if err != nil {
		return nil, err
	}
	if ot != nil {
		wcfg.Observer = ot.Tracing.Worker()
	}
	h, err := worker.New(wcfg)
	if err != nil {
		return nil, err
	}
	preflight := []string{cfg.QueueURL}
	if cfg.Queues.Set != nil {
		preflight = nil
		for _, q := range cfg.Queues.Set.All() {
			preflight = append(preflight, q.URL)
		}
	}
	if preflight[0] != "" {
		// Warn when a kind's MaxAttempts is close to a queue's maxReceiveCount. In the
		// background, so the check does not lengthen the cold start; a failure to read the
		// policy is logged, not fatal.
		go func() {
			pctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			for _, u := range preflight {
				if _, err := h.Preflight(pctx, u); err != nil {
					logger.Warn("sqsworker: could not check the queue's redrive policy", slog.String("queue_url", u), slog.String("error", err.Error()))
				}
			}
		}()
	}
	logger.Info("sqsworker worker ready",
		slog.String("queue_url", cfg.QueueURL), slog.String("dlq_url", cfg.DLQURL), slog.String("table", cfg.Table),
		slog.Int("concurrency", cfg.Concurrency), slog.Duration("deadline_margin", cfg.DeadlineMargin),
		slog.String("schedule_group", cfg.ScheduleGroup), slog.Bool("idempotency", cfg.Table != ""),
		slog.String("payload_bucket", cfg.PayloadBucket), slog.String("payload_cleanup", cfg.PayloadCleanup.String()),
		slog.Bool("tracing", ot != nil), slog.Int("queues", max(1, cfg.Queues.Set.Len())),
		slog.Duration("slice", long.Slice), slog.Bool("sleep_scheduler", long.Scheduler()))
	return &invoker{h: h, ot: ot}, nil
}

// invoker passes each invocation to the worker, with the event's source ARN in its context so
// that the metrics name the queue, inside an invocation span when tracing is on.
type invoker struct {
	h  *worker.Handler
	ot *otelsetup.Setup // nil: tracing is off
}

// Invoke implements lambda.Handler.
func (i *invoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if arn := sourceARN(payload); arn != "" {
		ctx = context.WithValue(ctx, sourceARNKey{}, arn)
	}
	if i.ot != nil {
		return i.ot.Invoke(ctx, "pubsub", func(ctx context.Context) ([]byte, error) { return i.h.Invoke(ctx, payload) })
	}
	return i.h.Invoke(ctx, payload)
}
