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
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/cmd/sqsworker/internal/lambdarun"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/queues"
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
	queues              []string // --queue
	priority            string   // --priority
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
--bootstrap PATH runs an already built executable. The function gets the stack's settings as
the deployed stack gives them: SQSWORKER_QUEUE_URL, SQSWORKER_DLQ_URL, SQSWORKER_TABLE,
SQSWORKER_SCHEDULE_GROUP and, when the stack has a payload bucket, SQSWORKER_PAYLOAD_BUCKET;
with AWS_ENDPOINT_URL, AWS_REGION and credentials. The rest of its environment is run's own:
set SQSWORKER_LOG_LEVEL=debug (or any other setting of docs/FUNCTIONS.md) before run.

Each --queue NAME adds a queue beside the default one (as up does; docs/QUEUES.md): the
function then gets SQSWORKER_QUEUES instead of the two queue URLs, and one poller serves
every queue of the stack, choosing the queue of each batch by --priority: weighted (each
queue's share of the batches is its weight's, while it has jobs) or strict (a queue is
served only when the ones before it are empty). With an endpoint, run serves every queue
the stack has (up --queue), --queue giving weights.

Without an endpoint it starts the embedded emulator on localhost:--port (4566 by default,
so that AWS_ENDPOINT_URL=http://localhost:4566 reaches it from other terminals), provisions
the stack there (as up --payloads does: the payload bucket <stack>-payloads or
--payload-bucket too; FIFO queues with --fifo) and serves it while it runs; its state ends
with the command. With an endpoint, the stack must exist there (a FIFO stack is found by its
queue's name; its payload bucket is --payload-bucket, else <stack>-payloads when it exists).
One line per batch goes to stderr, with the function's output. Ctrl-C (or SIGTERM, or a
closed terminal) finishes the batches in flight, stops the function's processes, removes the
build and says "stopped" on stderr, whether stdout is a terminal, a file or a closed pipe.`,
		Example: `  sqsworker run --stack myapp --function ./functions/worker
  sqsworker run --stack myapp --function ./functions/worker --fifo --port 4567
  sqsworker run --stack myapp --bootstrap ./bootstrap --concurrency 4 --endpoint http://localhost:4566
  sqsworker run --stack myapp --function ./functions/worker --queue critical:weight=6 --queue bulk   # three queues, weighted`,
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
	f.StringArrayVar(&o.queues, "queue", nil, queueFlagHelp+"; with an endpoint, the weight of an existing queue")
	f.StringVar(&o.priority, "priority", "weighted", "how the poller chooses among several queues: weighted (by --queue weight=N, no starvation) or strict (in --queue order, the default queue first unless named)")
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
	specs, err := parseQueueSpecs(o.queues)
	if err != nil {
		return err
	}
	priority, err := poller.ParsePriority(o.priority)
	if err != nil {
		return &usageError{fmt.Errorf("--priority %q: want weighted or strict", o.priority)}
	}
	stderr = &lockedWriter{w: stderr}
	keepRunningOnBrokenPipe()
	// Everything run started is stopped and removed before it says "stopped": the function's
	// processes, the emulator, the build's directory.
	served, err := serveFunction(ctx, g, o, cmd, stack, specs, priority, stdout, stderr)
	if err != nil {
		return err
	}
	if served {
		fmt.Fprintln(stderr, "stopped")
	}
	return nil
}

// serveFunction is run's work between the checks of its command line and its last line: it
// returns (true, nil) once it has served until ctx was done and has stopped everything it
// started. Every process it starts is in a process group of its own (a Ctrl-C at the terminal
// reaches only run, which stops them), and is stopped and reaped before it returns, whatever
// stdout and stderr are.
func serveFunction(ctx context.Context, g *globals, o *runOptions, cmd *cobra.Command, stack string, specs []queues.Spec, priority poller.Priority, stdout, stderr io.Writer) (bool, error) {
	bootstrap := o.bootstrap
	if bootstrap != "" {
		if fi, err := os.Stat(bootstrap); err != nil {
			return false, fmt.Errorf("--bootstrap: %w", err)
		} else if fi.IsDir() {
			return false, fmt.Errorf("--bootstrap %s is a directory; pass the executable, or the package with --function", bootstrap)
		}
	}
	// The backend before the build: a taken port or a bad endpoint fails at once.
	b, err := startLocal(ctx, cmd, g, o.port)
	if err != nil {
		return false, err
	}
	defer b.Close()
	if o.function != "" {
		dir, err := os.MkdirTemp("", "sqsworker-run-")
		if err != nil {
			return false, err
		}
		defer os.RemoveAll(dir)
		if bootstrap, err = buildFunction(ctx, o.function, dir); err != nil {
			return false, err
		}
	}
	if abs, err := filepath.Abs(bootstrap); err == nil {
		bootstrap = abs
	}
	rie, err := lambdarun.FindRIE(ctx)
	if err != nil {
		return false, err
	}

	sqsClient := sqs.NewFromConfig(b.Config)
	schedClient := scheduler.NewFromConfig(b.Config)
	c := &awsClients{where: b.URL, local: !awslocal.IsAWSEndpoint(b.URL), sqs: sqsClient, ddb: b.DynamoDB(), s3: b.S3()}
	st := runStack{ScheduleGroup: awslocal.ScheduleGroupName(stack)}
	if b.Kind != awslocal.Endpoint {
		if st, err = provisionRunStack(ctx, b, g, stack, o.fifo, specs); err != nil {
			return false, err
		}
	} else {
		if st.QueueURL, st.DLQURL, st.Table, st.QueueARN, err = resolveRunStack(ctx, c, stack, o.fifo); err != nil {
			return false, err
		}
		ps, err := payloadStore(ctx, c, g, stack)
		if err != nil {
			return false, err
		}
		if ps != nil {
			st.PayloadBucket = ps.Bucket()
		}
		if st.Queues, err = runQueueSet(ctx, c, stack, specs); err != nil {
			return false, err
		}
	}
	fmt.Fprintf(stdout, "endpoint  %s (%s)\n", b.URL, b.Kind)
	fmt.Fprintf(stdout, "queue     %s\n", st.QueueURL)
	fmt.Fprintf(stdout, "dlq       %s\n", st.DLQURL)
	for _, q := range st.Queues.All() {
		if q.Name != queues.DefaultName {
			fmt.Fprintf(stdout, "queue     %s: %s (weight %d)\n", q.Name, q.URL, q.Weight)
		}
	}
	fmt.Fprintf(stdout, "table     %s\n", st.Table)
	if st.PayloadBucket != "" {
		fmt.Fprintf(stdout, "payloads  %s (S3 bucket)\n", st.PayloadBucket)
	}
	relay, err := runOutboxRelay(ctx, b, stack, st.QueueURL, st.QueueARN, sqsClient, schedClient, stdout, stderr, st.Queues)
	if err != nil {
		return false, err
	}
	if b.Kind == awslocal.Embedded {
		fmt.Fprintf(stdout, "\nserving the embedded emulator at %s until Ctrl-C (its state ends with it). In another terminal:\n"+
			"  export AWS_ENDPOINT_URL=%s\n  sqsworker enqueue email.send '{\"to\":\"ada@example.com\"}' --stack %s\n\n", b.URL, b.URL, stack)
	}

	creds, err := b.Config.Credentials.Retrieve(ctx)
	if err != nil {
		return false, fmt.Errorf("AWS credentials for the function: %w", err)
	}
	if relay != nil && st.Table != "" {
		// Batches and chains: the worker counts children in the job table and enqueues
		// callbacks and next steps through the outbox, which the relay above sends.
		st.BatchesOutboxTable = awslocal.OutboxTableName(stack)
	}
	pool, err := lambdarun.Start(ctx, lambdarun.Function{
		Bootstrap: bootstrap, Env: functionEnv(st, b.URL, b.Config.Region, creds, stack), RIE: rie, Timeout: o.timeout,
		Output: &reportFilter{w: stderr},
	}, o.concurrency)
	if err != nil {
		return false, err
	}
	defer pool.Close()

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pcfg := poller.Config{
		SQS: sqsClient, QueueURL: st.QueueURL, Handler: &batchPrinter{h: pool, w: stderr},
		BatchSize: o.batchSize, BatchWindow: o.window, Concurrency: o.concurrency,
		InvocationTimeout: o.timeout, Logger: logger, Paused: queueGate(b.DynamoDB(), st.Table, st.QueueURL),
	}
	if st.Queues.Len() > 1 { // one poller over the stack's queues, by priority; each queue's pause its own
		pcfg.QueueURL, pcfg.Priority, pcfg.Paused = "", priority, nil
		for _, q := range st.Queues.All() {
			pcfg.Queues = append(pcfg.Queues, poller.Queue{URL: q.URL, Weight: q.Weight, Paused: queueGate(b.DynamoDB(), st.Table, q.URL)})
		}
	}
	p, err := poller.New(pcfg)
	if err != nil {
		return false, &usageError{err}
	}
	d, err := schedule.NewDispatcher(schedule.DispatcherConfig{
		Scheduler: schedClient, SQS: sqsClient, Group: st.ScheduleGroup, Logger: logger,
	})
	if err != nil {
		return false, err
	}
	if o.ui && st.PayloadBucket != "" { // the console resolves large jobs' dead letters, as the dlq commands do
		if o.uiOpts.payloads, err = payload.New(payload.Config{S3: b.S3(), Bucket: st.PayloadBucket}); err != nil {
			return false, err
		}
	}
	stopUI, err := startRunUI(ctx, o, &awsClients{where: b.URL, local: !awslocal.IsAWSEndpoint(b.URL), sqs: sqsClient, ddb: b.DynamoDB()},
		stack, o.fifo, st.QueueURL, st.DLQURL, st.Table, stdout, stderr)
	if err != nil {
		return false, err
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
	return err == nil, err
}

// runStack is the stack run serves: its resources and the settings they make for the function.
type runStack struct {
	QueueURL, DLQURL, QueueARN string
	Table                      string
	ScheduleGroup              string
	// PayloadBucket is the bucket of jobs larger than SQS allows ("" when the stack has none).
	PayloadBucket string
	// Queues is the stack's queue set, reachable at the endpoint (the default queue alone, or
	// the queues --queue names besides it).
	Queues *queues.Set
	// BatchesOutboxTable is the outbox table through which the worker enqueues the callbacks of
	// batches and the next steps of chains ("" when the stack has no outbox relay running).
	BatchesOutboxTable string
}

// provisionRunStack provisions the stack on run's own emulator, as `up --payloads` does (FIFO
// queues with fifo): the queues, the job table, the schedule group, the outbox table and the
// payload bucket (--payload-bucket, or <stack>-payloads).
func provisionRunStack(ctx context.Context, b *awslocal.Backend, g *globals, stack string, fifo bool, specs []queues.Spec) (runStack, error) {
	st := runStack{ScheduleGroup: awslocal.ScheduleGroupName(stack)}
	provisioned, stacks, err := awslocal.ProvisionQueues(ctx, sqs.NewFromConfig(b.Config), awslocal.StackOptions{Name: stack, FIFO: fifo}, specs...)
	if err != nil {
		return st, err
	}
	for _, q := range stacks {
		if q.Queue == queues.DefaultName {
			st.QueueURL, st.DLQURL, st.QueueARN = b.QueueURL(q.QueueURL), b.QueueURL(q.DLQURL), q.QueueARN
		}
	}
	qs := provisioned.All()
	for i := range qs { // reachable at the endpoint, from this process and the function's
		qs[i].URL, qs[i].DLQURL = b.QueueURL(qs[i].URL), b.QueueURL(qs[i].DLQURL)
	}
	if st.Queues, err = queues.New(qs...); err != nil {
		return st, err
	}
	if st.Table, err = awslocal.ProvisionTable(ctx, b.DynamoDB(), stack); err != nil {
		return st, err
	}
	if st.ScheduleGroup, err = awslocal.ProvisionScheduleGroup(ctx, scheduler.NewFromConfig(b.Config), stack); err != nil {
		return st, err
	}
	if _, err = dynamooutbox.CreateTable(ctx, b.DynamoDB(), awslocal.OutboxTableName(stack)); err != nil {
		return st, err
	}
	st.PayloadBucket, err = provisionPayloadBucket(ctx, b, g, stack)
	return st, err
}

// provisionPayloadBucket creates the stack's payload bucket: --payload-bucket, or
// <stack>-payloads. A bucket that exists already is fine.
func provisionPayloadBucket(ctx context.Context, b *awslocal.Backend, g *globals, stack string) (string, error) {
	if g.payloadBucket == "" {
		return awslocal.ProvisionBucket(ctx, b.S3(), stack)
	}
	_, err := b.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(g.payloadBucket)})
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return "", fmt.Errorf("create bucket %s: %w", g.payloadBucket, err)
	}
	return g.payloadBucket, nil
}

// The worker's settings (functions/internal/config, docs/FUNCTIONS.md) as run gives them.
var (
	// runStackEnv are set from the stack, as the CDK stack sets them on the deployed worker
	// (infra/jobqueue: worker.go, payload.go); run's values win over its own environment's.
	runStackEnv = []string{
		"SQSWORKER_QUEUE_URL", "SQSWORKER_DLQ_URL", "SQSWORKER_TABLE",
		"SQSWORKER_SCHEDULE_GROUP",
		"SQSWORKER_PAYLOAD_BUCKET",       // when the stack has a payload bucket
		"SQSWORKER_QUEUES",               // when the stack has several queues (--queue)
		"SQSWORKER_BATCHES_OUTBOX_TABLE", // when the outbox relay runs: batches and chains
	}
	// runShellEnv keep the worker's defaults unless run's own environment sets them (the function
	// inherits it), as the CDK stack keeps them unless its props set them: the log level, the
	// concurrency and deadline margin, the table layout (the tables up and run create are by-id,
	// the default), SQSWORKER_EXPECT_RECORDS (the stack sets it with the HTTP API, which a local
	// stack has not) and the payload cleanup (the stack's "mark" needs the expiry rule of its
	// bucket; a local bucket has none, so "delete", the default, keeps it empty).
	runShellEnv = []string{
		"SQSWORKER_LOG_LEVEL", "SQSWORKER_CONCURRENCY", "SQSWORKER_DEADLINE_MARGIN",
		"SQSWORKER_TABLE_LAYOUT", "SQSWORKER_EXPECT_RECORDS", "SQSWORKER_PAYLOAD_CLEANUP",
		// The kinds' queues are the function's own (jobs.WithQueue in its registry): routes set
		// here only say which arrivals the worker counts as misrouted.
		"SQSWORKER_ROUTES",
	}
)

// functionEnv is the environment run adds to the function's (which is run's own): the stack's
// settings (runStackEnv), the endpoint, the region, the credentials and the function's name.
func functionEnv(st runStack, endpoint, region string, creds aws.Credentials, stack string) []string {
	env := []string{
		"SQSWORKER_QUEUE_URL=" + st.QueueURL,
		"SQSWORKER_DLQ_URL=" + st.DLQURL,
		"SQSWORKER_TABLE=" + st.Table,
		"SQSWORKER_SCHEDULE_GROUP=" + st.ScheduleGroup,
	}
	if st.Queues.Len() > 1 {
		// Several queues: the worker serves them all, each batch's queue from its event source
		// (SQSWORKER_QUEUE_URL would pin every batch to the default queue).
		env[0], env[1] = "SQSWORKER_QUEUE_URL=", "SQSWORKER_DLQ_URL="
		env = append(env, "SQSWORKER_QUEUES="+st.Queues.String())
	}
	if st.PayloadBucket != "" {
		env = append(env, "SQSWORKER_PAYLOAD_BUCKET="+st.PayloadBucket)
	}
	if st.BatchesOutboxTable != "" {
		env = append(env, "SQSWORKER_BATCHES_OUTBOX_TABLE="+st.BatchesOutboxTable)
	}
	return append(env,
		"AWS_ENDPOINT_URL="+endpoint,
		"AWS_REGION="+region,
		"AWS_DEFAULT_REGION="+region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"AWS_SESSION_TOKEN="+creds.SessionToken,
		"AWS_LAMBDA_FUNCTION_NAME="+stack+"-worker",
	)
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
	// go build runs the compiler and the linker as its children: in a group of their own, all
	// of them are killed when ctx is done (a Ctrl-C during the build).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("build --function %s: interrupted", dir)
		}
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

// runQueueSet finds the queues of a stack at an endpoint for run: every queue it has, each with
// the weight its --queue flag gives (1 otherwise). A --queue the stack lacks is an error.
func runQueueSet(ctx context.Context, c *awsClients, stack string, specs []queues.Spec) (*queues.Set, error) {
	set, err := stackQueueSet(ctx, c, stack)
	if err != nil {
		return nil, err
	}
	weights := map[string]int{}
	for _, sp := range specs {
		if _, err := set.Get(sp.Name); err != nil {
			return nil, c.missingQueue(ctx, stack, sp.Name)
		}
		weights[sp.Name] = sp.Weight
	}
	qs := set.All()
	for i := range qs {
		if w, ok := weights[qs[i].Name]; ok {
			qs[i].Weight = w
		}
	}
	return queues.New(qs...)
}
