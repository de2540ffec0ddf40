package main

import (
	"errors"
	"fmt"
	"github.com/sqsworker/sqsworker/internal/termsafe"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

func newBatchesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "batches",
		Short: "List, show, cancel and repair batches of jobs",
		Long: `batches works on the batches in the stack's job table <stack>-jobs: sets of jobs
(children) with a callback job that is enqueued once, when every child has finished
(docs/BATCHES.md).

A batch is open (children may be added), sealed (waiting for its children) or done (its
callback is in the outbox, or sent). Its progress counts the children that succeeded, were
dead-lettered and were cancelled; "running" counts the ones not finished yet (queued,
running or retrying).`,
		Example: `  sqsworker batches list --stack myapp
  sqsworker batches show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp --children 20
  sqsworker batches cancel 01JD5Q2Y7V3M8K4N6P0R2T4W6X --reason "album deleted" --stack myapp
  sqsworker batches repair 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBatchesListCmd(g), newBatchesShowCmd(g), newBatchesCancelCmd(g), newBatchesRepairCmd(g))
	return cmd
}

func newChainsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chains",
		Short: "List, show, cancel and repair chains of jobs",
		Long: `chains works on the chains in the stack's job table <stack>-jobs: jobs run one after
another, each step enqueued when the one before it succeeded, with its result
(docs/BATCHES.md). A chain is running, succeeded, failed (a step was dead-lettered: the chain
stopped there) or cancelled.`,
		Example: `  sqsworker chains list --stack myapp
  sqsworker chains show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker chains cancel 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker chains repair 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newChainsListCmd(g), newChainsShowCmd(g), newChainsCancelCmd(g), newChainsRepairCmd(g))
	return cmd
}

// openBatches returns the batch client of the stack's job table (and its outbox table, through
// which a cancel or repair that finishes a batch enqueues the callback).
func openBatches(cmd *cobra.Command, g *globals) (*batch.Client, error) {
	stack, err := g.stackName(cmd)
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	c, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	refs, err := resolveStack(ctx, c, stack, false, needTable)
	if err != nil {
		return nil, err
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: c.ddb, Table: awslocal.OutboxTableName(stack)})
	if err != nil {
		return nil, err
	}
	return batch.New(batch.Config{Client: c.ddb, Table: refs.Table, Outbox: ob})
}

// idArg validates a batch or chain id argument.
func idArg(args []string) (string, error) {
	if err := batch.ValidateID(args[0]); err != nil {
		return "", &usageError{fmt.Errorf("ID: %v", err)}
	}
	return args[0], nil
}

// listFlags are the flags of `batches list` and `chains list`.
type listFlags struct {
	limit  int
	before string
}

func (f *listFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.limit, "limit", 50, "show at most this many, newest first (1-500)")
	cmd.Flags().StringVar(&f.before, "before", "", "show those created before this time (RFC 3339; the last CREATED of the previous page)")
}

func (f *listFlags) query() (batch.ListQuery, error) {
	q := batch.ListQuery{Limit: f.limit}
	if f.limit < 1 || f.limit > 500 {
		return q, &usageError{fmt.Errorf("--limit %d: want 1-500", f.limit)}
	}
	if f.before != "" {
		t, err := time.Parse(time.RFC3339Nano, f.before)
		if err != nil {
			return q, &usageError{fmt.Errorf("--before %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z", f.before)}
		}
		q.Before = t
	}
	return q, nil
}

// batchJSON is a batch in --output json.
type batchJSON struct {
	ID           string   `json:"id"`
	Description  string   `json:"description"`
	State        string   `json:"state"`
	Total        int      `json:"total"`
	Running      int      `json:"running"`
	Succeeded    int      `json:"succeeded"`
	Dead         int      `json:"dead"`
	Cancelled    int      `json:"cancelled"`
	Progress     float64  `json:"progress"`
	Callback     string   `json:"callback"`
	CallbackKind string   `json:"callback_kind"`
	CreatedAt    jsonTime `json:"created_at"`
	SealedAt     jsonTime `json:"sealed_at"`
	DoneAt       jsonTime `json:"done_at"`
	CancelledAt  jsonTime `json:"cancelled_at"`
	CancelReason string   `json:"cancel_reason"`
	ExpiresAt    jsonTime `json:"expires_at"`
	// CounterShards is how many items count the children (1: the batch's own); the counts above
	// are their sums.
	CounterShards int `json:"counter_shards"`
}

func toBatchJSON(i batch.Info) batchJSON {
	return batchJSON{ID: i.ID, Description: i.Description, State: i.State, Total: i.Total, Running: i.Remaining,
		Succeeded: i.Succeeded, Dead: i.Dead, Cancelled: i.Cancelled, Progress: i.Progress(), Callback: i.Callback,
		CallbackKind: i.CallbackKind, CreatedAt: jsonTime(i.CreatedAt), SealedAt: jsonTime(i.SealedAt), DoneAt: jsonTime(i.DoneAt),
		CancelledAt: jsonTime(i.CancelledAt), CancelReason: i.CancelReason, ExpiresAt: jsonTime(i.ExpiresAt),
		CounterShards: i.CounterShards}
}

func newBatchesListCmd(g *globals) *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List batches with their progress, newest first",
		Example: `  sqsworker batches list --stack myapp
  sqsworker batches list --stack myapp --limit 10 --output json | jq '.[] | select(.dead > 0) | .id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query()
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			list, err := bc.List(cmd.Context(), q)
			if err != nil {
				return err
			}
			if g.json() {
				out := make([]batchJSON, 0, len(list))
				for _, i := range list {
					out = append(out, toBatchJSON(i))
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no batches")
				return nil
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tSTATE\tPROGRESS\tTOTAL\tRUNNING\tSUCCEEDED\tDEAD\tCANCELLED\tCALLBACK\tCREATED\tDESCRIPTION")
			for _, i := range list {
				state := i.State
				if !i.CancelledAt.IsZero() {
					state += " (cancelled)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", i.ID, state, progressBar(i.Progress()), i.Total, i.Remaining,
					i.Succeeded, i.Dead, i.Cancelled, orDash(termsafe.Line(i.CallbackKind, 40)), showTime(i.CreatedAt), orDash(termsafe.Line(i.Description, 60)))
			}
			return tw.Flush()
		},
	}
	f.add(cmd)
	return cmd
}

// progressBar draws a share as "[#####-----] 50%".
func progressBar(p float64) string {
	n := int(p*10 + 1e-9)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", 10-n) + "] " + strconv.Itoa(int(p*100+1e-9)) + "%"
}

func newBatchesShowCmd(g *globals) *cobra.Command {
	var children int
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a batch, the children that did not succeed and its children's states",
		Example: `  sqsworker batches show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker batches show album-42 --stack myapp --children 0 --output json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args)
			if err != nil {
				return err
			}
			if children < -1 {
				return &usageError{fmt.Errorf("--children %d: want -1 (all), 0 (none) or more", children)}
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			d, err := bc.Get(cmd.Context(), id, children)
			if errors.Is(err, batch.ErrNotFound) {
				return fmt.Errorf("no batch %s in the stack's job table (never created, or expired)", id)
			}
			if err != nil {
				return err
			}
			if g.json() {
				type childJSON struct {
					ID        string   `json:"id"`
					Kind      string   `json:"kind"`
					Key       string   `json:"key"`
					State     string   `json:"state"`
					Counted   string   `json:"counted"`
					Runs      int      `json:"runs"`
					Reason    string   `json:"reason"`
					LastError string   `json:"last_error"`
					UpdatedAt jsonTime `json:"updated_at"`
				}
				doc := struct {
					batchJSON
					NotSucceeded []string    `json:"not_succeeded"`
					Children     []childJSON `json:"children"`
					MoreChildren bool        `json:"more_children"`
				}{batchJSON: toBatchJSON(d.Info), NotSucceeded: d.NotSucceeded, MoreChildren: d.MoreChildren, Children: []childJSON{}}
				if doc.NotSucceeded == nil {
					doc.NotSucceeded = []string{}
				}
				for _, c := range d.Children {
					doc.Children = append(doc.Children, childJSON{ID: c.ID, Kind: c.Kind, Key: c.Key, State: string(c.State), Counted: c.Counted,
						Runs: c.Runs, Reason: c.Reason, LastError: c.LastError, UpdatedAt: jsonTime(c.UpdatedAt)})
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			w := cmd.OutOrStdout()
			tw := newTable(w)
			fmt.Fprintf(tw, "batch\t%s\n", termsafe.Line(d.ID, 128))
			fmt.Fprintf(tw, "description\t%s\n", orDash(termsafe.Line(d.Description, 200)))
			state := d.State
			if !d.CancelledAt.IsZero() {
				state += fmt.Sprintf(" (cancelled %s: %s)", showTime(d.CancelledAt), orDash(termsafe.Line(d.CancelReason, 120)))
			}
			fmt.Fprintf(tw, "state\t%s\n", state)
			fmt.Fprintf(tw, "progress\t%s of %d: %d succeeded, %d dead, %d cancelled, %d running\n", progressBar(d.Progress()), d.Total,
				d.Succeeded, d.Dead, d.Cancelled, d.Remaining)
			if d.CounterShards > 1 {
				fmt.Fprintf(tw, "counter shards	%d (the counts are their sums)\n", d.CounterShards)
			}
			if d.Callback != "" {
				fmt.Fprintf(tw, "callback\t%s (%s)\n", termsafe.Line(d.Callback, 128), termsafe.Line(d.CallbackKind, 128))
			} else {
				fmt.Fprintf(tw, "callback\t-\n")
			}
			fmt.Fprintf(tw, "created\t%s\nsealed\t%s\ndone\t%s\nexpires\t%s\n", showTime(d.CreatedAt), showTime(d.SealedAt), showTime(d.DoneAt), showTime(d.ExpiresAt))
			if n := d.Dead + d.Cancelled; n > 0 {
				more := ""
				if n > len(d.NotSucceeded) {
					more = fmt.Sprintf(" (and %d more: see the children)", n-len(d.NotSucceeded))
				}
				fmt.Fprintf(tw, "not succeeded\t%s%s\n", strings.Join(d.NotSucceeded, " "), more)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if children == 0 {
				return nil
			}
			fmt.Fprintln(w)
			return printChildren(w, d)
		},
	}
	cmd.Flags().IntVar(&children, "children", 50, "show this many children with their states (-1: all, 0: none)")
	return cmd
}

func printChildren(w io.Writer, d batch.Detail) error {
	col := colourFor(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "CHILD\tKIND\tKEY\tSTATE\tCOUNTED\tRUNS\tREASON\tUPDATED")
	for _, c := range d.Children {
		state := string(c.State)
		if state == "" {
			state = "not started"
		} else {
			state = col.state(state)
		}
		key := c.Key
		if key == c.ID {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", termsafe.Line(c.ID, 128), termsafe.Line(c.Kind, 128), termsafe.Line(key, 60), state,
			orDash(c.Counted), c.Runs, orDash(termsafe.Line(c.Reason, 40)), showTime(c.UpdatedAt))
	}
	if d.MoreChildren {
		fmt.Fprintf(tw, "…\t(more: --children N or -1)\n")
	}
	return tw.Flush()
}

func newBatchesCancelCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a batch: its children that have not started are cancelled; running ones finish",
		Long: `cancel marks the batch cancelled and sealed, and cancels every child that has not
started (queued, scheduled, retrying, or never delivered): their deliveries are acknowledged
without running, and the batch counts them cancelled. Children running now finish their run
and are counted then. When the last child is counted, the callback is enqueued as for any
batch; its summary says the batch was cancelled. Running it again cancels children that are
still unstarted.`,
		Example: `  sqsworker batches cancel 01JD5Q2Y7V3M8K4N6P0R2T4W6X --reason "album deleted" --stack myapp`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args)
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			res, err := bc.Cancel(cmd.Context(), id, reason)
			switch {
			case errors.Is(err, batch.ErrNotFound):
				return fmt.Errorf("no batch %s in the stack's job table", id)
			case errors.Is(err, batch.ErrFinished):
				return fmt.Errorf("batch %s has finished already: nothing to cancel", id)
			case errors.Is(err, batch.ErrInvalid):
				return &usageError{err}
			case err != nil:
				return err
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), struct {
					ID        string `json:"id"`
					Cancelled int    `json:"cancelled"`
					Running   int    `json:"running"`
				}{id, res.Cancelled, res.Running})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "batch %s cancelled: %s cancelled; %s running will finish and be counted\n", id,
				childCount(res.Cancelled), childCount(res.Running))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept on the batch and on each cancelled child's record)")
	return cmd
}

func newBatchesRepairCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "repair ID",
		Short: "Count the children whose outcome was recorded without their batch counting it",
		Long: `repair counts the children of a batch whose job records are final (succeeded, dead,
cancelled) but that the batch did not count: their finishing transaction kept failing
(throttling or conflicts beyond the retries), so the worker recorded the outcome alone and
logged "could not count the job in its batch". Each is counted once; the last one enqueues
the callback.`,
		Example: `  sqsworker batches repair 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args)
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			n, err := bc.Repair(cmd.Context(), id)
			if errors.Is(err, batch.ErrNotFound) {
				return fmt.Errorf("no batch %s in the stack's job table", id)
			}
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), struct {
					ID      string `json:"id"`
					Counted int    `json:"counted"`
				}{id, n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "batch %s: %s counted\n", id, childCount(n))
			return nil
		},
	}
}

// chainJSON is a chain in --output json.
type chainJSON struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	State       string   `json:"state"`
	Length      int      `json:"length"`
	Current     int      `json:"current"`
	CurrentJob  string   `json:"current_job"`
	FailedStep  int      `json:"failed_step"`
	Reason      string   `json:"reason"`
	CreatedAt   jsonTime `json:"created_at"`
	DoneAt      jsonTime `json:"done_at"`
	ExpiresAt   jsonTime `json:"expires_at"`
}

func toChainJSON(c batch.ChainInfo) chainJSON {
	return chainJSON{ID: c.ID, Description: c.Description, State: c.State, Length: c.Steps, Current: c.Current, CurrentJob: c.CurrentJob,
		FailedStep: c.FailedStep, Reason: c.Reason, CreatedAt: jsonTime(c.CreatedAt), DoneAt: jsonTime(c.DoneAt), ExpiresAt: jsonTime(c.ExpiresAt)}
}

func newChainsListCmd(g *globals) *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List chains with their current step, newest first",
		Example: `  sqsworker chains list --stack myapp --output json | jq '.[] | select(.state == "failed")'`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query()
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			list, err := bc.ListChains(cmd.Context(), q)
			if err != nil {
				return err
			}
			if g.json() {
				out := make([]chainJSON, 0, len(list))
				for _, c := range list {
					out = append(out, toChainJSON(c))
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no chains")
				return nil
			}
			col := colourFor(cmd.OutOrStdout())
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tSTATE\tSTEP\tCURRENT JOB\tREASON\tCREATED\tDESCRIPTION")
			for _, c := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", c.ID, col.state(c.State), c.Current, c.Steps, orDash(c.CurrentJob),
					orDash(termsafe.Line(c.Reason, 60)), showTime(c.CreatedAt), orDash(termsafe.Line(c.Description, 60)))
			}
			return tw.Flush()
		},
	}
	f.add(cmd)
	return cmd
}

func newChainsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show a chain and its steps",
		Example: `  sqsworker chains show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args)
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			d, err := bc.GetChain(cmd.Context(), id)
			if errors.Is(err, batch.ErrNotFound) {
				return fmt.Errorf("no chain %s in the stack's job table (never created, or expired)", id)
			}
			if err != nil {
				return err
			}
			if g.json() {
				type stepJSON struct {
					Step      int      `json:"step"`
					JobID     string   `json:"job_id"`
					Kind      string   `json:"kind"`
					Key       string   `json:"key"`
					State     string   `json:"state"`
					Runs      int      `json:"runs"`
					Reason    string   `json:"reason"`
					LastError string   `json:"last_error"`
					Result    string   `json:"result"`
					UpdatedAt jsonTime `json:"updated_at"`
				}
				doc := struct {
					chainJSON
					Steps []stepJSON `json:"steps"`
				}{chainJSON: toChainJSON(d.ChainInfo), Steps: []stepJSON{}}
				for _, s := range d.Steps {
					doc.Steps = append(doc.Steps, stepJSON{Step: s.Step, JobID: s.JobID, Kind: s.Kind, Key: s.Key, State: string(s.State),
						Runs: s.Runs, Reason: s.Reason, LastError: s.LastError, Result: s.Result, UpdatedAt: jsonTime(s.UpdatedAt)})
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			w := cmd.OutOrStdout()
			col := colourFor(w)
			tw := newTable(w)
			fmt.Fprintf(tw, "chain\t%s\ndescription\t%s\nstate\t%s\nstep\t%d of %d\n", termsafe.Line(d.ID, 128), orDash(termsafe.Line(d.Description, 200)),
				col.state(d.State), d.Current, d.ChainInfo.Steps)
			if d.FailedStep > 0 {
				fmt.Fprintf(tw, "stopped at\tstep %d: %s\n", d.FailedStep, termsafe.Line(d.Reason, 200))
			}
			fmt.Fprintf(tw, "created\t%s\ndone\t%s\nexpires\t%s\n\n", showTime(d.CreatedAt), showTime(d.DoneAt), showTime(d.ExpiresAt))
			if err := tw.Flush(); err != nil {
				return err
			}
			tw = newTable(w)
			fmt.Fprintln(tw, "STEP\tJOB\tKIND\tSTATE\tRUNS\tRESULT\tLAST ERROR")
			for _, s := range d.Steps {
				state := string(s.State)
				if state == "" {
					state = "not started"
				} else {
					state = col.state(state)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", s.Step, termsafe.Line(s.JobID, 128), termsafe.Line(s.Kind, 128), state, s.Runs,
					orDash(termsafe.Line(s.Result, 40)), orDash(termsafe.Line(s.LastError, 60)))
			}
			return tw.Flush()
		},
	}
}

func newChainsCancelCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     "cancel ID",
		Short:   "Cancel a chain: no further step is enqueued; a current step that has not started is cancelled",
		Example: `  sqsworker chains cancel 01JD5Q2Y7V3M8K4N6P0R2T4W6X --reason "order refunded" --stack myapp`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args)
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			err = bc.CancelChain(cmd.Context(), id, reason)
			switch {
			case errors.Is(err, batch.ErrNotFound):
				return fmt.Errorf("no chain %s in the stack's job table", id)
			case errors.Is(err, batch.ErrFinished):
				return fmt.Errorf("%v: nothing to cancel", err)
			case errors.Is(err, batch.ErrInvalid):
				return &usageError{err}
			case err != nil:
				return err
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), struct {
					ID    string `json:"id"`
					State string `json:"state"`
				}{id, batch.ChainCancelled})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chain %s cancelled: no further step will be enqueued\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept on the chain)")
	return cmd
}

func newChainsRepairCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "repair ID",
		Short: "Count a chain's current step whose outcome was recorded without the chain counting it",
		Long: `repair counts the current step of a chain when its job record is final (succeeded, dead,
cancelled) but the chain did not count it: the step's finishing transaction kept failing
(throttling or conflicts beyond the retries), so the worker recorded the outcome alone and
logged "could not count the job in its chain", and the chain waits at that step. The step is
counted once: a succeeded step enqueues the next one with its result (or finishes the chain),
a dead or cancelled one stops the chain.`,
		Example: `  sqsworker chains repair 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args)
			if err != nil {
				return err
			}
			bc, err := openBatches(cmd, g)
			if err != nil {
				return err
			}
			counted, err := bc.RepairChain(cmd.Context(), id)
			if errors.Is(err, batch.ErrNotFound) {
				return fmt.Errorf("no chain %s in the stack's job table", id)
			}
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), struct {
					ID      string `json:"id"`
					Counted bool   `json:"counted"`
				}{id, counted})
			}
			if counted {
				fmt.Fprintf(cmd.OutOrStdout(), "chain %s: its current step counted\n", id)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "chain %s: nothing to repair (its current step is counted, or not finished)\n", id)
			}
			return nil
		},
	}
}

// childCount says "1 child" or "n children".
func childCount(n int) string {
	if n == 1 {
		return "1 child"
	}
	return strconv.Itoa(n) + " children"
}
