package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

func newSchedulesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Create, list, show, pause, resume and delete a stack's recurring schedules",
		Long: `schedules works on the stack's recurring schedules: the EventBridge Scheduler schedules
in the schedule group <stack>-jobs whose target is the stack's job queue and which enqueue
a job on every occurrence of a cron(…) or rate(…) expression (schedule.Client.Upsert
creates them). One-time schedules of delayed jobs, and other schedules of the group, are
left out.

  put       create a schedule, or replace the one of that name (idempotent)
  list      every recurring schedule: expression, state, kind and next occurrence
  show      one schedule: its expression, time zone, bounds and the job it enqueues
  pause     stop one schedule from firing, keeping everything else
  resume    let a paused schedule fire again
  delete    delete one schedule (the jobs it already enqueued stay queued)

The embedded emulator and LocalStack store schedules but never fire them: the local
schedule dispatcher (schedule.Dispatcher) fires them there; 'sqsworker run' and
'sqsworker demo' run it beside the worker.`,
		Example: `  sqsworker schedules put nightly-report --expression 'cron(0 2 * * ? *)' --kind report.build --args '{"period":"day"}' --stack myapp
  sqsworker schedules list --stack myapp
  sqsworker schedules show nightly-report --stack myapp --output json
  sqsworker schedules pause nightly-report --stack myapp
  sqsworker schedules resume nightly-report --stack myapp
  sqsworker schedules delete nightly-report --stack myapp`,
		RunE: groupRunE,
	}
	cmd.AddCommand(newSchedulesPutCmd(g), newSchedulesListCmd(g), newSchedulesShowCmd(g), newSchedulesPauseCmd(g, true),
		newSchedulesPauseCmd(g, false), newSchedulesDeleteCmd(g))
	return cmd
}

// scheduleRefs is what the schedules commands work on.
type scheduleRefs struct {
	client   *schedule.Client
	group    string
	queueARN string
	// local reports whether the endpoint is an emulator (see awsClients.local).
	local bool
}

// openSchedules resolves the stack's queue (its ARN is the target of the stack's schedules) and
// schedule group, and returns a schedule client for them. Reads and deletes never use the
// scheduler's role, so a placeholder does; writes (see openSchedulesForWrite) choose the real one.
func openSchedules(ctx context.Context, g *globals, cmd *cobra.Command) (*scheduleRefs, error) {
	refs, _, err := resolveSchedules(ctx, g, cmd, false, "")
	return refs, err
}

// openSchedulesForWrite is openSchedules for a command that creates schedules: the role is
// --scheduler-role (role), else as schedulerRole chooses it, and the firings Scheduler cannot
// deliver go to the stack's scheduler DLQ when it has one. It also reports whether the queue is
// FIFO.
func openSchedulesForWrite(ctx context.Context, g *globals, cmd *cobra.Command, role string) (*scheduleRefs, bool, error) {
	return resolveSchedules(ctx, g, cmd, true, role)
}

func resolveSchedules(ctx context.Context, g *globals, cmd *cobra.Command, write bool, role string) (*scheduleRefs, bool, error) {
	stack, err := g.stackName(cmd)
	if err != nil {
		return nil, false, err
	}
	c, err := connect(ctx, g)
	if err != nil {
		return nil, false, err
	}
	refs, err := resolveStack(ctx, c, stack, false, needQueue)
	if err != nil {
		return nil, false, err
	}
	api := schedulerClient(c)
	group := awslocal.ScheduleGroupName(stack)
	if _, err := api.GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(group)}); err != nil {
		if apiErrorCode(err) != "ResourceNotFoundException" {
			return nil, false, fmt.Errorf("look up schedule group %s: %w", group, err)
		}
		if !c.local {
			// `up` provisions emulators, not AWS: there the CDK stack creates the group.
			return nil, false, fmt.Errorf("schedule group %s not found on %s: deploy the stack with scheduling enabled (the CDK stack in infra/ creates it)", group, c.where)
		}
		up := "sqsworker up --stack " + stack
		if refs.FIFO {
			up += " --fifo"
		}
		return nil, false, fmt.Errorf("schedule group %s not found on %s: create it with `%s --endpoint %s`", group, c.where, up, c.where)
	}
	var cfg schedule.Config
	if write {
		target := schedulingTarget{Stack: stack, QueueName: refs.QueueName, QueueURL: refs.QueueURL, FIFO: refs.FIFO,
			Local: c.local, Where: c.where, Role: role, Why: needScheduleRole}
		if role, err = schedulerRole(ctx, c.cfn, target, os.Getenv); err != nil {
			return nil, false, err
		}
		if cfg, err = resolveJobScheduling(ctx, c.sqs, target, role); err != nil {
			return nil, false, err
		}
	} else {
		attrs, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(refs.QueueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			return nil, false, fmt.Errorf("read the ARN of queue %s: %w", refs.QueueName, err)
		}
		cfg = schedule.Config{Group: group, QueueARN: attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
			RoleARN: awslocal.SchedulerRoleARN(stack)}
	}
	cfg.Scheduler = api
	client, err := schedule.NewClient(cfg)
	if err != nil {
		return nil, false, err
	}
	return &scheduleRefs{client: client, group: group, queueARN: cfg.QueueARN, local: c.local}, refs.FIFO, nil
}

// schedulerClient returns an EventBridge Scheduler client for the endpoint, region and
// credentials of the stack's SQS client.
func schedulerClient(c *awsClients) *scheduler.Client {
	o := c.sqs.Options()
	return scheduler.New(scheduler.Options{
		Region:           o.Region,
		BaseEndpoint:     o.BaseEndpoint,
		Credentials:      o.Credentials,
		HTTPClient:       o.HTTPClient,
		RetryMaxAttempts: o.RetryMaxAttempts,
		RetryMode:        o.RetryMode,
		Logger:           o.Logger,
		ClientLogMode:    o.ClientLogMode,
		AppID:            o.AppID,
	})
}

// checkScheduleName validates a recurring schedule name before any call, with
// schedule.CheckName (what schedule.Client checks): 1-64 characters of [0-9a-zA-Z-_.], without
// the prefix of one-time job schedules.
func checkScheduleName(name string) error {
	var fe *schedule.FieldError
	if err := schedule.CheckName(name); errors.As(err, &fe) {
		return &usageError{fmt.Errorf("NAME %s", fe.Problem)}
	} else if err != nil {
		return &usageError{err}
	}
	return nil
}

// scheduleError explains the schedule package's errors for one name.
func scheduleError(err error, refs *scheduleRefs, name string) error {
	switch {
	case errors.Is(err, schedule.ErrNotOwned):
		return fmt.Errorf("schedule %q in schedule group %s is not a recurring job schedule of the queue %s: left alone", name, refs.group, refs.queueARN)
	case errors.Is(err, schedule.ErrNotFound):
		return fmt.Errorf("no recurring schedule %q in schedule group %s (sqsworker schedules list shows them)", name, refs.group)
	case errors.Is(err, schedule.ErrInvalid):
		// The schedule's own fault: say it without the library's prefix.
		return &usageError{errors.New(strings.TrimPrefix(err.Error(), schedule.ErrInvalid.Error()+": "))}
	}
	return err
}

// scheduleJSON is a recurring schedule in JSON output: every key is always present.
type scheduleJSON struct {
	Name           string          `json:"name"`
	Expression     string          `json:"expression"`
	Timezone       string          `json:"timezone"`
	State          string          `json:"state"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	MaxAttempts    int             `json:"max_attempts"`
	GroupID        string          `json:"group_id"`
	Start          jsonTime        `json:"start"`
	End            jsonTime        `json:"end"`
	FlexibleWindow string          `json:"flexible_window"`
	Description    string          `json:"description"`
	// NextRun is the next occurrence (a rate without a start date counts from the schedule's
	// creation), or null when there is none (disabled, ended).
	NextRun jsonTime `json:"next_run"`
}

func toScheduleJSON(r schedule.Recurring, now time.Time) scheduleJSON {
	args := r.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	flex := ""
	if r.FlexibleWindow > 0 {
		flex = fmt.Sprintf("%dm", r.FlexibleWindow/time.Minute) // whole minutes, as Scheduler keeps it
	}
	return scheduleJSON{
		Name: r.Name, Expression: r.Expression, Timezone: r.Timezone, State: scheduleState(r), Kind: r.Kind,
		Args: args, MaxAttempts: r.MaxAttempts, GroupID: r.GroupID, Start: jsonTime(r.Start), End: jsonTime(r.End),
		FlexibleWindow: flex, Description: r.Description, NextRun: jsonTime(nextRun(r, now)),
	}
}

func scheduleState(r schedule.Recurring) string {
	if r.Disabled {
		return "disabled"
	}
	return "enabled"
}

// nextRun returns the schedule's next occurrence after now (schedule.NextRuns: a rate without
// a start date counts from the schedule's creation), or zero when it is disabled or has none
// left.
func nextRun(r schedule.Recurring, now time.Time) time.Time {
	if next := schedule.NextRuns(r, now, 1); len(next) > 0 {
		return next[0]
	}
	return time.Time{}
}

// schedulesListJSON is schedules list's --output json document.
type schedulesListJSON struct {
	Group     string         `json:"group"`
	Queue     string         `json:"queue"`
	Schedules []scheduleJSON `json:"schedules"`
}

func newSchedulesListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the stack's recurring schedules",
		Long: `list shows every recurring schedule of the stack, sorted by name: its expression and time
zone, whether it is enabled, the kind of job it enqueues and its next occurrence ("-" when
there is none; a rate without a start date counts from the schedule's creation).`,
		Example: `  sqsworker schedules list --stack myapp
  sqsworker schedules list --stack myapp --output json | jq -r '.schedules[].name'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			refs, err := openSchedules(ctx, g, cmd)
			if err != nil {
				return err
			}
			list, err := refs.client.List(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			if g.json() {
				doc := schedulesListJSON{Group: refs.group, Queue: refs.queueARN, Schedules: make([]scheduleJSON, 0, len(list))}
				for _, r := range list {
					doc.Schedules = append(doc.Schedules, toScheduleJSON(r, now))
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			out := cmd.OutOrStdout()
			if len(list) == 0 {
				fmt.Fprintf(out, "no recurring schedules in schedule group %s\n", refs.group)
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "NAME\tEXPRESSION\tTIMEZONE\tSTATE\tKIND\tNEXT RUN")
			for _, r := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safe(r.Name), safe(r.Expression), safe(r.Timezone), scheduleState(r), safe(r.Kind), showTime(nextRun(r, now)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out, "\n%s in schedule group %s\n", plural(len(list), "recurring schedule"), refs.group)
			return nil
		},
	}
}

func newSchedulesShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show one recurring schedule and the job it enqueues",
		Long: `show prints one recurring schedule of the stack: its expression, time zone, state, start
and end, flexible window, next occurrence, and the job each occurrence enqueues (kind,
arguments, attempt budget, FIFO message group). Each occurrence's job has the key
NAME@<scheduled time>, so that a retried delivery of one occurrence runs once.`,
		Example: `  sqsworker schedules show nightly-report --stack myapp
  sqsworker schedules show nightly-report --stack myapp --output json | jq .args`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScheduleName(args[0]); err != nil {
				return err
			}
			ctx := cmd.Context()
			refs, err := openSchedules(ctx, g, cmd)
			if err != nil {
				return err
			}
			r, err := refs.client.Get(ctx, args[0])
			if err != nil {
				return scheduleError(err, refs, args[0])
			}
			j := toScheduleJSON(r, time.Now())
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), j)
			}
			return writeSchedule(cmd.OutOrStdout(), refs.group, r, j)
		},
	}
}

// writeSchedule prints one recurring schedule as show does.
func writeSchedule(w io.Writer, group string, r schedule.Recurring, j scheduleJSON) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "name\t%s\n", safe(j.Name))
	fmt.Fprintf(tw, "group\t%s\n", safe(group))
	fmt.Fprintf(tw, "expression\t%s\n", safe(j.Expression))
	fmt.Fprintf(tw, "timezone\t%s\n", safe(j.Timezone))
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	fmt.Fprintf(tw, "start\t%s\n", showTime(r.Start))
	fmt.Fprintf(tw, "end\t%s\n", showTime(r.End))
	fmt.Fprintf(tw, "flexible window\t%s\n", orDash(j.FlexibleWindow))
	fmt.Fprintf(tw, "next run\t%s\n", showTime(time.Time(j.NextRun)))
	fmt.Fprintf(tw, "description\t%s\n", orDash(oneLine(j.Description, 100)))
	fmt.Fprintf(tw, "job kind\t%s\n", safe(j.Kind))
	fmt.Fprintf(tw, "job args\t%s\n", oneLine(string(j.Args), 200))
	fmt.Fprintf(tw, "job key\t%s@<scheduled time>\n", safe(j.Name))
	if j.MaxAttempts > 0 {
		fmt.Fprintf(tw, "max attempts\t%d\n", j.MaxAttempts)
	} else {
		fmt.Fprintf(tw, "max attempts\t- (the kind's)\n")
	}
	if j.GroupID != "" {
		fmt.Fprintf(tw, "message group\t%s\n", safe(j.GroupID))
	}
	return tw.Flush()
}

func newSchedulesDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete one recurring schedule",
		Long: `delete deletes the recurring schedule NAME from the stack's schedule group: no occurrence
after it enqueues a job; jobs it already enqueued stay on the queue. A schedule of that name
that is not a recurring job schedule of the stack's queue is left alone (exit code 1).`,
		Example: `  sqsworker schedules delete nightly-report --stack myapp`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScheduleName(args[0]); err != nil {
				return err
			}
			ctx := cmd.Context()
			refs, err := openSchedules(ctx, g, cmd)
			if err != nil {
				return err
			}
			if err := refs.client.Delete(ctx, args[0]); err != nil {
				return scheduleError(err, refs, args[0])
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"deleted": args[0], "group": refs.group})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted recurring schedule %s from schedule group %s\n", args[0], refs.group)
			return nil
		},
	}
}

// newSchedulesPauseCmd returns schedules pause (pause true) or schedules resume.
func newSchedulesPauseCmd(g *globals, pause bool) *cobra.Command {
	use, short, long, done := "pause", "Stop a recurring schedule from firing, keeping everything else",
		`pause disables the recurring schedule NAME: no occurrence enqueues a job until 'sqsworker
schedules resume NAME'. Everything else about it stays as it is: its expression, time zone,
bounds, flexible window, description and the job it enqueues (kind, args, attempts, group),
unlike 'schedules put --disabled', which replaces the schedule with what its flags say.
Pausing a paused schedule changes nothing. Jobs it already enqueued stay queued.`, "paused"
	if !pause {
		use, short, long, done = "resume", "Let a paused recurring schedule fire again",
			`resume enables the recurring schedule NAME again, keeping everything else about it, as
'schedules pause' does; its next occurrence enqueues a job (on an emulator, when the local
dispatcher of 'sqsworker run' or 'sqsworker demo' fires it). Resuming an enabled schedule
changes nothing.`, "resumed"
	}
	return &cobra.Command{
		Use:     use + " NAME",
		Short:   short,
		Long:    long,
		Example: "  sqsworker schedules " + use + " nightly-report --stack myapp\n  sqsworker schedules " + use + " nightly-report --stack myapp --output json",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkScheduleName(args[0]); err != nil {
				return err
			}
			ctx := cmd.Context()
			refs, err := openSchedules(ctx, g, cmd)
			if err != nil {
				return err
			}
			var r schedule.Recurring
			if pause {
				r, err = refs.client.Pause(ctx, args[0])
			} else {
				r, err = refs.client.Resume(ctx, args[0])
			}
			if err != nil {
				return scheduleError(err, refs, args[0])
			}
			j := toScheduleJSON(r, time.Now())
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), j)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s recurring schedule %s in schedule group %s\n\n", done, args[0], refs.group)
			return writeSchedule(out, refs.group, r, j)
		},
	}
}
