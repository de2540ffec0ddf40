package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// schedulesPutJSON is schedules put's --output json document.
type schedulesPutJSON struct {
	// Result is "created" or "replaced".
	Result   string       `json:"result"`
	Group    string       `json:"group"`
	Schedule scheduleJSON `json:"schedule"`
}

// needScheduleRole opens the errors of a role schedulerRole cannot find, for schedules put.
const needScheduleRole = "a recurring schedule needs the IAM role EventBridge Scheduler assumes to send to the queue"

func newSchedulesPutCmd(g *globals) *cobra.Command {
	var (
		r          schedule.Recurring
		argsF      = argsFlag{text: "{}"}
		role       string
		start, end string
	)
	cmd := &cobra.Command{
		Use:   "put NAME --expression EXPR --kind KIND [--args ARGS_JSON]",
		Short: "Create a recurring schedule, or replace the one of that name",
		Long: `put creates the recurring schedule NAME in the stack's schedule group <stack>-jobs, or
replaces every setting of the schedule of that name (it is idempotent: putting the same
schedule twice changes nothing). Each occurrence of --expression enqueues a job of --kind
with --args on the stack's queue, with the key NAME@<scheduled time>, so that a retried
delivery of one occurrence runs once.

--expression is EventBridge Scheduler's: cron(minutes hours day-of-month month day-of-week
year), with '?' in one of the two day fields and day-of-week 1-7 = SUN-SAT, or rate(N
minutes|hours|days), or at(yyyy-mm-ddThh:mm:ss) for one occurrence. It is checked, with every
other flag, before any AWS call; cron and at expressions are read in --timezone.

--start and --end bound the occurrences (RFC 3339 times, such as 2027-01-01T00:00:00Z); a
rate counts its periods from --start, or from the schedule's creation (the embedded emulator
cannot take start or end dates from the Go SDK; AWS and LocalStack can). On a FIFO queue
every job needs --group. --args takes the job's args as JSON, @FILE or - (standard input), as
enqueue does. A schedule of that name that is not a recurring job schedule of the stack's
queue is left alone (exit code 1).

put replaces every setting: to stop a schedule from firing, and start it again, without
changing anything else, use 'schedules pause' and 'schedules resume'; --disabled creates (or
replaces) a schedule that does not fire.

On AWS the scheduler assumes the role given by --scheduler-role (default:
$SQSWORKER_SCHEDULER_ROLE_ARN, else the CloudFormation stack's output JobsSchedulerRoleArn),
and names the stack's scheduler DLQ <stack>-jobs-scheduler-dlq, when it exists, for the
firings it cannot deliver. Emulators store schedules but never fire them: 'sqsworker run'
and 'sqsworker demo' run the local dispatcher that does.`,
		Example: `  sqsworker schedules put nightly-report --expression 'cron(0 2 * * ? *)' --kind report.build --args '{"period":"day"}' --stack myapp
  sqsworker schedules put rollup --expression 'rate(15 minutes)' --kind metrics.rollup --args @rollup.json --stack myapp
  sqsworker schedules put payroll --expression 'cron(0 9 L * ? *)' --timezone Europe/Berlin --kind payroll.run \
    --max-attempts 3 --description 'the last day of each month, 09:00 in Berlin' --stack myapp`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			r.Name = argv[0]
			args, err := argsF.read("--args", cmd.InOrStdin())
			if err != nil {
				return err
			}
			if err := checkRecurring(cmd, &r, args, start, end, role); err != nil {
				return err
			}
			ctx := cmd.Context()
			refs, fifo, err := openSchedulesForWrite(ctx, g, cmd, role)
			if err != nil {
				return err
			}
			if fifo && r.GroupID == "" {
				return &usageError{fmt.Errorf("the stack's queue is a FIFO queue: every job needs --group (its message group id)")}
			}
			result := "replaced"
			switch _, err := refs.client.Get(ctx, r.Name); {
			case errors.Is(err, schedule.ErrNotFound) && !errors.Is(err, schedule.ErrNotOwned):
				result = "created"
			case err != nil:
				return scheduleError(err, refs, r.Name)
			}
			if err := refs.client.Upsert(ctx, r); err != nil {
				if refs.local && (!r.Start.IsZero() || !r.End.IsZero()) && !errors.Is(err, schedule.ErrInvalid) {
					// A known gap of the embedded emulator: it cannot decode the SDK's timestamps.
					return fmt.Errorf("%w\n  the emulator refused --start/--end (the embedded emulator cannot take start or end dates from the Go SDK; AWS and LocalStack can): leave them out locally", err)
				}
				return scheduleError(err, refs, r.Name)
			}
			saved, err := refs.client.Get(ctx, r.Name)
			if err != nil {
				return err
			}
			j := toScheduleJSON(saved, time.Now())
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), schedulesPutJSON{Result: result, Group: refs.group, Schedule: j})
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s recurring schedule %s in schedule group %s\n\n", result, r.Name, refs.group)
			return writeSchedule(out, refs.group, saved, j)
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.Expression, "expression", "", "cron(…), rate(…) or at(…), with EventBridge Scheduler's syntax (required)")
	f.StringVar(&r.Kind, "kind", "", "the kind of the job each occurrence enqueues (required)")
	f.Var(&argsF, "args", argsFlagUsage)
	f.StringVar(&r.Timezone, "timezone", "UTC", "the IANA time zone cron and at expressions are read in, such as Europe/Paris")
	f.StringVar(&start, "start", "", "no occurrence before this RFC 3339 time")
	f.StringVar(&end, "end", "", "no occurrence at or after this RFC 3339 time")
	f.BoolVar(&r.Disabled, "disabled", false, "keep the schedule without firing it")
	f.DurationVar(&r.FlexibleWindow, "flexible-window", 0, "let the scheduler fire up to this long after each occurrence (whole minutes, 1m-24h)")
	f.IntVar(&r.MaxAttempts, "max-attempts", 0, "override the kind's MaxAttempts for these jobs")
	f.StringVar(&r.GroupID, "group", "", "message group id of the jobs: required on FIFO queues")
	f.StringVar(&r.Description, "description", "", "a description, at most 512 characters")
	f.StringVar(&role, "scheduler-role", "", "IAM role `ARN` the scheduler assumes to send the jobs (default: $"+schedulerRoleEnv+", else on AWS the CloudFormation stack's output "+stackRoleOutput+")")
	return cmd
}

// putFlags name the flag of each field of schedule.Recurring, for schedule.CheckRecurring's
// errors.
var putFlags = map[string]string{
	"Name": "NAME", "Expression": "--expression", "Timezone": "--timezone", "Start": "--start",
	"FlexibleWindow": "--flexible-window", "Kind": "--kind", "Args": "--args", "MaxAttempts": "--max-attempts",
	"GroupID": "--group", "Description": "--description",
}

// fieldUsageError words a *schedule.FieldError with the command's flag names: the library's
// checks are the CLI's (and the console's), only the names differ.
func fieldUsageError(cmd *cobra.Command, err error) error {
	var fe *schedule.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	flag := putFlags[fe.Field]
	if flag == "" {
		flag = fe.Field
	}
	if rest, ok := strings.CutPrefix(fe.Problem, "is empty"); ok && strings.HasPrefix(flag, "--") && !cmd.Flags().Changed(flag[2:]) {
		return &usageError{fmt.Errorf("%s needs %s%s", cmd.CommandPath()[len(cmd.Root().Name())+1:], flag, rest)}
	}
	return &usageError{fmt.Errorf("%s %s", flag, fe.Problem)}
}

// checkRecurring fills the schedule's fields from the flags and checks them before any AWS
// call with schedule.CheckRecurring, the check Upsert and the console make; what is the
// command line's own (the times' syntax, a flag given empty, the role) is checked here.
func checkRecurring(cmd *cobra.Command, r *schedule.Recurring, args []byte, start, end, role string) error {
	bad := func(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }
	r.Args = args
	for _, t := range []struct {
		flag, value string
		into        *time.Time
	}{{"--start", start, &r.Start}, {"--end", end, &r.End}} {
		if t.value == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.value)
		if err != nil {
			return bad("%s %q is not an RFC 3339 time, such as 2027-01-01T00:00:00Z", t.flag, t.value)
		}
		*t.into = v
	}
	if cmd.Flags().Changed("max-attempts") && r.MaxAttempts == 0 {
		return bad("--max-attempts 0: must be at least 1")
	}
	if cmd.Flags().Changed("group") && r.GroupID == "" {
		return bad("--group is empty: want a message group id")
	}
	if cmd.Flags().Changed("timezone") && r.Timezone == "" {
		return bad("--timezone is empty: want an IANA time zone name, such as UTC or Europe/Paris")
	}
	if err := schedule.CheckRecurring(r); err != nil {
		return fieldUsageError(cmd, err)
	}
	if cmd.Flags().Changed("scheduler-role") {
		if err := checkRoleARN("--scheduler-role", role); err != nil {
			return err
		}
	}
	return nil
}
