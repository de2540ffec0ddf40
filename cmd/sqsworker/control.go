package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/internal/termsafe"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Job control: `cancel` (a waiting job at once, a running one by a request its worker honours)
// and `wait` (for a job's final state), on pkg/status's CancelJob and Wait, which the console
// uses too.

// maxWait bounds --wait and --timeout: a command line waiting longer is better served by a loop.
const maxWait = 12 * time.Hour

// cancelJSON is cancel's --output json document.
type cancelJSON struct {
	// Action is "cancelled" (the job was waiting and is cancelled now), "requested" (it was
	// running: its worker stops it) or "already_requested".
	Action string  `json:"action"`
	Job    jobJSON `json:"job"`
	// Schedule is the deleted one-time schedule of a scheduled job ("" when none).
	Schedule string `json:"schedule,omitempty"`
	// CountedIn is the batch or chain that counted the cancelled scheduled job ("batch <id>",
	// "chain <id> step <n>"; "" when it belongs to neither, or was counted already).
	CountedIn string `json:"counted_in,omitempty"`
	// Final is the job after --wait: its final state, or its state when the wait ended.
	Final *jobJSON `json:"final,omitempty"`
}

func newCancelCmd(g *globals) *cobra.Command {
	var (
		reason string
		wait   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job: a waiting one at once, a running one by asking its worker to stop it",
		Long: `cancel cancels one job of the stack's job table <stack>-jobs.

A job that waits (queued, scheduled, retrying, or running with an expired lease) is
cancelled at once: its deliveries are acknowledged without running (a scheduled job's
one-time schedule is deleted too, and when that job is a batch's child or a chain's step, its
cancellation is counted there, since no delivery will come to count it). A job that is running gets a cancellation request on its
record: its worker notices it within the middleware's CancelCheck (10 seconds by default)
plus about a second, cancels the job's context (context.Cause is a jobs.CancelRequestError),
and when the job returns the job ends cancelled, is not retried, and its message goes to the
DLQ with the reason "cancelled". A job that ignores its context finishes, and its outcome is
recorded as what happened. With --wait the command waits for the job's final state.

JOB is a job id or KIND/KEY, as for 'sqsworker status'. A job that is not in the table, or
that has finished (succeeded, dead, or already cancelled), is an error (exit 1).`,
		Example: `  sqsworker cancel 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker cancel report.build/2026-11 --reason "wrong month" --wait 1m --stack myapp
  sqsworker cancel 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp --output json | jq -r .action`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			kind, key, byKey, err := parseJobArg(args[0])
			if err != nil {
				return err
			}
			if wait < 0 || wait > maxWait {
				return &usageError{fmt.Errorf("--wait %s: want 0 (do not wait) to %s", wait, maxWait)}
			}
			if len(reason) > idempotency.MaxCancelReasonBytes || !utf8.ValidString(reason) {
				return &usageError{fmt.Errorf("--reason: at most %d bytes of UTF-8, got %d", idempotency.MaxCancelReasonBytes, len(reason))}
			}
			ctx := cmd.Context()
			table, tableName, err := openStatus(ctx, g, stack)
			if err != nil {
				return err
			}
			var res status.CancelResult
			if byKey {
				res, err = table.CancelJob(ctx, kind, key, reason)
			} else {
				res, err = table.CancelByID(ctx, args[0], reason)
			}
			if err != nil {
				return cancelError(err, args[0], tableName, byKey)
			}
			var schedule, countedIn string
			if res.Was == idempotency.StateScheduled && res.Job.JobID != "" {
				env, inGroup := scheduledGroupJob(ctx, g, cmd, res.Job.JobID)
				schedule = deleteSchedule(ctx, g, cmd, res.Job.JobID)
				if inGroup {
					countedIn = countCancelledInGroup(ctx, g, cmd, env)
				}
			}
			doc := cancelJSON{Action: "cancelled", Job: toJobJSON(res.Job), Schedule: schedule, CountedIn: countedIn}
			switch {
			case res.AlreadyRequested:
				doc.Action = "already_requested"
			case res.Requested:
				doc.Action = "requested"
			}
			out := cmd.OutOrStdout()
			if !g.json() {
				id := orDash(safeText(res.Job.JobID))
				switch doc.Action {
				case "cancelled":
					fmt.Fprintf(out, "cancelled job %s (%s/%s, was %s): its deliveries are acknowledged without running\n", id,
						res.Job.Kind, safeText(res.Job.Key), res.Was)
					if schedule != "" {
						fmt.Fprintf(out, "deleted its schedule %s\n", schedule)
					}
					if countedIn != "" {
						fmt.Fprintf(out, "counted it cancelled in its %s\n", safeText(countedIn))
					}
				default:
					verb := "requested the cancellation of"
					if res.AlreadyRequested {
						verb = "a cancellation was already requested for"
					}
					fmt.Fprintf(out, "%s running job %s (%s/%s) at %s: its worker stops it within the middleware's CancelCheck (10 s by default) plus about a second\n",
						verb, id, res.Job.Kind, safeText(res.Job.Key), showTime(res.Job.CancelRequestedAt))
				}
			}
			if wait > 0 && res.Job.JobID != "" {
				wctx, cancel := context.WithTimeout(ctx, wait)
				defer cancel()
				j, werr := table.Wait(wctx, res.Job.JobID, status.WaitOptions{})
				if werr == nil || errors.Is(werr, context.DeadlineExceeded) {
					f := toJobJSON(j)
					doc.Final = &f
				}
				if g.json() {
					if err := writeJSON(out, doc); err != nil {
						return err
					}
				} else if werr == nil {
					fmt.Fprintln(out)
					if err := printJob(cmd, j); err != nil {
						return err
					}
				}
				return waitError(werr, res.Job.JobID, wait)
			}
			if g.json() {
				return writeJSON(out, doc)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&reason, "reason", "", fmt.Sprintf("why, kept on the job's record (at most %d bytes)", idempotency.MaxCancelReasonBytes))
	f.DurationVar(&wait, "wait", 0, "then wait up to this long for the job's final state (such as 30s; 0: do not wait)")
	return cmd
}

func newWaitCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait JOB",
		Short: "Wait for a job's final state (succeeded, dead or cancelled) and show its record",
		Long: `wait reads one job of the stack's job table <stack>-jobs until it is succeeded, dead or
cancelled, then prints its record as 'sqsworker status' does (exit 0, whatever the state).
It reads with backoff (a quarter second, growing by half each time, to 5 seconds): about 18
reads in the first minute, then 12 a minute, each half a read unit.

JOB is a job id or KIND/KEY. A job not in the table yet is looked for until --timeout (a job
enqueued without a queued record has none until a worker claims it). When --timeout passes
first, the command prints the job's state then and exits 1.`,
		Example: `  sqsworker wait 01JD5Q2Y7V3M8K4N6P0R2T4W6X --timeout 5m --stack myapp
  sqsworker wait report.build/2026-11 --stack myapp --output json | jq -r .state`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			kind, key, byKey, err := parseJobArg(args[0])
			if err != nil {
				return err
			}
			if timeout <= 0 || timeout > maxWait {
				return &usageError{fmt.Errorf("--timeout %s: want more than 0, at most %s", timeout, maxWait)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			table, tableName, err := openStatus(ctx, g, stack)
			if err != nil {
				return err
			}
			id := args[0]
			if byKey {
				j, err := table.Get(ctx, kind, key)
				if errors.Is(err, status.ErrNotFound) {
					return fmt.Errorf("no job %s with key %q in table %s", kind, key, tableName)
				}
				if err != nil {
					return err
				}
				id = j.JobID
			}
			j, werr := table.Wait(ctx, id, status.WaitOptions{})
			if werr != nil && !(errors.Is(werr, context.DeadlineExceeded) && j.State != "") {
				return waitError(werr, id, timeout)
			}
			if g.json() {
				if err := writeJSON(cmd.OutOrStdout(), toJobJSON(j)); err != nil {
					return err
				}
			} else if err := printJob(cmd, j); err != nil {
				return err
			}
			return waitError(werr, id, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait (at most 12h)")
	return cmd
}

// parseJobArg reads JOB: a job id, or KIND/KEY (byKey).
func parseJobArg(arg string) (kind, key string, byKey bool, err error) {
	kind, key, byKey = strings.Cut(arg, "/")
	switch {
	case byKey && jobs.ValidateKind(kind) != nil:
		return "", "", false, &usageError{fmt.Errorf("JOB %q: KIND/KEY: %v", arg, jobs.ValidateKind(kind))}
	case byKey && key == "":
		return "", "", false, &usageError{fmt.Errorf("JOB %q: KIND/KEY: the key is empty", arg)}
	case !byKey && strings.TrimSpace(arg) == "":
		return "", "", false, &usageError{errors.New("JOB is empty: want a job id or KIND/KEY")}
	}
	return kind, key, byKey, nil
}

// openStatus returns the stack's job table.
func openStatus(ctx context.Context, g *globals, stack string) (*status.Table, string, error) {
	c, err := connect(ctx, g)
	if err != nil {
		return nil, "", err
	}
	refs, err := resolveStack(ctx, c, stack, false, needTable)
	if err != nil {
		return nil, "", err
	}
	t, err := status.New(status.Config{Client: c.ddb, Table: refs.Table})
	return t, refs.Table, err
}

// cancelError says why a cancellation was refused, in the CLI's words.
func cancelError(err error, job, table string, byKey bool) error {
	switch {
	case errors.Is(err, status.ErrInvalid):
		return &usageError{err}
	case errors.Is(err, status.ErrNotFound):
		hint := "a job enqueued without a queued record (producer.Config.Status) has no record until a worker claims it"
		if !byKey {
			hint += "; a job id enqueued in the last second may not be indexed yet: name it as KIND/KEY"
		}
		return fmt.Errorf("no job %s in table %s to cancel (%s): %v", safeText(job), table, hint, err)
	case errors.Is(err, status.ErrFinished):
		return fmt.Errorf("job %s has finished, nothing to cancel: %v", safeText(job), err)
	}
	return err
}

// waitError is the error of a wait that did not see a final state (nil when it did).
func waitError(err error, id string, d time.Duration) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(err, status.ErrNotFound):
		return fmt.Errorf("job %s not found within %s", safeText(id), d)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("job %s did not finish within %s", safeText(id), d)
	}
	return err
}

// scheduledGroupJob reads the job a scheduled job's one-time schedule carries, and reports
// whether its meta names a batch or a chain: its cancellation must then be counted there, since
// the schedule is deleted and no delivery will come to count it. A schedule that cannot be read
// is noted on stderr (the cancel itself has happened).
func scheduledGroupJob(ctx context.Context, g *globals, cmd *cobra.Command, jobID string) (jobs.Envelope, bool) {
	refs, err := openSchedules(ctx, g, cmd)
	if err == nil {
		var js schedule.JobSchedule
		if js, err = refs.client.GetJob(ctx, jobID); err == nil {
			_, inBatch := js.Envelope.Meta[batch.MetaBatch]
			_, inChain := js.Envelope.Meta[batch.MetaChain]
			return js.Envelope, inBatch || inChain
		}
	}
	if !errors.Is(err, schedule.ErrNotFound) {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: its schedule could not be read (%v): if it is a batch's child or a chain's step, 'sqsworker batches repair' or 'chains repair' counts it\n", err)
	}
	return jobs.Envelope{}, false
}

// countCancelledInGroup counts a cancelled scheduled job in its batch or chain
// (batch.Client.RepairJob) and returns what counted it ("" when nothing did).
func countCancelledInGroup(ctx context.Context, g *globals, cmd *cobra.Command, env jobs.Envelope) string {
	client, err := openBatches(cmd, g)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: it was not counted in its batch or chain (%v): 'sqsworker batches repair' or 'chains repair' counts it\n", err)
		return ""
	}
	in, counted, err := client.RepairJob(ctx, env)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: it was not counted in its %s (%v): 'sqsworker batches repair' or 'chains repair' counts it\n", safeText(in), err)
		return ""
	}
	if !counted {
		return ""
	}
	return in
}

// deleteSchedule deletes the one-time schedule of a cancelled scheduled job and returns its
// name ("" when the stack has no schedule group or the delete failed: the firing is then
// acknowledged without running, as the record says cancelled).
func deleteSchedule(ctx context.Context, g *globals, cmd *cobra.Command, jobID string) string {
	refs, err := openSchedules(ctx, g, cmd)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: its schedule was not deleted (%v); its firing is acknowledged without running\n", err)
		return ""
	}
	if err := refs.client.CancelJob(ctx, jobID); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: its schedule was not deleted (%v); its firing is acknowledged without running\n", err)
		return ""
	}
	return schedule.ScheduleName(jobID)
}

// percentText shows a progress fraction as a percentage with at most 2 decimals (stores keep 4
// decimal places of the fraction), rounded so that binary floating point does not show 0.29 as
// 28.999999999999996%.
func percentText(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e4)/100, 'f', -1, 64) + "%"
}

// safeText escapes job data for a terminal (internal/termsafe, as every command does): control
// characters, bidi controls and invalid UTF-8 are shown as Go escapes, so a hostile progress
// message or reason cannot move the cursor or reorder the line.
func safeText(s string) string { return termsafe.Escape(s) }
