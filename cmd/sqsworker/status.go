package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
)

func newStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's record: state, runs, last error, reason, times",
		Long: `status shows the record the worker keeps for one job in the stack's job table
<stack>-jobs: its state (queued, scheduled, running, succeeded, retrying, dead, cancelled),
the runs it took, its last error, the reason it was dead-lettered, its times and when the
record expires.

JOB is a job id, as 'sqsworker enqueue' prints it, or KIND/KEY for the job's idempotency
key (the key may itself contain '/'). A job id is found through the table's by_id index,
which lags writes by up to about a second.`,
		Example: `  sqsworker status 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker status email.send/order-42-welcome --stack myapp
  sqsworker status email.send/order-42-welcome --stack myapp --output json | jq -r .state`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			kind, key, byKey := strings.Cut(args[0], "/")
			if byKey {
				if err := jobs.ValidateKind(kind); err != nil {
					return &usageError{fmt.Errorf("JOB %q: KIND/KEY: %v", args[0], err)}
				}
				if key == "" {
					return &usageError{fmt.Errorf("JOB %q: KIND/KEY: the key is empty", args[0])}
				}
			} else if strings.TrimSpace(args[0]) == "" {
				return &usageError{errors.New("JOB is empty: want a job id or KIND/KEY")}
			}
			ctx := cmd.Context()
			c, err := connect(ctx, g)
			if err != nil {
				return err
			}
			refs, err := resolveStack(ctx, c, stack, false, needTable)
			if err != nil {
				return err
			}
			table, err := status.New(status.Config{Client: c.ddb, Table: refs.Table})
			if err != nil {
				return err
			}
			var j status.Job
			if byKey {
				j, err = table.Get(ctx, kind, key)
			} else {
				j, err = table.GetByID(ctx, args[0])
			}
			switch {
			case errors.Is(err, status.ErrNotFound) && byKey:
				return fmt.Errorf("no job %s with key %q in table %s", kind, key, refs.Table)
			case errors.Is(err, status.ErrNotFound):
				return fmt.Errorf("no job with id %q in table %s (a job enqueued in the last second may not be indexed yet; look a key up as KIND/KEY)", args[0], refs.Table)
			case errors.Is(err, status.ErrInvalid):
				return &usageError{err}
			case err != nil:
				return err
			}
			ob := outboxStatus(ctx, c, stack, j.JobID)
			if g.json() {
				doc := struct {
					jobJSON
					Outbox *outboxJSON `json:"outbox,omitempty"`
				}{jobJSON: toJobJSON(j)}
				if ob != nil {
					o := toOutboxJSON(*ob)
					doc.Outbox = &o
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			var rows []string
			if ob != nil {
				rows = append(rows, outboxRow(ob))
			}
			return printJob(cmd, j, rows...)
		},
	}
	return cmd
}

// printJob prints one record as aligned "field value" lines, then rows ("field\tvalue").
func printJob(cmd *cobra.Command, j status.Job, rows ...string) error {
	col := colourFor(cmd.OutOrStdout())
	tw := newTable(cmd.OutOrStdout())
	state := col.state(string(j.State))
	if j.Expired {
		state += " (expired: the record no longer counts)"
	}
	fmt.Fprintf(tw, "job id\t%s\n", orDash(j.JobID))
	fmt.Fprintf(tw, "kind\t%s\n", j.Kind)
	fmt.Fprintf(tw, "key\t%s\n", j.Key)
	fmt.Fprintf(tw, "state\t%s\n", state)
	fmt.Fprintf(tw, "reason\t%s\n", orDash(j.Reason))
	fmt.Fprintf(tw, "runs\t%d\n", j.Runs)
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(j.LastError, "\t", "    "), "\n"), "\n")
	fmt.Fprintf(tw, "last error\t%s\n", orDash(lines[0]))
	for _, l := range lines[1:] {
		fmt.Fprintf(tw, "\t%s\n", l)
	}
	fmt.Fprintf(tw, "first run\t%s\n", showTime(j.FirstAttemptAt))
	fmt.Fprintf(tw, "last run\t%s\n", showTime(j.LastAttemptAt))
	if j.State == idempotency.StateRunning {
		fmt.Fprintf(tw, "lease until\t%s\n", showTime(j.LeaseUntil))
	}
	if !j.RunAt.IsZero() {
		fmt.Fprintf(tw, "run at\t%s\n", showTime(j.RunAt))
	}
	if j.Result != "" {
		fmt.Fprintf(tw, "result\t%s\n", j.Result)
	}
	fmt.Fprintf(tw, "updated\t%s\n", showTime(j.UpdatedAt))
	fmt.Fprintf(tw, "expires\t%s\n", showTime(j.ExpiresAt))
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}
