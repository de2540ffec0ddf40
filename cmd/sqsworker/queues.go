package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/queues"
)

// queueFlagHelp describes --queue on up and run.
const queueFlagHelp = "a queue beside the default one, NAME[:weight=N,fifo,visibility=D,max-receive=N] (repeatable; docs/QUEUES.md)"

// parseQueueSpecs reads the --queue flags of up and run.
func parseQueueSpecs(flags []string) ([]queues.Spec, error) {
	var specs []queues.Spec
	seen := map[string]bool{}
	for _, f := range flags {
		sp, err := queues.ParseSpec(f)
		if err != nil {
			why := strings.TrimPrefix(strings.TrimPrefix(err.Error(), queues.ErrInvalid.Error()+": "), "queue ")
			return nil, &usageError{fmt.Errorf("--queue %s", why)}
		}
		if seen[sp.Name] {
			return nil, &usageError{fmt.Errorf("--queue %s is given twice: two queues cannot have one name", sp.Name)}
		}
		seen[sp.Name] = true
		specs = append(specs, sp)
	}
	return specs, nil
}

// stackQueueSet finds the queues of a stack by their names (queues.SQSName): the default queue
// "<stack>-jobs" and every "<stack>-jobs-<name>" whose name is a queue name, with their DLQs when
// they exist (one ListQueues call, paged). URLs are made reachable at the endpoint; the default
// queue comes first, the others in name order.
func stackQueueSet(ctx context.Context, c *awsClients, stack string) (*queues.Set, error) {
	prefix := stack + "-jobs"
	urls := map[string]string{} // SQS name → URL
	p := sqs.NewListQueuesPaginator(c.sqs, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix), MaxResults: aws.Int32(1000)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the queues of stack %s: %w", stack, err)
		}
		for _, u := range out.QueueUrls {
			urls[queues.NameOf(u)] = c.reachable(u)
		}
	}
	var qs []queues.Queue
	add := func(name, sqsName string) {
		fifo := strings.HasSuffix(sqsName, ".fifo")
		q := queues.Queue{Name: name, URL: urls[sqsName], DLQURL: urls[queues.DLQSQSName(stack, name, fifo)]}
		qs = append(qs, q)
	}
	for _, fifo := range []bool{false, true} {
		if n := queues.SQSName(stack, "", fifo); urls[n] != "" {
			add(queues.DefaultName, n)
			break
		}
	}
	var named []string
	for n := range urls {
		rest, ok := strings.CutPrefix(n, prefix+"-")
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, ".fifo")
		if jq := queues.ValidateName(rest); jq == nil && rest != queues.DefaultName {
			named = append(named, n)
		}
	}
	slices.Sort(named)
	for _, n := range named {
		add(strings.TrimSuffix(strings.TrimPrefix(n, prefix+"-"), ".fifo"), n)
	}
	if len(qs) == 0 {
		return nil, c.missing(errNoQueue, "queue "+queues.SQSName(stack, "", false), stack, false)
	}
	return queues.New(qs...)
}

// missingQueue explains a --queue the stack does not have, naming the ones it has.
func (c *awsClients) missingQueue(ctx context.Context, stack, queue string) error {
	have := "none"
	if set, err := stackQueueSet(ctx, c, stack); err == nil {
		have = strings.Join(set.Names(), ", ")
	}
	how := fmt.Sprintf("`sqsworker up --stack %s --queue %s --endpoint %s`", stack, queue, c.where)
	if !c.local {
		how = "the CDK stack's Props.Queues (infra/README.md)"
	}
	return fmt.Errorf("stack %s has no queue %q on %s (its queues: %s); create it with %s", stack, queue, c.where, have, how)
}

// queueRowJSON is one queue of `sqsworker queues --output json`: every key is always present
// (counts are null when they could not be read).
type queueRowJSON struct {
	Name              string `json:"name"`
	SQSName           string `json:"sqs_name"`
	URL               string `json:"url"`
	FIFO              bool   `json:"fifo"`
	Default           bool   `json:"default"`
	Visible           *int   `json:"visible"`
	InFlight          *int   `json:"in_flight"`
	Delayed           *int   `json:"delayed"`
	VisibilityTimeout *int   `json:"visibility_timeout_seconds"`
	MaxReceiveCount   *int   `json:"max_receive_count"`
	DLQName           string `json:"dlq_name"`
	DLQURL            string `json:"dlq_url"`
	DLQVisible        *int   `json:"dlq_visible"`
	Error             string `json:"error"`
}

// queueRow reads one queue's attributes and its DLQ's depth (two GetQueueAttributes calls).
func queueRow(ctx context.Context, c *awsClients, q queues.Queue, isDefault bool) queueRowJSON {
	row := queueRowJSON{Name: q.Name, SQSName: q.SQSName(), URL: q.URL, FIFO: q.FIFO(), Default: isDefault,
		DLQName: queues.NameOf(q.DLQURL), DLQURL: q.DLQURL}
	num := func(attrs map[string]string, name sqstypes.QueueAttributeName) *int {
		if n, err := strconv.Atoi(attrs[string(name)]); err == nil {
			return &n
		}
		return nil
	}
	out, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed, sqstypes.QueueAttributeNameVisibilityTimeout,
		sqstypes.QueueAttributeNameRedrivePolicy,
	}})
	if err != nil {
		row.Error = oneLine(err.Error(), 200)
		return row
	}
	row.Visible = num(out.Attributes, sqstypes.QueueAttributeNameApproximateNumberOfMessages)
	row.InFlight = num(out.Attributes, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	row.Delayed = num(out.Attributes, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)
	row.VisibilityTimeout = num(out.Attributes, sqstypes.QueueAttributeNameVisibilityTimeout)
	var rp struct {
		Target string      `json:"deadLetterTargetArn"`
		Max    json.Number `json:"maxReceiveCount"`
	}
	if p := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]; p != "" && json.Unmarshal([]byte(p), &rp) == nil {
		if n, err := rp.Max.Int64(); err == nil {
			m := int(n)
			row.MaxReceiveCount = &m
		}
		if row.DLQName == "" && rp.Target != "" {
			row.DLQName = queues.NameOf(rp.Target)
			if u, err := queueURL(ctx, c, row.DLQName); err == nil {
				row.DLQURL = c.reachable(u)
			}
		}
	}
	if row.DLQURL == "" {
		return row
	}
	dout, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(row.DLQURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		row.Error = oneLine(err.Error(), 200)
		return row
	}
	row.DLQVisible = num(dout.Attributes, sqstypes.QueueAttributeNameApproximateNumberOfMessages)
	return row
}

func newQueuesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "queues",
		Short: "One row per queue of a stack: its depth, its dead letters, its settings",
		Long: `queues lists the queues of a stack (the default queue <stack>-jobs and each named queue
<stack>-jobs-<name>, created by 'up --queue' or the CDK stack's Props.Queues): for each, the
messages waiting (visible), being handled (in flight) and delayed, its DLQ's depth, its
visibility timeout and its redrive budget (maxReceiveCount). The counts are SQS's
approximate ones. The other commands take --queue NAME to work on one of them (enqueue, dlq).`,
		Example: `  sqsworker queues --stack myapp
  sqsworker queues --stack myapp --output json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := connect(ctx, g)
			if err != nil {
				return err
			}
			set, err := stackQueueSet(ctx, c, stack)
			if err != nil {
				return err
			}
			rows := make([]queueRowJSON, set.Len())
			def := set.Default().Name
			for i, q := range set.All() {
				rows[i] = queueRow(ctx, c, q, q.Name == def)
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), struct {
					Stack  string         `json:"stack"`
					Queues []queueRowJSON `json:"queues"`
				}{stack, rows})
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "QUEUE\tSQS NAME\tVISIBLE\tIN FLIGHT\tDELAYED\tDLQ\tVISIBILITY\tMAX RECEIVE")
			var failed []string
			for _, r := range rows {
				name := r.Name
				if r.Default && name != queues.DefaultName {
					name += " (default)"
				}
				vis := "-"
				if r.VisibilityTimeout != nil {
					vis = strconv.Itoa(*r.VisibilityTimeout) + "s"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.SQSName, count(r.Visible), count(r.InFlight), count(r.Delayed),
					count(r.DLQVisible), vis, count(r.MaxReceiveCount))
				if r.Error != "" {
					failed = append(failed, r.Name+": "+r.Error)
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(failed) > 0 {
				return errors.New("could not read every queue:\n  " + strings.Join(failed, "\n  "))
			}
			return nil
		},
	}
}

// count shows a count, "-" when unknown.
func count(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}
