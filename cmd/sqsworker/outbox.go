package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// outboxBackend is a kind of outbox `sqsworker outbox` works on. The stack's DynamoDB outbox
// (<stack>-outbox) is the default; another backend (the PostgreSQL outbox) registers itself with
// one line, registerOutbox(…), from a file of its own.
type outboxBackend interface {
	// addFlags adds the backend's flags to the outbox command (persistent: every subcommand).
	addFlags(cmd *cobra.Command)
	// open returns the backend's inspector when its flags select it (ok false otherwise), and
	// names where it is for messages.
	open(cmd *cobra.Command, g *globals) (insp outbox.Inspector, where string, ok bool, err error)
	// commands returns subcommands of its own (such as `outbox relay`), or nil.
	commands(g *globals) []*cobra.Command
}

var outboxBackends []outboxBackend

// registerOutbox adds a backend; it is asked before the DynamoDB default.
func registerOutbox(b outboxBackend) { outboxBackends = append(outboxBackends, b) }

func newOutboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Inspect and retry the jobs of the transactional outbox",
		Long: `outbox works on the jobs a transactional outbox holds: jobs committed with the
business data they belong to, that the relay has not sent to SQS yet (pending: waiting,
claimed by a relay, or waiting for a retry after a failed send) or has given up on (dead:
MaxAttempts sends failed; kept, with the last error, until retried).

By default it reads the stack's DynamoDB outbox table <stack>-outbox (docs/OUTBOX.md).
A sent job leaves the outbox: look it up with 'sqsworker status'.`,
		Example: `  sqsworker outbox list --stack myapp
  sqsworker outbox list --state dead --stack myapp --output json
  sqsworker outbox show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker outbox retry 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp`,
		RunE: groupRunE,
	}
	for _, b := range outboxBackends {
		b.addFlags(cmd)
	}
	cmd.AddCommand(newOutboxListCmd(g), newOutboxShowCmd(g), newOutboxRetryCmd(g))
	for _, b := range outboxBackends {
		cmd.AddCommand(b.commands(g)...)
	}
	return cmd
}

// openOutbox returns the inspector the command line selects: a registered backend's, else the
// stack's DynamoDB outbox.
func openOutbox(cmd *cobra.Command, g *globals) (outbox.Inspector, string, error) {
	for _, b := range outboxBackends {
		insp, where, ok, err := b.open(cmd, g)
		if err != nil || ok {
			return insp, where, err
		}
	}
	stack, err := g.stackName(cmd)
	if err != nil {
		return nil, "", err
	}
	ctx := cmd.Context()
	c, err := connect(ctx, g)
	if err != nil {
		return nil, "", err
	}
	ob, _, err := stackOutbox(ctx, c, stack)
	if err != nil {
		return nil, "", err
	}
	if ob == nil {
		return nil, "", c.missing(errNoTable, "outbox table "+awslocal.OutboxTableName(stack), stack, false)
	}
	return ob, "table " + ob.Table(), nil
}

// stackOutbox returns the stack's DynamoDB outbox and its stream's ARN, or nil when the stack
// has no outbox table.
func stackOutbox(ctx context.Context, c *awsClients, stack string) (*dynamooutbox.Outbox, string, error) {
	name := awslocal.OutboxTableName(stack)
	out, err := c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *ddbtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("describe table %s: %w", name, err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: c.ddb, Table: name})
	if err != nil {
		return nil, "", err
	}
	return ob, aws.ToString(out.Table.LatestStreamArn), nil
}

// outboxJSON is one entry in --output json.
type outboxJSON struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Key         string   `json:"key"`
	State       string   `json:"state"`
	Queue       string   `json:"queue_url"`
	Group       string   `json:"group_id,omitempty"`
	Attempts    int      `json:"attempts"`
	CreatedAt   jsonTime `json:"created_at"`
	AvailableAt jsonTime `json:"available_at"`
	RunAt       jsonTime `json:"run_at"`
	LockedBy    string   `json:"locked_by,omitempty"`
	LockedUntil jsonTime `json:"locked_until"`
	LastError   string   `json:"last_error,omitempty"`
	Corrupt     string   `json:"corrupt,omitempty"`
	Body        string   `json:"body"`
}

func toOutboxJSON(e outbox.Entry) outboxJSON {
	m := e.Message
	return outboxJSON{ID: e.ID(), Kind: m.Kind, Key: m.Key, State: string(e.State), Queue: m.QueueURL, Group: m.GroupID,
		Attempts: e.Attempts, CreatedAt: jsonTime(e.CreatedAt), AvailableAt: jsonTime(e.AvailableAt), RunAt: jsonTime(m.RunAt),
		LockedBy: e.LockedBy, LockedUntil: jsonTime(e.LockedUntil), LastError: e.LastError, Corrupt: e.Corrupt, Body: m.Body}
}

func newOutboxListCmd(g *globals) *cobra.Command {
	var state, page string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--state pending|dead]",
		Short: "List the outbox's pending or dead jobs, oldest first",
		Long: `list shows the outbox's jobs in one state, oldest first: pending (not sent yet) or
dead (the relay gave up; 'outbox retry' sends one again). When there are more than --limit,
the last line gives the token of the next page: pass it with --page.`,
		Example: `  sqsworker outbox list --stack myapp
  sqsworker outbox list --state dead --stack myapp --output json | jq -r '.entries[].id'
  sqsworker outbox list --state dead --dsn postgres://app@db/app     # the PostgreSQL outbox`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != string(outbox.StatePending) && state != string(outbox.StateDead) {
				return &usageError{fmt.Errorf("--state %q: want pending or dead", state)}
			}
			if limit < 1 || limit > 100 {
				return &usageError{fmt.Errorf("--limit %d: want 1-100", limit)}
			}
			insp, where, err := openOutbox(cmd, g)
			if err != nil {
				return err
			}
			p, err := insp.List(cmd.Context(), outbox.ListQuery{State: outbox.State(state), Limit: limit, PageToken: page})
			if errors.Is(err, outbox.ErrInvalid) {
				return &usageError{err}
			}
			if err != nil {
				return err
			}
			if g.json() {
				doc := struct {
					State         string       `json:"state"`
					Entries       []outboxJSON `json:"entries"`
					NextPageToken string       `json:"next_page_token"`
				}{State: state, Entries: []outboxJSON{}, NextPageToken: p.NextPageToken}
				for _, e := range p.Entries {
					doc.Entries = append(doc.Entries, toOutboxJSON(e))
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			return printOutboxList(cmd.OutOrStdout(), where, state, p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", string(outbox.StatePending), "pending or dead")
	f.IntVar(&limit, "limit", 50, "jobs per page (1-100)")
	f.StringVar(&page, "page", "", "the next page's token, from the previous page")
	return cmd
}

func printOutboxList(w io.Writer, where, state string, p outbox.Page) error {
	if len(p.Entries) == 0 {
		fmt.Fprintf(w, "no %s jobs in the outbox (%s)\n", state, where)
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "JOB\tKIND\tKEY\tATTEMPTS\tCREATED\tNEXT TRY\tLAST ERROR")
	for _, e := range p.Entries {
		next := showTime(e.AvailableAt)
		switch {
		case e.State == outbox.StateDead:
			next = "-"
		case e.LockedBy != "":
			next = "claimed by " + safe(e.LockedBy)
		}
		lastErr := e.LastError
		if e.Corrupt != "" {
			lastErr = "corrupt: " + e.Corrupt
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", orDash(e.ID()), orDash(e.Message.Kind), oneLine(orDash(e.Message.Key), 32),
			e.Attempts, showTime(e.CreatedAt), next, oneLine(orDash(lastErr), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.NextPageToken != "" {
		fmt.Fprintf(w, "more: --page %s\n", p.NextPageToken)
	}
	return nil
}

func newOutboxShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show JOB",
		Short: "Show one job of the outbox: its state, attempts, last error and message",
		Long: `show prints one job of the outbox, by its job id: its state (pending or dead), attempts,
when it was created and is next due, the relay that claimed it, its last error and its
message. A job the relay has sent is no longer in the outbox: 'sqsworker status' finds it.`,
		Example: `  sqsworker outbox show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker outbox show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp --output json | jq -r .last_error
  sqsworker outbox show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --dsn postgres://app@db/app`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			insp, where, err := openOutbox(cmd, g)
			if err != nil {
				return err
			}
			e, err := insp.Get(cmd.Context(), args[0])
			if errors.Is(err, outbox.ErrNotFound) {
				return fmt.Errorf("no job %q in the outbox (%s): a sent job leaves the outbox; look it up with 'sqsworker status %s'", args[0], where, args[0])
			}
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), toOutboxJSON(e))
			}
			return printOutboxEntry(cmd, e)
		},
	}
}

func printOutboxEntry(cmd *cobra.Command, e outbox.Entry) error {
	tw := newTable(cmd.OutOrStdout())
	col := colourFor(cmd.OutOrStdout())
	m := e.Message
	fmt.Fprintf(tw, "job id\t%s\n", orDash(e.ID()))
	fmt.Fprintf(tw, "kind\t%s\n", orDash(m.Kind))
	fmt.Fprintf(tw, "key\t%s\n", orDash(m.Key))
	fmt.Fprintf(tw, "state\t%s\n", col.state(string(e.State)))
	fmt.Fprintf(tw, "queue\t%s\n", orDash(m.QueueURL))
	if m.GroupID != "" {
		fmt.Fprintf(tw, "group\t%s\n", safe(m.GroupID))
	}
	fmt.Fprintf(tw, "attempts\t%d\n", e.Attempts)
	fmt.Fprintf(tw, "created\t%s\n", showTime(e.CreatedAt))
	if e.State == outbox.StatePending {
		fmt.Fprintf(tw, "next try\t%s\n", showTime(e.AvailableAt))
	}
	if !m.RunAt.IsZero() {
		fmt.Fprintf(tw, "run at\t%s\n", showTime(m.RunAt))
	}
	if e.LockedBy != "" {
		fmt.Fprintf(tw, "claimed by\t%s until %s\n", safe(e.LockedBy), showTime(e.LockedUntil))
	}
	fmt.Fprintf(tw, "last error\t%s\n", orDash(strings.ReplaceAll(e.LastError, "\n", " ")))
	if e.Corrupt != "" {
		fmt.Fprintf(tw, "corrupt\t%s\n", oneLine(e.Corrupt, 200))
	}
	fmt.Fprintf(tw, "body\t%s\n", oneLine(m.Body, 200))
	return tw.Flush()
}

func newOutboxRetryCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "retry JOB",
		Short: "Make a dead (or pending) job due now, with its attempts reset",
		Long: `retry makes one job of the outbox due at once, with its attempts reset to 0: a dead job
comes back to life, and the relay's next pass (at most a minute on AWS, where the sweeper runs
every minute) sends it. The job keeps its id, so the worker's idempotency still runs it once.
A pending job that a relay has claimed is being sent: retry refuses it until the claim ends
(clearing it would make that relay's write-back fail and the job be sent twice).`,
		Example: `  sqsworker outbox retry 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker outbox retry 01JD5Q2Y7V3M8K4N6P0R2T4W6X --dsn postgres://app@db/app`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			insp, where, err := openOutbox(cmd, g)
			if err != nil {
				return err
			}
			err = insp.Retry(cmd.Context(), args[0])
			if errors.Is(err, outbox.ErrNotFound) {
				return fmt.Errorf("no job %q in the outbox (%s)", args[0], where)
			}
			if errors.Is(err, outbox.ErrClaimed) {
				return fmt.Errorf("not retried: %w", err)
			}
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"job_id": args[0], "due": "now", "attempts": 0})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s is due now (attempts reset); the relay's next pass sends it\n", safe(args[0]))
			return nil
		},
	}
}

// outboxStatus returns where a job stands in the stack's outbox, for 'sqsworker status': a
// "queued" job may not have reached SQS yet. It returns nil when the stack has no outbox or the
// job is not in it (a sent job leaves it).
func outboxStatus(ctx context.Context, c *awsClients, stack, jobID string) *outbox.Entry {
	if jobID == "" {
		return nil
	}
	ob, _, err := stackOutbox(ctx, c, stack)
	if err != nil || ob == nil {
		return nil
	}
	e, err := ob.Get(ctx, jobID)
	if err != nil {
		return nil
	}
	return &e
}

// outboxRow is the "outbox" line of 'sqsworker status' for a job still in the outbox.
func outboxRow(e *outbox.Entry) string {
	switch e.State {
	case outbox.StatePending:
		s := fmt.Sprintf("outbox\tpending: not sent to SQS yet (attempts %d", e.Attempts)
		if e.LastError != "" {
			s += ", last error: " + oneLine(e.LastError, 80)
		}
		return s + ")"
	case outbox.StateDead:
		return fmt.Sprintf("outbox\tdead: the relay gave up after %d attempts (%s); 'sqsworker outbox retry %s' sends it again",
			e.Attempts, oneLine(e.LastError, 80), safe(e.ID()))
	}
	return "outbox\t" + safe(string(e.State))
}

// runOutboxRelay returns the local relay of the stack's outbox for `sqsworker run` (the stream
// relay on our own stream poller, and the sweeper), or nil when the stack has no outbox table.
// On the embedded emulator the outbox's transactions emit no stream records (docs/OUTBOX.md),
// so there the sweeper sends every job. queueARN, when known, lets it deliver long delays through
// the stack's schedule group.
func runOutboxRelay(ctx context.Context, b *awslocal.Backend, stack, queueURL, queueARN string, sqsClient producer.SQSAPI,
	schedClient schedule.SchedulerAPI, stdout, stderr io.Writer) (*dynamooutbox.Runner, error) {
	c := &awsClients{where: b.URL, local: true, ddb: b.DynamoDB()}
	ob, streamARN, err := stackOutbox(ctx, c, stack)
	if err != nil || ob == nil {
		return nil, err
	}
	var sched producer.JobScheduler
	if queueARN != "" {
		if sched, err = schedule.NewClient(schedule.Config{Scheduler: schedClient, Group: awslocal.ScheduleGroupName(stack),
			QueueARN: queueARN, RoleARN: awslocal.SchedulerRoleARN(stack)}); err != nil {
			return nil, err
		}
	}
	p, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: queueURL, Scheduler: sched})
	if err != nil {
		return nil, err
	}
	lr, err := dynamooutbox.NewRunner(dynamooutbox.RunnerConfig{Outbox: ob, Producers: []*producer.Producer{p},
		Streams: dynamodbstreams.NewFromConfig(b.Config), StreamARN: streamARN, ID: "run-" + strconv.Itoa(os.Getpid()),
		Relay:  outbox.RelayConfig{PollInterval: 500 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "outbox    %s (relay: stream poller and sweeper)\n", ob.Table())
	return lr, nil
}
