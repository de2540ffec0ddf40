package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/flow/esm"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// flowOpts are the flags of pause and resume.
type flowOpts struct {
	queue    string
	function string
	note     string
	by       string
}

func newPauseCmd(g *globals) *cobra.Command {
	o := &flowOpts{}
	cmd := &cobra.Command{
		Use:   "pause KIND | --queue NAME",
		Short: "Pause a kind (its jobs wait, not run) or a whole queue (nothing is received)",
		Long: `pause stops work without losing any.

pause KIND pauses a kind in the stack's job table: every worker with the flow middleware
(the stack's worker function has it) defers the kind's jobs from its next pause check,
within 5 seconds. They are not run, not dead-lettered, spend no attempt and do not count
towards the deferral bound; each comes back every minute or so (a receive and a visibility
change each time) until 'sqsworker resume KIND'. On a FIFO queue pause the queue instead: a
paused kind's FIFO messages are not re-sent, so after maxReceiveCount such receives (about
10 minutes with the defaults) SQS moves them to the DLQ.

pause --queue NAME pauses a whole queue: a queue of the stack as 'sqsworker queues' names
it (default, critical, bulk), or any queue by its SQS name (myapp-jobs-bulk). It records the
pause in the job table, under the queue's SQS name, where pollers (sqsworker run, containers
with poller.Config.Paused) read it and stop receiving, and disables the queue's Lambda event
source mappings through the Lambda API (on AWS: the worker function stops polling the queue,
the stack's other queues go on; batches in flight finish). This needs
lambda:ListEventSourceMappings and lambda:UpdateEventSourceMapping. A paused queue costs
nothing while it waits; prefer it to pausing a kind that has a large backlog.

See docs/FLOW.md.`,
		Example: `  sqsworker pause email.send --note "provider outage" --stack myapp
  sqsworker pause --queue bulk --note "nightly import stuck" --stack myapp`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPause(cmd, g, o, args, true) },
	}
	f := cmd.Flags()
	f.StringVar(&o.queue, "queue", "", "pause this queue of the stack (its name, such as bulk or default, or its SQS name) instead of a kind")
	f.StringVar(&o.function, "function", "", "with --queue: change only this function's event source mappings (default: every mapping of the queue)")
	f.StringVar(&o.note, "note", "", "why, shown by 'sqsworker limits' and the console (at most 512 bytes)")
	f.StringVar(&o.by, "by", "", "who pauses, shown with the pause (default: $USER@host; at most 128 bytes)")
	return cmd
}

func newResumeCmd(g *globals) *cobra.Command {
	o := &flowOpts{}
	cmd := &cobra.Command{
		Use:   "resume KIND | --queue NAME",
		Short: "Resume a paused kind or queue",
		Long: `resume undoes pause: a kind's jobs run again from each worker's next pause check
(within 5 seconds; deferred jobs come back within their deferral, about a minute); a queue's
Lambda event source mappings are enabled again and pollers start receiving.`,
		Example: `  sqsworker resume email.send --stack myapp
  sqsworker resume --queue bulk --stack myapp`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runPause(cmd, g, o, args, false) },
	}
	f := cmd.Flags()
	f.StringVar(&o.queue, "queue", "", "resume this queue of the stack (its name, such as bulk or default, or its SQS name) instead of a kind")
	f.StringVar(&o.function, "function", "", "with --queue: change only this function's event source mappings")
	return cmd
}

// flowControl returns the flow control of a stack's job table, with its queues' Lambda event
// source mappings (the console's Flow page).
func flowControl(c *awsClients, table string) (*flow.Control, error) {
	tbl, err := flow.NewTable(flow.TableConfig{Client: c.ddb, Table: table})
	if err != nil {
		return nil, err
	}
	ctl := &flow.Control{Table: tbl}
	if c.cfg.Region != "" { // clients made without a configuration (sqsworker run's console) have no Lambda
		ctl.Sources = &esm.Switch{Lambda: lambda.NewFromConfig(c.cfg)}
	}
	return ctl, nil
}

// queueGate is the poller's pause check of `sqsworker run`: the queue's pause record in the job
// table (`sqsworker pause --queue`), read at most every 5 s; nil without a table.
func queueGate(ddb flow.DynamoDBAPI, table, queueURL string) func(context.Context) bool {
	if table == "" {
		return nil
	}
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		return nil
	}
	return flow.QueueGate(tbl, queueURL[strings.LastIndexByte(queueURL, '/')+1:], 0)
}

// runPause pauses (pause) or resumes a kind or a queue.
func runPause(cmd *cobra.Command, g *globals, o *flowOpts, args []string, pause bool) error {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	stack, err := g.stackName(cmd)
	if err != nil {
		return err
	}
	switch {
	case len(args) == 1 && o.queue != "":
		return &usageError{fmt.Errorf("%s takes a KIND or --queue NAME, not both", verb)}
	case len(args) == 0 && o.queue == "":
		return &usageError{fmt.Errorf("%s needs a KIND or --queue NAME", verb)}
	case len(args) == 1:
		if err := jobs.ValidateKind(args[0]); err != nil {
			return &usageError{fmt.Errorf("KIND %q: %v", args[0], err)}
		}
	default:
		if err := flow.ValidateQueueName(o.queue); err != nil {
			return &usageError{fmt.Errorf("--queue: %s", strings.TrimPrefix(err.Error(), flow.ErrInvalid.Error()+": "))}
		}
	}
	if o.function != "" && o.queue == "" {
		return &usageError{errors.New("--function goes with --queue")}
	}
	if err := errors.Join(flowText("--note", o.note, flow.MaxPauseNote), flowText("--by", o.by, flow.MaxPauseBy)); err != nil {
		return err
	}
	if o.by == "" {
		o.by = operatorName()
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
	tbl, err := flow.NewTable(flow.TableConfig{Client: c.ddb, Table: refs.Table})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	p := flow.Pause{By: o.by, Note: o.note, At: time.Now()}
	if len(args) == 1 {
		kind := args[0]
		if pause {
			p.Kind = kind
			if err := tbl.PauseKind(ctx, p); err != nil {
				return err
			}
			return writeFlowResult(out, g, map[string]any{"paused": "kind", "kind": kind},
				fmt.Sprintf("paused kind %s: workers defer its jobs from their next pause check (within %s)\n", kind, flow.DefaultPauseCheck))
		}
		was, err := tbl.ResumeKind(ctx, kind)
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("resumed kind %s: its jobs run from each worker's next pause check\n", kind)
		if !was {
			msg = fmt.Sprintf("kind %s was not paused\n", kind)
		}
		return writeFlowResult(out, g, map[string]any{"resumed": "kind", "kind": kind, "was_paused": was}, msg)
	}
	name, u, err := pauseQueue(ctx, c, stack, o.queue)
	if err != nil {
		return err
	}
	arn, err := arnOfQueue(ctx, c, name, u)
	if err != nil {
		return err
	}
	o.queue = name // the pause is recorded under the SQS name, which pollers read
	ctl := &flow.Control{Table: tbl, Sources: &esm.Switch{Lambda: lambda.NewFromConfig(c.cfg), Function: o.function}}
	q := flow.QueueRef{Name: name, ARN: arn}
	var res flow.QueueResult
	if pause {
		res, err = ctl.PauseQueue(ctx, q, p)
	} else {
		res, err = ctl.ResumeQueue(ctx, q)
	}
	var warn string
	if err != nil {
		if !c.local || (pause && !res.Recorded) {
			return err
		}
		// An emulator without the Lambda API: the record is what pollers read.
		warn = fmt.Sprintf("(no Lambda event source mappings changed on %s: %s)\n", c.where, firstLine(err.Error()))
		if !pause {
			if res.Recorded, err = tbl.ResumeQueue(ctx, o.queue); err != nil {
				return err
			}
		}
	}
	var b strings.Builder
	if pause {
		fmt.Fprintf(&b, "paused queue %s: pollers that read the pause stop receiving within their check\n", o.queue)
	} else if res.Recorded {
		fmt.Fprintf(&b, "resumed queue %s\n", o.queue)
	} else {
		fmt.Fprintf(&b, "queue %s had no pause record\n", o.queue)
	}
	if len(res.Mappings) == 0 && warn == "" {
		b.WriteString("no Lambda event source mapping reads this queue\n")
	}
	for _, m := range res.Mappings {
		fmt.Fprintf(&b, "event source mapping %s (%s): %s\n", m.UUID, m.FunctionARN, m.State)
	}
	b.WriteString(warn)
	mappings := make([]map[string]string, 0, len(res.Mappings))
	for _, m := range res.Mappings {
		mappings = append(mappings, map[string]string{"uuid": m.UUID, "function_arn": m.FunctionARN, "state": m.State})
	}
	doc := map[string]any{"queue": o.queue, "recorded": res.Recorded, "event_source_mappings": mappings}
	if pause {
		doc["paused"] = "queue"
	} else {
		doc["resumed"] = "queue"
	}
	return writeFlowResult(out, g, doc, b.String())
}

func writeFlowResult(w io.Writer, g *globals, doc map[string]any, text string) error {
	if g.output == outputJSON {
		return writeJSON(w, doc)
	}
	_, err := io.WriteString(w, text)
	return err
}

// pauseQueue resolves the NAME of pause --queue (and resume --queue) to an SQS queue name and
// URL: a queue of the stack by its name in the stack, as enqueue, dlq and queues name it
// ("critical" is <stack>-jobs-critical, "default" <stack>-jobs; FIFO found by name), else any
// queue by its SQS name ("shop-jobs-critical"). Pauses are recorded under the SQS name: the
// pollers' gates (flow.QueueGate, sqsworker run) read that.
func pauseQueue(ctx context.Context, c *awsClients, stack, queue string) (name, url string, err error) {
	inStack := queues.ValidateName(queue) == nil
	if inStack {
		for _, fifo := range []bool{false, true} {
			n := queues.SQSName(stack, queue, fifo)
			u, err := queueURL(ctx, c, n)
			if err == nil {
				return n, u, nil
			}
			if !errors.Is(err, errNoQueue) {
				return "", "", err
			}
		}
	}
	u, err := queueURL(ctx, c, queue)
	switch {
	case err == nil:
		return queue, u, nil
	case !errors.Is(err, errNoQueue):
		return "", "", err
	case inStack:
		return "", "", c.missingQueue(ctx, stack, queue)
	}
	return "", "", fmt.Errorf("queue %s not found on %s", queue, c.where)
}

// arnOfQueue returns the ARN of the queue named name, whose URL is u.
func arnOfQueue(ctx context.Context, c *awsClients, name, u string) (string, error) {
	out, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.reachable(u)),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("read the ARN of queue %s: %w", name, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// operatorName names who paused, for the record: $USER@host, else "sqsworker".
func operatorName() string {
	name := "sqsworker"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	if len(name) > flow.MaxPauseBy {
		name = name[:flow.MaxPauseBy]
	}
	return name
}

func flowText(flag, s string, max int) error {
	if len(s) > max {
		return &usageError{fmt.Errorf("%s is %d bytes, at most %d", flag, len(s), max)}
	}
	if !utf8.ValidString(s) {
		return &usageError{fmt.Errorf("%s is not valid UTF-8", flag)}
	}
	return nil
}

func newLimitsCmd(g *globals) *cobra.Command {
	var typ, name string
	var max int
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "List the paused kinds and queues, and the flow limits with their holders",
		Long: `limits lists what flow control holds in the stack's job table: the paused kinds and
queues, then every concurrency limit's key with the jobs holding its slots (and when
their leases end; an expired lease is a holder that died, removed by the next job that
asks), and every rate limit's key with the jobs it may start now.

Limits are declared in the worker's code (flow.Config); an item appears here once a job
used it, and disappears a day after its last use. The listing reads the table's by_status
index (no scan): about one read unit per item listed. See docs/FLOW.md.`,
		Example: `  sqsworker limits --stack myapp
  sqsworker limits --type concurrency --name webhook.deliver --stack myapp
  sqsworker limits --stack myapp --output json | jq '.limits[] | select(.holders | length > 0)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			var types []string
			switch typ {
			case "":
				types = []string{flow.TypeConcurrency, flow.TypeRate}
			case flow.TypeConcurrency, flow.TypeRate:
				types = []string{typ}
			default:
				return &usageError{fmt.Errorf("--type %q: want concurrency or rate", typ)}
			}
			if name != "" {
				if err := jobs.ValidateKind(name); err != nil {
					return &usageError{fmt.Errorf("--name %q: a limit's name follows a kind's rules: %v", name, err)}
				}
			}
			if max < 1 || max > 1000 {
				return &usageError{fmt.Errorf("--max %d: want 1-1000", max)}
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
			tbl, err := flow.NewTable(flow.TableConfig{Client: c.ddb, Table: refs.Table})
			if err != nil {
				return err
			}
			pauses, err := tbl.Pauses(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			var limits []flow.LimitState
			truncated := false
			for _, t := range types {
				page, err := tbl.List(ctx, flow.ListQuery{Type: t, Name: name, Limit: max, Now: now})
				if err != nil {
					return err
				}
				limits = append(limits, page.Limits...)
				truncated = truncated || page.NextPageToken != ""
			}
			if g.output == outputJSON {
				return writeJSON(cmd.OutOrStdout(), limitsJSON(pauses, limits, truncated))
			}
			return writeLimits(cmd.OutOrStdout(), pauses, limits, truncated, now)
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "only concurrency or rate limits")
	f.StringVar(&name, "name", "", "only the limit of this name (a limit's name defaults to its kind)")
	f.IntVar(&max, "max", 100, "the most items listed per type, 1-1000")
	return cmd
}

type pauseJSON struct {
	Kind  string   `json:"kind,omitempty"`
	Queue string   `json:"queue,omitempty"`
	At    jsonTime `json:"at"`
	By    string   `json:"by"`
	Note  string   `json:"note"`
}

type holderJSON struct {
	JobID      string   `json:"job_id"`
	LeaseUntil jsonTime `json:"lease_until"`
	Expired    bool     `json:"expired"`
}

type limitJSON struct {
	Type      string       `json:"type"`
	Name      string       `json:"name"`
	Key       string       `json:"key"`
	Limit     int          `json:"limit"`
	Holders   []holderJSON `json:"holders,omitempty"`
	PeriodMS  int64        `json:"period_ms,omitempty"`
	Burst     int          `json:"burst,omitempty"`
	Available *int         `json:"available,omitempty"`
	NextAt    jsonTime     `json:"next_at,omitzero"`
	Created   jsonTime     `json:"created"`
	ExpiresAt jsonTime     `json:"expires_at"`
}

func limitsJSON(p flow.Pauses, ls []flow.LimitState, truncated bool) map[string]any {
	kinds, queues := []pauseJSON{}, []pauseJSON{}
	for _, k := range p.Kinds {
		kinds = append(kinds, pauseJSON{Kind: k.Kind, At: jsonTime(k.At), By: k.By, Note: k.Note})
	}
	for _, q := range p.Queues {
		queues = append(queues, pauseJSON{Queue: q.Queue, At: jsonTime(q.At), By: q.By, Note: q.Note})
	}
	limits := []limitJSON{}
	for _, l := range ls {
		j := limitJSON{Type: l.Type, Name: l.Name, Key: l.Key, Limit: l.Limit, Created: jsonTime(l.Created), ExpiresAt: jsonTime(l.ExpiresAt)}
		if l.Type == flow.TypeConcurrency {
			j.Holders = []holderJSON{}
			for _, h := range l.Holders {
				j.Holders = append(j.Holders, holderJSON{JobID: h.JobID, LeaseUntil: jsonTime(h.LeaseUntil), Expired: h.Expired})
			}
		} else {
			avail := l.Available
			j.PeriodMS, j.Burst, j.Available, j.NextAt = l.Period.Milliseconds(), l.Burst, &avail, jsonTime(l.NextAt)
		}
		limits = append(limits, j)
	}
	return map[string]any{"paused_kinds": kinds, "paused_queues": queues, "limits": limits, "truncated": truncated}
}

func writeLimits(w io.Writer, p flow.Pauses, ls []flow.LimitState, truncated bool, now time.Time) error {
	if len(p.Kinds)+len(p.Queues) == 0 {
		fmt.Fprintln(w, "nothing is paused")
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "PAUSED\tNAME\tSINCE\tBY\tNOTE")
		for _, k := range p.Kinds {
			fmt.Fprintf(tw, "kind\t%s\t%s\t%s\t%s\n", oneLine(k.Kind, 128), showTime(k.At), orDash(k.By), orDash(oneLine(k.Note, 60)))
		}
		for _, q := range p.Queues {
			fmt.Fprintf(tw, "queue\t%s\t%s\t%s\t%s\n", oneLine(q.Queue, 80), showTime(q.At), orDash(q.By), orDash(oneLine(q.Note, 60)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if len(ls) == 0 {
		fmt.Fprintln(w, "no limit has been used in the last day (limits are declared in the worker: flow.Config)")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TYPE\tLIMIT\tKEY\tIN USE\tDETAIL")
	for _, l := range ls {
		key := "(all)"
		if l.Key != "" {
			key = oneLine(l.Key, 40)
		}
		if l.Type == flow.TypeConcurrency {
			live := 0
			var parts []string
			for _, h := range l.Holders {
				id := h.JobID
				if id == "" {
					id = "(hashed id)"
				}
				if h.Expired {
					parts = append(parts, fmt.Sprintf("%s lease ended %s", id, showTime(h.LeaseUntil)))
					continue
				}
				live++
				parts = append(parts, fmt.Sprintf("%s until %s", id, showTime(h.LeaseUntil)))
			}
			detail := strings.Join(parts, "; ")
			fmt.Fprintf(tw, "concurrency\t%s\t%s\t%d of %d\t%s\n", oneLine(l.Name, 128), key, live, l.Limit, orDash(detail))
			continue
		}
		detail := fmt.Sprintf("%d per %s, burst %d", l.Limit, l.Period, l.Burst)
		if l.Available == 0 && !l.NextAt.IsZero() {
			detail += ", next at " + showTime(l.NextAt)
		}
		fmt.Fprintf(tw, "rate\t%s\t%s\t%d of %d free\t%s\n", oneLine(l.Name, 128), key, l.Available, l.Burst, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if truncated {
		fmt.Fprintln(w, "(more items: narrow with --name or --type, or raise --max)")
	}
	return nil
}
