// Command container runs sqsworker as a long-running process instead of a Lambda function: on
// ECS/Fargate, Kubernetes, a VM or a laptop. It polls the job queue with the semantics of
// Lambda's SQS event source mapping (pkg/poller), hands every batch to the same worker handler
// the Lambda function uses (pkg/worker), and adds what a container needs: a heartbeat that
// keeps jobs longer than Lambda's 15 minutes invisible to other consumers, and a graceful
// shutdown on SIGTERM (receiving stops at once, the batches in flight finish and are settled).
//
// It is configured by environment variables (see docs/CONTAINERS.md):
//
//	SQSWORKER_QUEUE_URL        the job queue's URL (required)
//	SQSWORKER_DLQ_URL          the dead-letter queue's URL (default: the queue's redrive target)
//	SQSWORKER_TABLE            the DynamoDB job table: turns on idempotency and job status
//	SQSWORKER_SCHEDULE_GROUP   run the local schedule dispatcher for this schedule group
//	                           (only on emulators, which store schedules but never fire them)
//	SQSWORKER_CONCURRENCY      batches handled at the same time (default 1)
//	SQSWORKER_BATCH_SIZE       messages per batch, 1-10 (default 10)
//	SQSWORKER_JOB_TIMEOUT      deadline of one batch, a Go duration such as 2h (default: none)
//	SQSWORKER_WAIT_TIME        long-poll duration, 1s-20s (default 20s)
//	AWS_ENDPOINT_URL           an emulator or LocalStack (default: AWS itself)
//	AWS_REGION, AWS_PROFILE, … the SDK's usual configuration and credential chain
//
// The jobs are the demo's kinds (examples/examplejobs); a real service registers its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/examples/examplejobs"
	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

func main() {
	// SIGTERM is what ECS, Kubernetes and docker stop send; SIGINT is Ctrl-C.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{ReplaceAttr: durationText}))
	if err := run(ctx, os.Getenv, logger); err != nil {
		logger.Error("sqsworker container stopped", "err", err)
		stop()
		os.Exit(1)
	}
}

// settings is the configuration read from the environment.
type settings struct {
	queueURL, dlqURL, table, scheduleGroup, endpoint string
	concurrency, batchSize                           int
	jobTimeout, waitTime                             time.Duration
}

// readSettings reads and checks the environment; every problem is reported at once.
func readSettings(getenv func(string) string) (settings, error) {
	s := settings{
		queueURL:      strings.TrimSpace(getenv("SQSWORKER_QUEUE_URL")),
		dlqURL:        strings.TrimSpace(getenv("SQSWORKER_DLQ_URL")),
		table:         strings.TrimSpace(getenv("SQSWORKER_TABLE")),
		scheduleGroup: strings.TrimSpace(getenv("SQSWORKER_SCHEDULE_GROUP")),
		endpoint:      strings.TrimSpace(getenv("AWS_ENDPOINT_URL")),
		concurrency:   1,
		batchSize:     10,
		waitTime:      20 * time.Second,
	}
	var errs []error
	if s.queueURL == "" {
		errs = append(errs, errors.New("SQSWORKER_QUEUE_URL is required (the job queue's URL)"))
	}
	if s.endpoint != "" {
		if u, err := url.Parse(s.endpoint); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("AWS_ENDPOINT_URL %q is not a URL (want one such as http://localhost:4566)", s.endpoint))
		}
	}
	intVar := func(name string, dst *int, lo, hi int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				errs = append(errs, fmt.Errorf("%s=%q: want a whole number from %d to %d", name, v, lo, hi))
				return
			}
			*dst = n
		}
	}
	durVar := func(name string, dst *time.Duration, lo, hi time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < lo || d > hi {
				errs = append(errs, fmt.Errorf("%s=%q: want a duration from %s to %s, such as 30s or 2h", name, v, lo, hi))
				return
			}
			*dst = d
		}
	}
	intVar("SQSWORKER_CONCURRENCY", &s.concurrency, 1, poller.MaxConcurrency)
	intVar("SQSWORKER_BATCH_SIZE", &s.batchSize, 1, 10)
	durVar("SQSWORKER_JOB_TIMEOUT", &s.jobTimeout, time.Second, poller.MaxVisibilityTimeout)
	durVar("SQSWORKER_WAIT_TIME", &s.waitTime, time.Second, poller.MaxWaitTime)
	return s, errors.Join(errs...)
}

// run runs the poller (and the schedule dispatcher, when asked for) until ctx is cancelled,
// then waits for the batches in flight and returns nil. It returns an error for a bad
// configuration, or when the poller cannot start (an unknown queue, no credentials).
func run(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	s, err := readSettings(getenv)
	if err != nil {
		return err
	}
	// An idle pool for what runs at once: the poller's slots, each with the worker's jobs (the
	// SDK keeps 10 per host, and every call beyond them dials a new connection).
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(poller.HTTPClient(poller.IdleConnsPerHost(s.concurrency, worker.DefaultConcurrency))),
	}
	if r := getenv("AWS_REGION"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	local := s.endpoint != "" && !awsendpoint.IsAWS(s.endpoint)
	if local {
		// An emulator's credentials are never in the instance metadata: do not ask it (off EC2
		// that costs a timeout, or a warning where something answers).
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("load the AWS configuration: %w", err)
	}
	if s.endpoint != "" {
		cfg.BaseEndpoint = aws.String(s.endpoint)
		if cfg.Region == "" {
			cfg.Region = "us-east-1"
		}
		if local {
			// Emulators accept any credentials: fall back to test ones when the chain has none.
			if cfg.Credentials == nil {
				cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
			} else if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
				cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
			}
		}
	}
	sqsClient := sqs.NewFromConfig(cfg)

	reg := jobs.NewRegistry()
	if err := examplejobs.Register(reg, jobs.Exponential{Base: time.Second, Cap: 5 * time.Minute}, examplejobs.NewSideEffects()); err != nil {
		return err
	}
	wcfg := worker.Config{Registry: reg, SQS: sqsClient, QueueURL: s.queueURL, DLQURL: s.dlqURL, Logger: logger}
	var paused func(context.Context) bool
	if s.table != "" {
		// Emulators send no DynamoDB CRC32 header: skip its check there, keep it on AWS.
		ddb := dynamodb.NewFromConfig(cfg, awsendpoint.DynamoDB(cfg))
		// Flow control first (pauses; declare limits here: docs/FLOW.md), and the queue's pause
		// for the poller (`sqsworker pause --queue`).
		ft, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: s.table})
		if err != nil {
			return err
		}
		fl, err := flow.NewMiddleware(flow.Config{Store: ft, Logger: logger})
		if err != nil {
			return err
		}
		wcfg.Middleware = append(wcfg.Middleware, fl)
		paused = flow.QueueGate(ft, queueName(s.queueURL), 0)
		store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: s.table})
		if err != nil {
			return err
		}
		mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store, Logger: logger})
		if err != nil {
			return err
		}
		wcfg.Middleware = append(wcfg.Middleware, mw)
	}
	handler, err := worker.New(wcfg)
	if err != nil {
		return err
	}
	p, err := poller.New(poller.Config{
		SQS: sqsClient, QueueURL: s.queueURL, Handler: handler,
		BatchSize: s.batchSize, Concurrency: s.concurrency, WaitTime: s.waitTime,
		InvocationTimeout: s.jobTimeout, Logger: logger, Paused: paused,
	})
	if err != nil {
		return err
	}

	// The dispatcher stops when the poller does (or with ctx), so that run returns once both are done.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	dispatched := make(chan error, 1)
	if s.scheduleGroup != "" {
		d, err := schedule.NewDispatcher(schedule.DispatcherConfig{Scheduler: scheduler.NewFromConfig(cfg), SQS: sqsClient,
			Group: s.scheduleGroup, Logger: logger})
		if err != nil {
			return err
		}
		go func() { dispatched <- d.Run(runCtx) }()
	} else {
		dispatched <- nil
	}
	logger.Info("sqsworker container started", "queue", s.queueURL, "table", s.table,
		"schedule_group", s.scheduleGroup, "concurrency", s.concurrency, "batch_size", s.batchSize)
	err = p.Run(runCtx)
	cancel()
	if derr := <-dispatched; derr != nil && !errors.Is(derr, context.Canceled) && err == nil {
		err = fmt.Errorf("schedule dispatcher: %w", derr)
	}
	if err != nil {
		return err
	}
	logger.Info("sqsworker container stopped: the batches in flight are settled")
	return nil
}

// durationText writes durations as text ("2.1s"), where slog's JSON handler writes nanoseconds:
// log lines are read by people first.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// queueName returns the queue name a queue URL ends with.
func queueName(queueURL string) string {
	return queueURL[strings.LastIndexByte(queueURL, '/')+1:]
}
