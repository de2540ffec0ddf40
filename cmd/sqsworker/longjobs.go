package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// cursorJSON is a long job's cursor in JSON output (status, cursor).
type cursorJSON struct {
	// Checkpoint is the number of the job's last checkpoint.
	Checkpoint int64 `json:"checkpoint"`
	// Bytes is the cursor's size; SavedAt when it was saved; AgeMS how long ago, in ms.
	Bytes   int      `json:"bytes"`
	SavedAt jsonTime `json:"saved_at"`
	AgeMS   int64    `json:"age_ms"`
	// Saved reports whether the cursor is still kept (a success or a restart removes it).
	Saved bool `json:"saved"`
	// Object is the S3 object of a cursor larger than the record holds ("" otherwise).
	Object string `json:"object"`
	// Value is the cursor's JSON (sqsworker cursor only; null when none is kept).
	Value json.RawMessage `json:"value,omitempty"`
}

// longJobJSON adds a job's long-job state to jobJSON's keys (status): always present.
type longJobJSON struct {
	Continuations int         `json:"continuations"`
	RunTimeMS     int64       `json:"run_time_ms"`
	Cursor        *cursorJSON `json:"cursor"`
}

func toLongJobJSON(j status.Job, now time.Time) longJobJSON {
	s, _ := longjob.Summarize(j.Record, now)
	out := longJobJSON{Continuations: s.Continuations, RunTimeMS: s.RunTime.Milliseconds()}
	if s.Checkpoints > 0 {
		out.Cursor = &cursorJSON{Checkpoint: s.Checkpoints, Bytes: s.CursorBytes, SavedAt: jsonTime(s.CursorAt),
			AgeMS: s.CursorAge.Milliseconds(), Saved: s.Saved, Object: s.Object}
	}
	return out
}

// longJobRows are the status lines of a long job ("field\tvalue"): its cursor, continuations and
// total run time, when the record has any of them.
func longJobRows(j status.Job, now time.Time) []string {
	s, ok := longjob.Summarize(j.Record, now)
	if !ok {
		return nil
	}
	return []string{
		"cursor\t" + safeText(s.CursorText()),
		fmt.Sprintf("continuations\t%d", s.Continuations),
		"run time\t" + longjob.Age(s.RunTime),
	}
}

func newCursorCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cursor JOB",
		Short: "Show a long job's saved cursor, continuations and total run time",
		Long: `cursor shows where a long job is: the cursor it saved with jobs.Checkpoint (its JSON,
read from S3 when it is kept there), when it was saved, how many times the job was
continued in a new run (its slice ended, or it slept) and how long it ran in total.
A job continues from this cursor after its slice ends, a failure or a crash; a job
that succeeded or restarted has its cursor removed (its number, size and time stay).

JOB is a job id, or KIND/KEY for the job's idempotency key. The cursor is the job's
own data: the text output escapes control characters.`,
		Example: `  sqsworker cursor 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker cursor backfill.orders/2026-11 --stack myapp --output json | jq .cursor.value`,
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
			case errors.Is(err, status.ErrNotFound):
				return fmt.Errorf("no job %s in table %s", args[0], refs.Table)
			case errors.Is(err, status.ErrInvalid):
				return &usageError{err}
			case err != nil:
				return err
			}
			var value []byte
			if j.Cursor.Saved() {
				var objects longjob.CursorObjects
				if j.Cursor.Pointer != "" {
					st, err := payloadStore(ctx, c, g, stack)
					if err != nil {
						return err
					}
					if st != nil {
						objects = st
					}
				}
				if value, err = longjob.LoadCursor(ctx, j.Record, objects); err != nil {
					return err
				}
			}
			now := time.Now()
			if g.json() {
				doc := struct {
					JobID string `json:"job_id"`
					Kind  string `json:"kind"`
					Key   string `json:"key"`
					State string `json:"state"`
					longJobJSON
				}{JobID: j.JobID, Kind: j.Kind, Key: j.Key, State: string(j.State), longJobJSON: toLongJobJSON(j, now)}
				if doc.Cursor != nil && json.Valid(value) {
					doc.Cursor.Value = value
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			s, _ := longjob.Summarize(j.Record, now)
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintf(tw, "job id\t%s\n", orDash(j.JobID))
			fmt.Fprintf(tw, "kind\t%s\n", j.Kind)
			fmt.Fprintf(tw, "key\t%s\n", safeText(j.Key))
			fmt.Fprintf(tw, "state\t%s\n", colourFor(cmd.OutOrStdout()).state(string(j.State)))
			fmt.Fprintf(tw, "cursor\t%s\n", safeText(s.CursorText()))
			fmt.Fprintf(tw, "saved at\t%s\n", showTime(s.CursorAt))
			fmt.Fprintf(tw, "continuations\t%d\n", s.Continuations)
			fmt.Fprintf(tw, "run time\t%s\n", longjob.Age(s.RunTime))
			fmt.Fprintf(tw, "value\t%s\n", orDash(safeText(string(value))))
			return tw.Flush()
		},
	}
	return cmd
}
