package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// listedStates are the states jobs lists: those the by_status index holds.
var listedStates = []idempotency.State{idempotency.StateDead, idempotency.StateRetrying, idempotency.StateScheduled, idempotency.StateCancelled}

// jobsJSON is jobs' --output json document.
type jobsJSON struct {
	State         string    `json:"state"`
	Kind          string    `json:"kind"`
	Jobs          []jobJSON `json:"jobs"`
	NextPageToken string    `json:"next_page_token"`
}

func newJobsCmd(g *globals) *cobra.Command {
	var (
		state, kind, page string
		limit             int
	)
	cmd := &cobra.Command{
		Use:   "jobs --status dead|retrying|scheduled|cancelled",
		Short: "List the jobs in a state that needs attention, newest first",
		Long: `jobs lists the jobs of the stack's job table <stack>-jobs in one state, most recently
updated first: dead (dead-lettered), retrying (failed, waiting for their next attempt),
scheduled (waiting in the scheduler) or cancelled. Other states are not indexed, by design;
look such a job up with 'sqsworker status'.

A listing comes in pages of --limit jobs. When there are more, the last line gives the
token of the next page: pass it with --page (and the same --status and --kind). With
--output json the token is the document's next_page_token ("" on the last page).`,
		Example: `  sqsworker jobs --status dead --stack myapp
  sqsworker jobs --status retrying --kind email.send --limit 20 --stack myapp
  sqsworker jobs --status dead --stack myapp --page eyJ2IjoxLCJzdCI6ImRlYWQi...
  sqsworker jobs --status dead --stack myapp --output json | jq -r '.jobs[].job_id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			q := status.ListQuery{State: idempotency.State(state), Kind: kind, Limit: limit, PageToken: page}
			if err := checkListQuery(q); err != nil {
				return &usageError{err}
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
			res, err := table.List(ctx, q)
			var pe *status.PageTokenError
			switch {
			case errors.As(err, &pe) && pe.OtherListing:
				return &usageError{fmt.Errorf("--page: the token is from another listing: %s; pass the --status and --kind of the command that printed it", pe.Reason)}
			case errors.As(err, &pe):
				return &usageError{fmt.Errorf("--page %s: not a page token printed by 'sqsworker jobs' (damaged or cut short?): copy the whole token from the last line of the previous page", shortToken(page))}
			case errors.Is(err, status.ErrInvalid):
				return &usageError{err}
			}
			if err != nil {
				return err
			}
			if g.json() {
				doc := jobsJSON{State: state, Kind: kind, Jobs: make([]jobJSON, 0, len(res.Jobs)), NextPageToken: res.NextPageToken}
				for _, j := range res.Jobs {
					doc.Jobs = append(doc.Jobs, toJobJSON(j))
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			out := cmd.OutOrStdout()
			what := state + " jobs"
			if kind != "" {
				what = state + " " + kind + " jobs"
			}
			if len(res.Jobs) == 0 {
				fmt.Fprintf(out, "no %s", what)
				if page != "" {
					fmt.Fprint(out, " on this page")
				}
				fmt.Fprintln(out)
			} else {
				col := colourFor(out)
				tw := newTable(out)
				fmt.Fprintf(tw, "JOB ID\tKIND\tKEY\t%s\tRUNS\tREASON\tUPDATED\tLAST ERROR\n", col.state("STATE"))
				for _, j := range res.Jobs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", orDash(j.JobID), orDash(j.Kind), oneLine(j.Key, 40),
						col.state(string(j.State)), j.Runs, orDash(j.Reason), showTime(j.UpdatedAt), orDash(oneLine(j.LastError, 60)))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if res.NextPageToken != "" {
				fmt.Fprintf(out, "\nmore: sqsworker jobs --stack %s --status %s", stack, state)
				if kind != "" {
					fmt.Fprintf(out, " --kind %s", kind)
				}
				if cmd.Flags().Changed("limit") {
					fmt.Fprintf(out, " --limit %d", limit)
				}
				fmt.Fprintf(out, " --page %s\n", res.NextPageToken)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "status", "", "the state to list: dead, retrying, scheduled or cancelled (required)")
	f.StringVar(&kind, "kind", "", "list only jobs of this kind")
	f.IntVar(&limit, "limit", status.DefaultListLimit, fmt.Sprintf("jobs per page, 1-%d", status.MaxListLimit))
	f.StringVar(&page, "page", "", "continue a listing: the token the previous page printed")
	return cmd
}

// shortToken quotes a page token for a message, shortened when long.
func shortToken(tok string) string {
	if r := []rune(tok); len(r) > 24 {
		tok = string(r[:24]) + "…"
	}
	return strconv.Quote(tok)
}

// checkListQuery checks the flags before any AWS call.
func checkListQuery(q status.ListQuery) error {
	names := make([]string, len(listedStates))
	for i, s := range listedStates {
		names[i] = string(s)
	}
	switch {
	case q.State == "":
		return fmt.Errorf("jobs needs --status %s", strings.Join(names, "|"))
	case !idempotency.StatusIndexed(q.State):
		return fmt.Errorf("--status %q: want %s (other states are not indexed; look such a job up with 'sqsworker status')", q.State, strings.Join(names, ", "))
	case q.Limit < 1 || q.Limit > status.MaxListLimit:
		return fmt.Errorf("--limit %d: want 1-%d", q.Limit, status.MaxListLimit)
	}
	if q.Kind != "" {
		if err := jobs.ValidateKind(q.Kind); err != nil {
			return fmt.Errorf("--kind: %v", err)
		}
	}
	return nil
}
