package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// enqueueJSON is enqueue's --output json document.
type enqueueJSON struct {
	JobID string `json:"job_id"`
	Kind  string `json:"kind"`
	Key   string `json:"key"`
	// MessageID is the SQS message id; "" for a job that went through a schedule (the scheduler
	// sends the message when the schedule fires).
	MessageID      string `json:"message_id"`
	SequenceNumber string `json:"sequence_number,omitempty"`
	Queue          string `json:"queue"`
	// Recorded reports whether the job table now holds the job as queued (or as scheduled, for
	// a job that went through a schedule).
	Recorded bool `json:"recorded"`
	// ScheduledAt, Schedule and ScheduleGroup are set when the job was delayed through a one-time
	// EventBridge Scheduler schedule: when it is due, the schedule's name and its group.
	ScheduledAt   jsonTime `json:"scheduled_at,omitzero"`
	Schedule      string   `json:"schedule,omitempty"`
	ScheduleGroup string   `json:"schedule_group,omitempty"`
	// Payload is the S3 object (s3://bucket/key) that holds the job's envelope when the job was
	// too large for an SQS message.
	Payload string `json:"payload,omitempty"`
	// VisibleAt is when a job sent with --delay (SQS DelaySeconds, whole seconds) becomes
	// receivable: the time SQS answered the send, by this host's clock, plus the delay. Absent
	// without a delay and for a job that went through a schedule (ScheduledAt).
	VisibleAt jsonTime `json:"visible_at,omitzero"`
}

func newEnqueueCmd(g *globals) *cobra.Command {
	var (
		key, group  string
		role        string
		argsF       argsFlag
		delay       time.Duration
		maxAttempts int
		fifo        bool
	)
	cmd := &cobra.Command{
		Use:   "enqueue KIND ARGS_JSON",
		Short: "Enqueue one job on a stack's queue",
		Long: `enqueue sends one job to the stack's queue <stack>-jobs (or <stack>-jobs.fifo), as the Go
producer does: KIND is the job's kind (^[a-z0-9][a-z0-9._:-]{0,127}$) and ARGS_JSON its
arguments, a JSON object ("-" reads it from standard input, "@FILE" from a file; --args takes
the same forms instead of the argument). It prints the job id, its idempotency key (the id
unless --key is given) and the SQS message id.

A job larger than an SQS message may be (1 MiB less 8 KiB) goes through S3 when the stack has
a payload bucket (--payload-bucket, else <stack>-payloads): its envelope is written there and
the message carries a pointer to it (docs/envelope.md); enqueue prints the object.

When the stack has its job table, the job is also recorded there as queued, so that
'sqsworker status' finds it before a worker picks it up.

A FIFO queue needs --group.

--delay up to 15 minutes on a standard queue uses SQS DelaySeconds (rounded up to whole
seconds): enqueue prints the time the job becomes visible to workers. A longer delay, and any
delay on a FIFO queue, goes through a one-time EventBridge Scheduler schedule in the
schedule group <stack>-jobs, which sends the job to the queue when it is due (within a
minute of it): enqueue then prints the time and the schedule's name instead of a message
id, and the job table records the job as scheduled. The scheduler sends with the IAM role
given by --scheduler-role (default: $SQSWORKER_SCHEDULER_ROLE_ARN). On AWS without either,
enqueue reads it from the output JobsSchedulerRoleArn of the CloudFormation stack named --stack,
which the CDK stack publishes (one DescribeStacks call: the credentials need
cloudformation:DescribeStacks). On an emulator the role may be left out. On AWS a FIFO queue
needs content-based deduplication for this (the CDK stack turns it on), since the scheduler
cannot set a deduplication id. Emulators store schedules but never fire them:
the local schedule dispatcher does.`,
		Example: `  sqsworker enqueue email.send '{"to":"a@b.c"}' --stack myapp
  sqsworker enqueue email.send '{"to":"a@b.c"}' --stack myapp --key order-42-welcome --delay 30s
  sqsworker enqueue report.build '{"month":"2026-11"}' --stack myapp --group tenant-7 --max-attempts 3
  sqsworker enqueue invoice.render '{"order":42}' --stack myapp --delay 48h \
    --scheduler-role arn:aws:iam::123456789012:role/myapp-scheduler
  echo '{"to":"a@b.c"}' | sqsworker enqueue email.send - --stack myapp --output json
  sqsworker enqueue report.build --args @month.json --stack myapp`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("args") {
				return exactArgs("KIND")(cmd, args)
			}
			return exactArgs("KIND", "ARGS_JSON")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("args") {
				argsF.text = args[1]
			}
			kind := args[0]
			raw, err := argsF.read("ARGS_JSON", cmd.InOrStdin())
			if err != nil {
				return err
			}
			// The cheap checks first, so that a typo costs no AWS call; the producer checks again.
			if err := jobs.ValidateKind(kind); err != nil {
				return &usageError{fmt.Errorf("KIND: %v", err)}
			}
			if err := checkArgsJSON(raw); err != nil {
				return &usageError{err}
			}
			var opts []producer.Option
			if cmd.Flags().Changed("key") {
				if key == "" {
					return &usageError{errors.New("--key is empty: leave it out to use the job id as the key")}
				}
				opts = append(opts, producer.WithKey(key))
			}
			if cmd.Flags().Changed("group") {
				if group == "" {
					return &usageError{errors.New("--group is empty: want a message group id")}
				}
				opts = append(opts, producer.WithGroupID(group))
			}
			if cmd.Flags().Changed("delay") {
				if delay < 0 {
					return &usageError{fmt.Errorf("--delay %v is negative", delay)}
				}
				opts = append(opts, producer.WithDelay(delay))
			}
			if cmd.Flags().Changed("max-attempts") {
				if maxAttempts < 1 {
					return &usageError{fmt.Errorf("--max-attempts %d: must be at least 1", maxAttempts)}
				}
				opts = append(opts, producer.WithMaxAttempts(maxAttempts))
			}
			if cmd.Flags().Changed("scheduler-role") {
				if err := checkRoleARN("--scheduler-role", role); err != nil {
					return err
				}
			}

			ctx := cmd.Context()
			c, err := connect(ctx, g)
			if err != nil {
				return err
			}
			target := schedulingTarget{Stack: stack, FIFO: fifo, Local: c.local, Where: c.where, Role: role,
				Alternative: ", or enqueue without --delay"}
			schedRole := "" // the role the schedule assumes, once chosen
			if needsScheduler(delay, fifo) {
				// Chosen before the stack's queues are looked up, so that a missing role fails fast
				// (on AWS without the flag or the variable it costs one DescribeStacks call).
				if schedRole, err = schedulerRole(ctx, c.cfn, target, os.Getenv); err != nil {
					return err
				}
			}
			refs, err := resolveStack(ctx, c, stack, fifo, needQueue|optTable)
			if err != nil {
				return err
			}
			if refs.FIFO && !cmd.Flags().Changed("group") {
				return &usageError{fmt.Errorf("%s is a FIFO queue: every job needs --group (its message group id)", refs.QueueName)}
			}
			cfg := producer.Config{SQS: c.sqs, QueueURL: refs.QueueURL}
			if len(raw) > producer.MaxMessageSize-4<<10 || g.payloadBucket != "" {
				// It may not fit in an SQS message: send it through the stack's bucket.
				st, err := payloadStore(ctx, c, g, stack)
				if err != nil {
					return err
				}
				if st != nil {
					cfg.Payload = st
				} else if len(raw) > producer.MaxMessageSize {
					return &usageError{fmt.Errorf("ARGS_JSON is %d bytes, more than an SQS message carries (%d): such a job goes through the stack's payload bucket, and it has none "+
						"(create %s with 'sqsworker up --payloads', deploy the CDK stack with PayloadBucket, or name one with --payload-bucket)",
						len(raw), producer.MaxMessageSize, awslocal.BucketName(stack))}
				}
			}
			if refs.Table != "" {
				if cfg.Status, err = statusTable(c, refs.Table); err != nil {
					return err
				}
			}
			scheduleGroup := ""
			if needsScheduler(delay, refs.FIFO) {
				if schedRole == "" {
					// A FIFO stack found by its queue (without --fifo): only now is the scheduler
					// known to be needed.
					if schedRole, err = schedulerRole(ctx, c.cfn, target, os.Getenv); err != nil {
						return err
					}
				}
				target.QueueName, target.QueueURL, target.FIFO = refs.QueueName, refs.QueueURL, refs.FIFO
				sc, err := newJobScheduler(ctx, c, target, schedRole)
				if err != nil {
					return err
				}
				cfg.Scheduler, scheduleGroup = sc, sc.Group()
			}
			p, err := producer.New(cfg)
			if err != nil {
				return err
			}
			res, err := p.EnqueueRaw(ctx, kind, raw, opts...)
			sentAt := time.Now()
			if errors.Is(err, schedule.ErrInvalid) {
				// The job's own fault too, found by the schedule client (its size, mostly).
				why := err.Error()
				if _, after, ok := strings.Cut(why, schedule.ErrInvalid.Error()+": "); ok {
					why = after
				}
				return &usageError{fmt.Errorf("--delay %v goes through EventBridge Scheduler, which cannot take this job: %s", delay, why)}
			}
			if errors.Is(err, producer.ErrInvalid) {
				// The job's own fault: say it without the library's prefix.
				return &usageError{errors.New(strings.TrimPrefix(err.Error(), "producer: "))}
			}
			if gerr := scheduleGroupMissing(err, c, stack, refs.FIFO); gerr != nil {
				return gerr
			}
			if err != nil {
				return err
			}
			doc := enqueueJSON{
				JobID: res.ID, Kind: res.Kind, Key: res.Key, MessageID: res.MessageID,
				SequenceNumber: res.SequenceNumber, Queue: refs.QueueName,
				Recorded: refs.Table != "" && res.StatusErr == nil,
			}
			if res.Schedule != "" {
				doc.ScheduledAt, doc.Schedule, doc.ScheduleGroup = jsonTime(res.RunAt), res.Schedule, scheduleGroup
			} else if delay > 0 {
				doc.VisibleAt = jsonTime(sentAt.Add(delaySeconds(delay)).UTC())
			}
			if res.Payload != nil {
				doc.Payload = res.Payload.String()
			}
			if res.StatusErr != nil {
				what, state := "enqueued", "queued"
				if doc.Schedule != "" {
					what, state = "scheduled", "scheduled"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "sqsworker: warning: the job was %s, but not recorded as %s: %s\n", what, state, errorText(res.StatusErr))
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			return writeEnqueueTable(cmd.OutOrStdout(), doc, refs.Table)
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "idempotency key, scoped by kind (default: the job id)")
	f.Var(&argsF, "args", "instead of ARGS_JSON, "+argsFlagUsage)
	f.DurationVar(&delay, "delay", 0, "delay the first delivery (beyond 15m, or on a FIFO queue: through an EventBridge Scheduler schedule)")
	f.StringVar(&role, "scheduler-role", "", "IAM role `ARN` the scheduler assumes to send scheduled jobs (default: $"+schedulerRoleEnv+", else on AWS the CloudFormation stack's output "+stackRoleOutput+")")
	f.IntVar(&maxAttempts, "max-attempts", 0, "override the kind's MaxAttempts for this job")
	f.StringVar(&group, "group", "", "message group id: required on FIFO queues, the tenant of a fair queue otherwise")
	f.BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	return cmd
}

// writeEnqueueTable prints enqueue's table output; table is the job table ("" when the stack has
// none).
func writeEnqueueTable(w io.Writer, doc enqueueJSON, table string) error {
	tw := newTable(w)
	if doc.Schedule != "" {
		fmt.Fprintf(tw, "scheduled\t%s for %s\n", safe(doc.Kind), safe(doc.Queue))
	} else {
		fmt.Fprintf(tw, "enqueued\t%s on %s\n", safe(doc.Kind), safe(doc.Queue))
	}
	fmt.Fprintf(tw, "job id\t%s\n", safe(doc.JobID))
	fmt.Fprintf(tw, "key\t%s\n", safe(doc.Key))
	if doc.Schedule != "" {
		fmt.Fprintf(tw, "runs at\t%s (schedule %s in group %s)\n", showTime(time.Time(doc.ScheduledAt)), doc.Schedule, doc.ScheduleGroup)
		fmt.Fprintf(tw, "message id\t- (the message is sent when the schedule fires)\n")
	} else {
		fmt.Fprintf(tw, "message id\t%s\n", safe(doc.MessageID))
	}
	if t := time.Time(doc.VisibleAt); !t.IsZero() {
		fmt.Fprintf(tw, "visible at\t%s (SQS delivers it from then on; by this host's clock)\n", showTime(t))
	}
	if doc.SequenceNumber != "" {
		fmt.Fprintf(tw, "sequence\t%s\n", doc.SequenceNumber)
	}
	if doc.Payload != "" {
		fmt.Fprintf(tw, "payload\t%s (too large for an SQS message: the message points to it)\n", safe(doc.Payload))
	}
	if doc.Recorded {
		state := "queued"
		if doc.Schedule != "" {
			state = "scheduled"
		}
		fmt.Fprintf(tw, "recorded\t%s, in table %s\n", state, table)
	}
	return tw.Flush()
}

// delaySeconds is the delay SQS applies for --delay: DelaySeconds, the delay rounded up to
// whole seconds (producer.WithDelay).
func delaySeconds(d time.Duration) time.Duration {
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// newJobScheduler returns the schedule client that delays the stack's jobs through EventBridge
// Scheduler with the role given (see resolveJobScheduling).
func newJobScheduler(ctx context.Context, c *awsClients, t schedulingTarget, role string) (*schedule.Client, error) {
	cfg, err := resolveJobScheduling(ctx, c.sqs, t, role)
	if err != nil {
		return nil, err
	}
	cfg.Scheduler = schedulerClient(c)
	return schedule.NewClient(cfg)
}

// maxArgsFile is the largest ARGS_JSON read from a file or standard input: the payload store's
// limit (larger args are refused by the producer anyway).
const maxArgsFile = payload.DefaultMaxSize

// argsFlag is the --args flag of enqueue and schedules put, and enqueue's ARGS_JSON argument:
// one parser (readArgsJSON) for a job's args given as a JSON object, "@FILE" or "-".
type argsFlag struct{ text string }

// argsFlagUsage describes what --args takes.
const argsFlagUsage = "the job's args: a JSON object, @FILE to read it from a file, or - for standard input"

func (f *argsFlag) String() string     { return f.text }
func (f *argsFlag) Set(s string) error { f.text = s; return nil }
func (f *argsFlag) Type() string       { return "ARGS_JSON" }

// read returns the args (readArgsJSON); what names them in messages.
func (f *argsFlag) read(what string, stdin io.Reader) ([]byte, error) {
	return readArgsJSON(what, f.text, stdin)
}

// readArgsJSON returns the args given as ARGS_JSON or --args: the text itself, "-" for standard
// input, "@FILE" for a file's content. what names them in messages (ARGS_JSON, --args).
func readArgsJSON(what, text string, stdin io.Reader) ([]byte, error) {
	var (
		raw  []byte
		err  error
		from string
	)
	switch {
	case text == "-":
		from = "standard input"
		raw, err = io.ReadAll(io.LimitReader(stdin, maxArgsFile+1))
	case strings.HasPrefix(text, "@"):
		name := text[1:]
		from = "file " + name
		if name == "" {
			return nil, &usageError{fmt.Errorf("%s @FILE: the file name is empty", what)}
		}
		var f *os.File
		if f, err = os.Open(name); err != nil {
			return nil, &usageError{fmt.Errorf("%s %s: %v", what, text, err)}
		}
		defer f.Close()
		raw, err = io.ReadAll(io.LimitReader(f, maxArgsFile+1))
	default:
		return []byte(text), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", what, from, err)
	}
	if len(raw) > maxArgsFile {
		return nil, &usageError{fmt.Errorf("%s on %s is larger than %d bytes, the most a job sent through S3 may be", what, from, maxArgsFile)}
	}
	return raw, nil
}

// checkArgsJSON reports why raw is not a JSON object (producer.CheckArgsJSON, which the
// console calls too).
func checkArgsJSON(raw []byte) error {
	return producer.CheckArgsJSON("ARGS_JSON", raw)
}

// statusTable returns the status Table of a stack's job table for the commands that write
// records (enqueue's queued records, the console's cancellations): in the layout
// SQSWORKER_TABLE_LAYOUT names, as the functions read it, so that they go where the worker claims
// (docs/TABLE.md).
func statusTable(c *awsClients, table string) (*status.Table, error) {
	layout, err := idempotency.ParseLayout(strings.ToLower(strings.TrimSpace(os.Getenv("SQSWORKER_TABLE_LAYOUT"))))
	if err != nil {
		return nil, &usageError{fmt.Errorf("SQSWORKER_TABLE_LAYOUT: %v", err)}
	}
	return status.New(status.Config{Client: c.ddb, Table: table, Layout: layout})
}
