package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sqsworker/sqsworker/cmd/sqsworker/internal/demo"
	"github.com/sqsworker/sqsworker/internal/logattr"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// uiTokenEnv names the environment variable that gives --token its default.
const uiTokenEnv = "SQSWORKER_UI_TOKEN"

// signInLinkFor is how long the one-time sign-in link `ui` prints works, unused.
const signInLinkFor = time.Hour

// uiOptions are the console's flags, shared by ui, demo --ui and run --ui.
type uiOptions struct {
	addr     string
	readOnly bool
	token    string
	showArgs bool
	secure   bool
	role     string
	// hosts are the Host names the console answers (set by serveUI for a loopback address).
	hosts []string
	// payloads is the stack's payload store (set by the command that resolved the stack, nil
	// without a payload bucket), so that the console lists, shows and redrives the dead letters
	// of large jobs, kept in S3, by their job id as the dlq commands do.
	payloads *payload.Store
	// routes are the kinds' queues for the console's producer ("kind=queue,…", the stack's
	// SQSWORKER_ROUTES; ui's --routes): a job enqueued from the console goes to its kind's queue.
	routes string
	// flagPrefix is the prefix of the console's flags on this command ("ui-" for demo and run),
	// so that what the console prints names flags that exist.
	flagPrefix string
}

// addUIFlags adds the console's flags; prefix names them for the commands where the console
// is an option (run --ui-addr).
func addUIFlags(f *pflag.FlagSet, o *uiOptions, prefix string) {
	o.flagPrefix = prefix
	f.StringVar(&o.addr, prefix+"addr", "127.0.0.1:8080", "the address the console listens on (keep it on 127.0.0.1 unless it sits behind your own authentication)")
	f.BoolVar(&o.readOnly, prefix+"read-only", false, "hide and refuse every action (redrive, cancel, purge, enqueue, schedules)")
	f.StringVar(&o.token, prefix+"token", "", "the token actions need (default: $"+uiTokenEnv+", else a random one, printed)")
	f.BoolVar(&o.showArgs, prefix+"show-args", false, "show job args and message bodies (hidden by default, as the worker's logs hide them)")
	f.BoolVar(&o.secure, prefix+"secure-cookie", false, "mark the sign-in cookie Secure (HTTPS only): set it when a proxy serves the console over HTTPS")
}

func newUICmd(g *globals) *cobra.Command {
	o := &uiOptions{}
	var fifo bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the operator web console of a stack",
		Long: `ui serves the operator console (pkg/console) of the stack on --addr: the queues' depths and
per-kind charts, the jobs by state, each job's record, envelope and dead letter, the dead
letters (redrive one or all, purge), the schedules and an enqueue form. It uses the same
library calls as the other commands, on the same resources: <stack>-jobs, <stack>-jobs-dlq,
the table <stack>-jobs and the schedule group <stack>-jobs, on AWS with the usual credential
chain, or on an emulator with --endpoint.

Reading needs nothing, but for the pages that peek at the DLQ (a peek is a receive: it raises
each message's receive count and hides it while it runs): they need the token, as actions do.
The token is --token, else $` + uiTokenEnv + `, else a random one printed at start, with a
one-time link that signs one browser in (the token itself never goes into a URL, which a
browser keeps in its history). --read-only hides and refuses every action (and has no sign-in: the
DLQ pages are then open to whoever reaches the console). Cross-site requests for the DLQ pages
are refused. Each action writes one JSON log line on stderr (who, what, which job). Behind a
proxy that serves the console over HTTPS, add --secure-cookie.

The charts come from the worker's CloudWatch metrics on AWS (cloudwatch:GetMetricData and
ListMetrics, read at most once a minute whatever the number of open tabs: about $0.60 a day
with 10 kinds while an overview stays open, see docs/CONSOLE.md), and from the job table on an
emulator.`,
		Example: `  sqsworker ui --stack myapp                                   # on AWS, http://127.0.0.1:8080
  sqsworker ui --stack myapp --endpoint http://localhost:4566  # on the emulator of 'sqsworker up'
  sqsworker ui --stack myapp --read-only --addr 127.0.0.1:9000
  SQSWORKER_UI_TOKEN=$(openssl rand -hex 16) sqsworker ui --stack myapp --show-args`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			if err := o.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := connect(ctx, g)
			if err != nil {
				return err
			}
			refs, err := resolveStack(ctx, c, stack, fifo, needQueue|needDLQ|optTable)
			if err != nil {
				return err
			}
			if o.payloads, err = payloadStore(ctx, c, g, stack); err != nil {
				return err
			}
			return serveUI(ctx, c, refs, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addUIFlags(cmd.Flags(), o, "")
	cmd.Flags().StringVar(&o.role, "scheduler-role", "", "IAM role `ARN` the scheduler assumes for the schedules the console creates (default: $"+schedulerRoleEnv+", else on AWS the CloudFormation stack's output "+stackRoleOutput+")")
	cmd.Flags().BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	cmd.Flags().StringVar(&o.routes, "routes", os.Getenv(routesEnv), "the kinds' queues of a stack of several queues, `kind=queue,…`, so that a job enqueued from the console goes to its kind's queue (default: $"+routesEnv+", the worker's setting; without it, the default queue unless the form names one)")
	return cmd
}

// routesEnv names the environment variable that gives ui's --routes its default, the one the
// stack's functions read.
const routesEnv = "SQSWORKER_ROUTES"

// check validates the flags before any AWS call.
func (o *uiOptions) check() error {
	if _, _, err := net.SplitHostPort(o.addr); err != nil {
		return &usageError{fmt.Errorf("--addr %q: want host:port, such as 127.0.0.1:8080", o.addr)}
	}
	if o.token == "" {
		o.token = os.Getenv(uiTokenEnv)
	}
	if o.readOnly {
		o.token = ""
	} else if o.token != "" && len(o.token) < 16 {
		return &usageError{fmt.Errorf("--token (or $%s) is %d characters: want at least 16", uiTokenEnv, len(o.token))}
	}
	return nil
}

// newConsole builds the console of a resolved stack from the library clients the other
// commands use. Warnings (no table, no schedule group, no scheduler role) go to warn.
func newConsole(ctx context.Context, c *awsClients, refs *stackRefs, o *uiOptions, logger *slog.Logger, warn io.Writer) (*console.Console, error) {
	cfg := console.Config{
		Title: refs.Name, SQS: c.sqs, QueueURL: refs.QueueURL, DLQURL: refs.DLQURL,
		ReadOnly: o.readOnly, Token: o.token, ShowArgs: o.showArgs, Logger: logger, Hosts: o.hosts, SecureCookie: o.secure,
		Emulator: c.local,
	}
	// A stack of several queues: the overview shows each queue and its DLQ (one ListQueues
	// call; without the permission, the default queue's rows alone).
	if set, err := stackQueueSet(ctx, c, refs.Name); err == nil && set.Len() > 1 {
		cfg.Queues = set
	}
	var table *status.Table
	var batches *batch.Client
	if refs.Table != "" {
		var err error
		if table, err = statusTable(c, refs.Table); err != nil {
			return nil, err
		}
		cfg.Status = table
		// Batches and chains live in the job table; a cancel that finishes a batch puts its
		// callback into the stack's outbox table (docs/BATCHES.md).
		ob, err := dynamooutbox.New(dynamooutbox.Config{Client: c.ddb, Table: awslocal.OutboxTableName(refs.Name)})
		if err != nil {
			return nil, err
		}
		if batches, err = batch.New(batch.Config{Client: c.ddb, Table: refs.Table, Outbox: ob}); err != nil {
			return nil, err
		}
		cfg.Batches = batches
		cfg.Flow, err = flowControl(c, refs.Table)
		if err != nil {
			return nil, err
		}
	} else {
		fmt.Fprintf(warn, "sqsworker: warning: no job table %s: the console has no Jobs pages\n", awslocal.TableName(refs.Name))
	}
	d, err := dlq.New(stackDLQConfig(c, refs.DLQURL, refs.QueueURL, table, o.payloads))
	if err != nil {
		return nil, err
	}
	cfg.DLQ = d
	// Each other queue's DLQ, as `sqsworker dlq --queue NAME` opens it: the Dead letters page
	// works on every one.
	if cfg.Queues != nil {
		for _, q := range cfg.Queues.All() {
			if q.DLQURL == "" || queues.NameOf(q.DLQURL) == queues.NameOf(refs.DLQURL) {
				continue
			}
			qd, err := dlq.New(stackDLQConfig(c, q.DLQURL, q.URL, table, o.payloads))
			if err != nil {
				return nil, err
			}
			if cfg.QueueDLQs == nil {
				cfg.QueueDLQs = map[string]console.DLQAPI{}
			}
			cfg.QueueDLQs[q.Name] = qd
		}
	}

	sched, writable, err := consoleSchedules(ctx, c, refs, o, warn)
	if err != nil {
		return nil, err
	}
	pcfg := producer.Config{SQS: c.sqs, QueueURL: refs.QueueURL}
	if cfg.Queues != nil {
		// One producer for the stack, as the HTTP API's: each kind to its queue (the routes),
		// or to the queue the Enqueue page names.
		pcfg.QueueURL, pcfg.Queues = "", cfg.Queues
		if o.routes != "" {
			r, err := queues.ParseRoutes(o.routes)
			if err != nil {
				return nil, &usageError{fmt.Errorf("--routes: %w", err)}
			}
			pcfg.Routes = r
		}
	}
	if table != nil {
		pcfg.Status = table
	}
	if sched != nil {
		cfg.Schedules = sched
		if writable {
			pcfg.Scheduler = sched
		} else {
			cfg.Schedules = readOnlySchedules{sched}
		}
	}
	if batches != nil && pcfg.Scheduler != nil {
		pcfg.Groups = batches // a cancelled scheduled child is counted in its batch or chain
	}
	if cfg.Producer, err = producer.New(pcfg); err != nil {
		return nil, err
	}
	switch {
	case !c.local:
		o := c.sqs.Options()
		cw := cloudwatch.New(cloudwatch.Options{Region: o.Region, BaseEndpoint: o.BaseEndpoint, Credentials: o.Credentials,
			HTTPClient: o.HTTPClient, RetryMaxAttempts: o.RetryMaxAttempts, RetryMode: o.RetryMode, Logger: o.Logger, AppID: o.AppID})
		cfg.Stats = &console.CloudWatchStats{CloudWatch: cw, Queue: refs.QueueName, DLQ: refs.DLQName}
	case table != nil:
		cfg.Stats = &console.TableStats{DynamoDB: c.ddb, Table: refs.Table}
	}
	return console.New(cfg)
}

// consoleSchedules returns the schedule client of the stack's schedule group, nil when the
// group does not exist. writable reports whether the scheduler's role was found, so that the
// console may create schedules (and delay jobs beyond 15 minutes).
func consoleSchedules(ctx context.Context, c *awsClients, refs *stackRefs, o *uiOptions, warn io.Writer) (*schedule.Client, bool, error) {
	api := schedulerClient(c)
	group := awslocal.ScheduleGroupName(refs.Name)
	if _, err := api.GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(group)}); err != nil {
		if apiErrorCode(err) != "ResourceNotFoundException" {
			return nil, false, fmt.Errorf("look up schedule group %s: %w", group, err)
		}
		fmt.Fprintf(warn, "sqsworker: warning: no schedule group %s on %s: the console has no Schedules page\n", group, c.where)
		return nil, false, nil
	}
	target := schedulingTarget{Stack: refs.Name, QueueName: refs.QueueName, QueueURL: refs.QueueURL, FIFO: refs.FIFO,
		Local: c.local, Where: c.where, Role: o.role, Why: "the console creates schedules with the IAM role EventBridge Scheduler assumes to send to the queue",
		Alternative: ""}
	writable := !o.readOnly
	role, err := schedulerRole(ctx, c.cfn, target, os.Getenv)
	if err != nil {
		var ue *usageError
		if !errors.As(err, &ue) && o.role != "" {
			return nil, false, err
		}
		if !o.readOnly {
			fmt.Fprintf(warn, "sqsworker: warning: %v\n  the console lists schedules but does not create them, nor delay jobs beyond 15 minutes\n", firstLine(err.Error()))
		}
		writable, role = false, awslocal.SchedulerRoleARN(refs.Name) // reads and deletes never use it
	}
	cfg, err := resolveJobScheduling(ctx, c.sqs, target, role)
	if err != nil {
		return nil, false, err
	}
	cfg.Scheduler = api
	sc, err := schedule.NewClient(cfg)
	return sc, writable, err
}

// readOnlySchedules refuses the writes of a schedule client whose role is not known.
type readOnlySchedules struct{ *schedule.Client }

func (readOnlySchedules) Upsert(context.Context, schedule.Recurring) error {
	return fmt.Errorf("%w: the console does not know the IAM role EventBridge Scheduler assumes: start it with --scheduler-role ARN or $%s",
		schedule.ErrInvalid, schedulerRoleEnv)
}

// serveUI serves the console of the stack on o.addr until ctx is done.
func serveUI(ctx context.Context, c *awsClients, refs *stackRefs, o *uiOptions, stdout, stderr io.Writer) error {
	ln, err := listenUI(o)
	if err != nil {
		return err
	}
	return serveUIOn(ctx, ln, c, refs, o, stdout, stderr)
}

// listenUI listens on o.addr.
func listenUI(o *uiOptions) (net.Listener, error) {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, fmt.Errorf("the console cannot listen on %s: %w (pass another address with --addr HOST:PORT)", o.addr, err)
	}
	return ln, nil
}

// serveUIOn serves the console on ln until ctx is done, and closes ln.
func serveUIOn(ctx context.Context, ln net.Listener, c *awsClients, refs *stackRefs, o *uiOptions, stdout, stderr io.Writer) error {
	defer ln.Close()
	if !o.readOnly && o.token == "" {
		o.token = console.NewToken()
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		// Only the loopback names: a DNS-rebinding page under another name gets nothing.
		o.hosts = []string{host, "localhost", "127.0.0.1", "::1", "[::1]"}
	} else {
		fmt.Fprintf(stderr, "sqsworker: warning: the console listens on %s, beyond this machine: reading needs no token; put it behind your own authentication\n", ln.Addr())
	}
	h, err := newConsole(ctx, c, refs, o, slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{ReplaceAttr: logattr.DurationText})), stderr)
	if err != nil {
		return err
	}
	defer h.Close()
	printHost := host
	if strings.Contains(printHost, ":") {
		printHost = "[" + printHost + "]"
	}
	base := "http://" + printHost + ":" + port + "/"
	fmt.Fprintf(stdout, "console   %s (stack %s on %s)\n", base, refs.Name, c.where)
	if o.readOnly {
		fmt.Fprintf(stdout, "mode      read-only: every action is hidden and refused\n")
	} else {
		link, err := h.SignInLink(signInLinkFor)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sign in   %s%s (one-time link: one browser, within an hour; then sign in with the token)\n", base, strings.TrimPrefix(link, "/"))
		fmt.Fprintf(stdout, "token     %s (actions and the pages that peek at the DLQ need it; --%sread-only turns actions off)\n", o.token, o.flagPrefix)
	}
	fmt.Fprintf(stdout, "serving the console until Ctrl-C\n")
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// addRunUIFlags adds run's --ui and the console's flags, prefixed "ui-".
func addRunUIFlags(cmd *cobra.Command, o *runOptions) {
	cmd.Flags().BoolVar(&o.ui, "ui", false, "also serve the operator console (see 'sqsworker ui') on --ui-addr")
	addUIFlags(cmd.Flags(), &o.uiOpts, "ui-")
}

// localRefs names the resources of a stack provisioned by this process.
func localRefs(stack string, fifo bool, queueURL, dlqURL, table string) *stackRefs {
	return &stackRefs{Name: stack, FIFO: fifo, QueueName: awslocal.QueueName(stack, fifo), QueueURL: queueURL,
		DLQName: awslocal.DLQName(stack, fifo), DLQURL: dlqURL, Table: table}
}

// startRunUI serves the console beside `sqsworker run` when --ui is given; the returned func
// stops it.
func startRunUI(ctx context.Context, o *runOptions, c *awsClients, stack string, fifo bool, queueURL, dlqURL, table string,
	stdout, stderr io.Writer) (func(), error) {
	if !o.ui {
		return func() {}, nil
	}
	if err := o.uiOpts.check(); err != nil {
		return nil, err
	}
	ln, err := listenUI(&o.uiOpts)
	if err != nil {
		return nil, err
	}
	uctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- serveUIOn(uctx, ln, c, localRefs(stack, fifo, queueURL, dlqURL, table), &o.uiOpts, stdout, stderr)
	}()
	return func() {
		cancel()
		if err := <-errc; err != nil {
			fmt.Fprintf(stderr, "sqsworker: console: %v\n", err)
		}
	}, nil
}

// demoUI returns the demo's Serve option: the console on the demo's stack, whose worker keeps
// running, until Ctrl-C.
func demoUI(cmd *cobra.Command, o *uiOptions) func(ctx context.Context, rep *demo.Report) error {
	return func(ctx context.Context, rep *demo.Report) error {
		b := rep.Backend
		c := &awsClients{where: b.URL, local: !awslocal.IsAWSEndpoint(b.URL), sqs: sqs.NewFromConfig(b.Config), ddb: b.DynamoDB()}
		refs := localRefs(rep.Stack.Name, rep.Stack.FIFO, b.QueueURL(rep.Stack.QueueURL), b.QueueURL(rep.Stack.DLQURL), rep.Table)
		if o.routes == "" {
			o.routes = demo.Routes().String() // a job enqueued from the console goes where the demo's producer sends its kind
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "\nthe demo's stack keeps running, with its worker and dispatcher, for the console:\n")
		return serveUI(ctx, c, refs, o, out, cmd.ErrOrStderr())
	}
}
