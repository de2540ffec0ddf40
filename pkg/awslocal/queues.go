package awslocal

import (
	"context"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/queues"
)

// ProvisionQueues provisions the default queue of the stack opts describes (opts.Queue is
// ignored) and one queue per spec beside it, each with its own DLQ and redrive policy (a spec's
// visibility, max-receive and fifo override opts'; a spec named queues.DefaultName sets the
// default queue's), and returns them as a queue set in the order: the specs' queues as given,
// with the default queue first unless a spec names it. The weights of the specs become the
// set's. CreateQueue is idempotent for equal attributes, so provisioning again finds the
// queues.
func ProvisionQueues(ctx context.Context, client SQSProvisioner, opts StackOptions, specs ...queues.Spec) (*queues.Set, []*Stack, error) {
	def := queues.Spec{Name: queues.DefaultName, Weight: queues.DefaultWeight}
	ordered := []queues.Spec{}
	hasDefault := false
	for _, sp := range specs {
		if sp.Name == queues.DefaultName {
			hasDefault = true
		}
	}
	if !hasDefault {
		ordered = append(ordered, def)
	}
	ordered = append(ordered, specs...)
	var qs []queues.Queue
	var stacks []*Stack
	seen := map[string]bool{}
	for _, sp := range ordered {
		if seen[sp.Name] {
			return nil, nil, fmt.Errorf("awslocal: %w: two queues are named %q", queues.ErrInvalid, sp.Name)
		}
		seen[sp.Name] = true
		o := opts
		o.Queue = sp.Name
		o.FIFO = opts.FIFO || sp.FIFO
		if sp.Visibility > 0 {
			o.VisibilityTimeout = int(sp.Visibility / time.Second)
		}
		if sp.MaxReceiveCount > 0 {
			o.MaxReceiveCount = sp.MaxReceiveCount
		}
		st, err := Provision(ctx, client, o)
		if err != nil {
			return nil, nil, err
		}
		stacks = append(stacks, st)
		qs = append(qs, queues.Queue{Name: sp.Name, URL: st.QueueURL, ARN: st.QueueARN, DLQURL: st.DLQURL, Weight: sp.Weight})
	}
	set, err := queues.New(qs...)
	if err != nil {
		return nil, nil, fmt.Errorf("awslocal: %w", err)
	}
	return set, stacks, nil
}
