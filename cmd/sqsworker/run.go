package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/cmd/sqsworker/internal/lambdarun"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

type runOptions struct {
	function, bootstrap string
	batchSize           int
	window              time.Duration
	concurrency         int
	timeout             time.Duration
	fifo                bool
	port                int
	ui                  bool
	uiOpts              uiOptions
}

func newRunCmd(g *globals) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a Lambda function locally against a stack's queue",
		Long: `run runs the worker Lambda function on this machine as Lambda would: the function's
bootstrap runs under the AWS Lambda Runtime Interface Emulator (--concurrency instances, one
batch at a time each), fed by the poller with the semantics of an SQS event source mapping
(batch size, batching window, partial batch failures, the function timeout as the invoke
deadline), while the schedule dispatcher fires the stack's schedules and, when the stack has
an outbox table, the outbox relay (our stream poller and the sweeper) sends its jobs.

--function DIR builds the Go main package DIR for this machine (go build -tags lambda.norpc);
--bootstrap PATH runs an already built executable. The function gets SQSWORKER_QUEUE_URL,
SQSWORKER_DLQ_URL, SQSWORKER_TABLE, AWS_ENDPOINT_URL, AWS_REGION and credentials.

Without an endpoint it starts the embedded emulator on localhost:--port (4566 by default,
so that AWS_ENDPOINT_URL=http://localhost:4566 reaches it from other terminals), provisions
the stack there (as up does; FIFO queues with --fifo) and serves it while it runs; its state
ends with the command. With an endpoint, the stack must exist there (a FIFO stack is found
by its queue's name). One line per batch goes to stderr, with the function's output. Ctrl-C
finishes the batches in flight, then stops.`,
		Example: `  sqsworker run --stack myapp --function ./functions/worker
  sqsworker run --stack myapp --function ./functions/worker --fifo --port 4567
  sqsworker run --stack myapp --bootstrap ./bootstrap --concurrency 4 --endpoint http://localhost:4566`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFunction(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.function, "function", "", "directory of the function's Go main package, built for this machine")
	f.StringVar(&o.bootstrap, "bootstrap", "", "path of the function's built executable")
	f.IntVar(&o.batchSize, "batch-size", 10, "most messages per batch")
	f.DurationVar(&o.window, "batching-window", 0, "how long to gather a batch (0: what one receive returns)")
	f.IntVar(&o.concurrency, "concurrency", 1, "function instances, each handling one batch at a time")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "the function timeout: each invoke's deadline")
	f.BoolVar(&o.fifo, "fifo", false, "the stack's queues are FIFO (provisioned so on the embedded emulator; found by name otherwise)")
	addPortFlag(cmd, &o.port)
	addRunUIFlags(cmd, o)
	return cmd
}

func runFunction(cmd *cobra.Command, g *globals, o *runOptions) error {
	ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	stack, err := g.stackName(cmd)
	if err != nil {
		return err
	}
	switch {
	case o.function == "" && o.bootstrap == "":
		return &usageError{errors.New("run needs --function DIR (a Go main package to build) or --bootstrap PATH (a built executable)")}
	case o.function != "" && o.bootstrap != "":
		return &usageError{errors.New("run takes --function or --bootstrap, not both")}
	case o.concurrency < 1 || o.concurrency > 64:
		return &usageError{fmt.Errorf("--concurrency %d: want 1-64", o.concurrency)}
	case o.timeout < time.Second || o.timeout > 15*time.Minute:
		return &usageError{fmt.Errorf("--timeout %v: want 1s-15m (Lambda's limits)", o.timeout)}
	case o.batchSize < 1:
		return &usageError{fmt.Errorf("--batch-size %d: want at least 1", o.batchSize)}
	case o.window < 0:
		return &usageError{fmt.Errorf("--batching-window %v must not be negative", o.window)}
	case o.fifo && o.batchSize > 10:
		return &usageError{fmt.Errorf("--batch-size %d: a FIFO event source takes at most 10", o.batchSize)}
	case o.fifo && o.window > 0:
		return &usageError{fmt.Errorf("--batching-window %v: a FIFO event source has no batching window", o.window)}
	}
	stderr = &lockedWriter{w: stderr}

	bootstrap := o.bootstrap
	if bootstrap != "" {
		if fi, err := os.Stat(bootstrap); err != nil {
			return fmt.Errorf("--bootstrap: %w", err)
		} else if fi.IsDir() {
			return fmt.Errorf("--bootstrap %s is a directory; pass the executable, or the package with --function", bootstrap)
		}
	}
	// The backend before the build: a taken port or a bad endpoint fails at once.
	b, err := startLocal(ctx, cmd, g, o.port)
	if err != nil {
		return err
	}
	defer b.Close()
	if o.function != "" {
		dir, err := os.MkdirTemp("", "sqsworker-run-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bootstrap, err = buildFunction(ctx, o.function, dir); err != nil {
			return err
		}
	}
	if abs, err := filepath.Abs(bootstrap); err == nil {
		bootstrap = abs
	}
	rie, err := lambdarun.FindRIE(ctx)
	if err != nil {
		return err
	}

	sqsClient := sqs.NewFromConfig(b.Config)
	schedClient := scheduler.NewFromConfig(b.Config)
	var queueURL, dlqURL, table, queueARN string
	if b.Kind != awslocal.Endpoint {
		st, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: stack, FIFO: o.fifo})
		if err != nil {
			return err
		}
		if table, err = awslocal.ProvisionTable(ctx, b.DynamoDB(), stack); err != nil {
			return err
		}
		if _, err = awslocal.ProvisionScheduleGroup(ctx, schedClient, stack); err != nil {
			return err
		}
		if _, err = dynamooutbox.CreateTable(ctx, b.DynamoDB(), awslocal.OutboxTableName(stack)); err != nil {
			return err
		}
		queueURL, dlqURL, queueARN = b.QueueURL(st.QueueURL), b.QueueURL(st.DLQURL), st.QueueARN
	} else {
		c := &awsClients{where: b.URL, local: !awslocal.IsAWSEndpoint(b.URL), sqs: sqsClient, ddb: b.DynamoDB()}
		if queueURL, dlqURL, table, queueARN, err = resolveRunStack(ctx, c, stack, o.fifo); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "endpoint  %s (%s)\n", b.URL, b.Kind)
	fmt.Fprintf(stdout, "queue     %s\n", queueURL)
	fmt.Fprintf(stdout, "dlq       %s\n", dlqURL)
	fmt.Fprintf(stdout, "table     %s\n", table)
	relay, err := runOutboxRelay(ctx, b, stack, queueURL, queueARN, sqsClient, schedClient, stdout, stderr)
	if err != nil {
		return err
	}
	if b.Kind == awslocal.Embedded {
		fmt.Fprintf(stdout, "\nserving the embedded emulator at %s until Ctrl-C (its state ends with it). In another terminal:\n"+
			"  export AWS_ENDPOINT_URL=%s\n  sqsworker enqueue email.send '{\"to\":\"ada@example.com\"}' --stack %s\n\n", b.URL, b.URL, stack)
	}

	creds, err := b.Config.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials for the function: %w", err)
	}
	env := []string{
		"SQSWORKER_QUEUE_URL=" + queueURL,
		"SQSWORKER_DLQ_URL=" + dlqURL,
		"SQSWORKER_TABLE=" + table,
		"AWS_ENDPOINT_URL=" + b.URL,
		"AWS_REGION=" + b.Config.Region,
		"AWS_DEFAULT_REGION=" + b.Config.Region,
		"AWS_ACCESS_KEY_ID=" + creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + creds.SecretAccessKey,
		"AWS_SESSION_TOKEN=" + creds.SessionToken,
		"AWS_LAMBDA_FUNCTION_NAME=" + stack + "-worker",
	}
	pool, err := lambdarun.Start(ctx, lambdarun.Function{
		Bootstrap: bootstrap, Env: env, RIE: rie, Timeout: o.timeout,
		Output: &reportFilter{w: stderr},
	}, o.concurrency)
	if err != nil {
		return err
	}
	defer pool.Close()

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := poller.New(poller.Config{
		SQS: sqsClient, QueueURL: queueURL, Handler: &batchPrinter{h: pool, w: stderr},
		BatchSize: o.batchSize, BatchWindow: o.window, Concurrency: o.concurrency,
		InvocationTimeout: o.timeout, Logger: logger, Paused: queueGate(b.DynamoDB(), table, queueURL),
	})
	if err != nil {
		return &usageError{err}
	}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{
		Scheduler: schedClient, SQS: sqsClient, Group: awslocal.ScheduleGroupName(stack), Logger: logger,
	})
	if err != nil {
		return err
	}
	stopUI, err := startRunUI(ctx, o, &awsClients{where: b.URL, local: !awslocal.IsAWSEndpoint(b.URL), sqs: sqsClient, ddb: b.DynamoDB()},
		stack, o.fifo, queueURL, dlqURL, table, stdout, stderr)
	if err != nil {
		return err
	}
	defer stopUI()
	fmt.Fprintf(stderr, "running %s: %d instance(s), batches of up to %d, timeout %v; Ctrl-C to stop\n",
		filepath.Base(bootstrap), o.concurrency, o.batchSize, o.timeout)

	dctx, stopDispatcher := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(dctx) })
	if relay != nil {
		wg.Go(func() { _ = relay.Run(dctx) })
	}
	err = p.Run(ctx) // returns once ctx is done and the batches in flight are settled
	stopDispatcher()
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "stopped")
	return nil
}

// resolveRunStack finds the stack at an endpoint for run: its queue, DLQ and job table, and the
// queue's ARN (one GetQueueAttributes call), without which the outbox relay could not deliver
// delays through the stack's schedule group.
func resolveRunStack(ctx context.Context, c *awsClients, stack string, fifo bool) (queueURL, dlqURL, table, queueARN string, err error) {
	refs, err := resolveStack(ctx, c, stack, fifo, needQueue|needDLQ|needTable)
	if err != nil {
		return "", "", "", "", err
	}
	attrs, err := queueAttributes(ctx, c.sqs, refs.QueueURL, sqstypes.QueueAttributeNameQueueArn)
	if err != nil {
		return "", "", "", "", fmt.Errorf("read the attributes of queue %s: %w", refs.QueueName, err)
	}
	if queueARN = attrs[string(sqstypes.QueueAttributeNameQueueArn)]; queueARN == "" {
		return "", "", "", "", fmt.Errorf("queue %s on %s has no QueueArn attribute", refs.QueueName, c.where)
	}
	return refs.QueueURL, refs.DLQURL, refs.Table, queueARN, nil
}

// buildFunction builds the main package dir into out/bootstrap for this machine.
func buildFunction(ctx context.Context, dir, out string) (string, error) {
	pkg := dir
	if !filepath.IsAbs(pkg) && !strings.HasPrefix(pkg, ".") {
		pkg = "." + string(filepath.Separator) + pkg // a directory, not an import path
	}
	bin := filepath.Join(out, "bootstrap")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", bin, pkg)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build --function %s: %v\n%s", dir, err, strings.TrimSpace(output.String()))
	}
	return bin, nil
}

// batchPrinter prints one line per batch.
type batchPrinter struct {
	h poller.Handler
	w io.Writer
}

func (b *batchPrinter) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	start := time.Now()
	resp, err := b.h.HandleSQS(ctx, ev)
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		fmt.Fprintf(b.w, "batch size=%d failures=%d took=%v error=%q\n", len(ev.Records), len(ev.Records), took, err.Error())
	} else {
		fmt.Fprintf(b.w, "batch size=%d failures=%d took=%v\n", len(ev.Records), len(resp.BatchItemFailures), took)
	}
	return resp, err
}

// lockedWriter serialises writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// reportFilter drops the RIE's START/END/REPORT lines, one per invoke, and passes the rest on
// by whole lines.
type reportFilter struct {
	w   io.Writer
	buf []byte
}

func (f *reportFilter) Write(b []byte) (int, error) {
	f.buf = append(f.buf, b...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		line := f.buf[:i+1]
		if !bytes.HasPrefix(line, []byte("START RequestId:")) && !bytes.HasPrefix(line, []byte("END RequestId:")) &&
			!bytes.HasPrefix(line, []byte("REPORT RequestId:")) {
			if _, err := f.w.Write(line); err != nil {
				return len(b), err
			}
		}
		f.buf = f.buf[i+1:]
	}
	return len(b), nil
}
