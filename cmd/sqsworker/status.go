package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

func newStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's record: state, runs, last error, reason, times, a long job's cursor",
		Long: `status shows the record the worker keeps for one job in the stack's job table
<stack>-jobs: its state (queued, scheduled, running, succeeded, retrying, dead, cancelled),
the runs it took, its last error, the reason it was dead-lettered, its times and when the
record expires; for a long job (jobs.Checkpoint), its cursor's size and age, how many
times it was continued and its total run time ('sqsworker cursor' shows the cursor).

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
			kind, key, byKey, err := parseJobArg(args[0])
			if err != nil {
				return err
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
			pl, err := jobPayload(ctx, c, g, stack, j.JobID)
			if err != nil {
				return err
			}
			if g.json() {
				doc := struct {
					jobJSON
					longJobJSON
					Outbox *outboxJSON `json:"outbox,omitempty"`
				}{jobJSON: toJobJSON(j), longJobJSON: toLongJobJSON(j, time.Now())}
				doc.Payload = pl
				if ob != nil {
					o := toOutboxJSON(*ob)
					doc.Outbox = &o
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			rows := longJobRows(j, time.Now())
			if ob != nil {
				rows = append(rows, outboxRow(ob))
			}
			if pl != nil {
				rows = append(rows, fmt.Sprintf("payload\ts3://%s/%s (%d bytes: the job is too large for an SQS message)", safe(pl.Bucket), safe(pl.Key), pl.Size))
			}
			return printJob(cmd, j, rows...)
		},
	}
	return cmd
}

// jobPayload returns the S3 object that holds a job's envelope, when the stack has a payload
// bucket and the object (under the key the producer derives from the job id) still exists: a job
// sent through S3 that has not succeeded yet (the worker deletes the object after success). Nil
// otherwise. One HeadBucket and one HeadObject call.
func jobPayload(ctx context.Context, c *awsClients, g *globals, stack, jobID string) (*dlqPayloadJSON, error) {
	if jobID == "" {
		return nil, nil
	}
	st, err := payloadStore(ctx, c, g, stack)
	if err != nil || st == nil {
		return nil, err
	}
	key := st.Key(jobID)
	out, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(st.Bucket()), Key: aws.String(key)})
	if err != nil {
		var nf *s3types.NotFound
		if errors.As(err, &nf) || apiErrorCode(err) == "NotFound" {
			return nil, nil
		}
		return nil, fmt.Errorf("look up the job's payload s3://%s/%s: %w", st.Bucket(), key, err)
	}
	return &dlqPayloadJSON{Bucket: st.Bucket(), Key: key, Size: aws.ToInt64(out.ContentLength)}, nil
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
	fmt.Fprintf(tw, "kind\t%s\n", safe(j.Kind))
	fmt.Fprintf(tw, "key\t%s\n", safe(j.Key))
	fmt.Fprintf(tw, "state\t%s\n", state)
	fmt.Fprintf(tw, "reason\t%s\n", orDash(j.Reason))
	fmt.Fprintf(tw, "runs\t%d\n", j.Runs)
	lines := textLines(j.LastError)
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
		fmt.Fprintf(tw, "result\t%s\n", safe(j.Result))
	}
	if p := j.Progress; !p.IsZero() {
		fmt.Fprintf(tw, "progress\t%s %s (at %s)\n", percentText(p.Fraction), safeText(p.Message), showTime(p.At))
	}
	if !j.CancelRequestedAt.IsZero() {
		line := showTime(j.CancelRequestedAt)
		if j.CancelReason != "" {
			line += ": " + safeText(j.CancelReason)
		}
		if j.State == idempotency.StateRunning {
			line += " (its worker stops it)"
		}
		fmt.Fprintf(tw, "cancel requested\t%s\n", line)
	}
	fmt.Fprintf(tw, "updated\t%s\n", showTime(j.UpdatedAt))
	fmt.Fprintf(tw, "expires\t%s\n", showTime(j.ExpiresAt))
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}
