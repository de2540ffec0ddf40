package awslocal_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

func TestProvisionQueuesCreatesEachQueueWithItsDLQAndSettings(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	ctx := context.Background()
	client := sqs.NewFromConfig(b.Config)
	name := awslocal.UniqueName("pq")
	specs := []queues.Spec{
		{Name: "critical", Weight: 6, MaxReceiveCount: 30},
		{Name: "bulk", Weight: 1, Visibility: 300e9},
		{Name: "orders", FIFO: true},
	}
	set, stacks, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: name, MaxReceiveCount: 9}, specs...)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Names(), ","); got != "default,critical,bulk,orders" || len(stacks) != 4 {
		t.Fatalf("queues %s (%d stacks), want default first, then the specs", got, len(stacks))
	}
	if set.Default().Name != "default" || !strings.HasSuffix(set.Default().URL, "/"+name+"-jobs") {
		t.Errorf("default queue %+v, want %s-jobs", set.Default(), name)
	}
	for _, tc := range []struct {
		queue, sqsName, dlqName, visibility, maxReceive string
		weight                                          int
	}{
		{"default", name + "-jobs", name + "-jobs-dlq", "30", `"9"`, 1},
		{"critical", name + "-jobs-critical", name + "-jobs-critical-dlq", "30", `"30"`, 6},
		{"bulk", name + "-jobs-bulk", name + "-jobs-bulk-dlq", "300", `"9"`, 1},
		{"orders", name + "-jobs-orders.fifo", name + "-jobs-orders-dlq.fifo", "30", `"9"`, 1},
	} {
		q, err := set.Get(tc.queue)
		if err != nil {
			t.Fatal(err)
		}
		if q.SQSName() != tc.sqsName || queues.NameOf(q.DLQURL) != tc.dlqName || queues.NameOf(q.ARN) != tc.sqsName || q.Weight != tc.weight {
			t.Errorf("queue %s = %+v, want %s with DLQ %s and weight %d", tc.queue, q, tc.sqsName, tc.dlqName, tc.weight)
		}
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if v := out.Attributes["VisibilityTimeout"]; v != tc.visibility {
			t.Errorf("queue %s: VisibilityTimeout %s, want %s", tc.queue, v, tc.visibility)
		}
		if rp := out.Attributes["RedrivePolicy"]; !strings.Contains(rp, tc.dlqName) || !strings.Contains(rp, tc.maxReceive) {
			t.Errorf("queue %s: RedrivePolicy %s, want DLQ %s and maxReceiveCount %s", tc.queue, rp, tc.dlqName, tc.maxReceive)
		}
	}
	again, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: name, MaxReceiveCount: 9}, specs...)
	if err != nil || again.String() != set.String() {
		t.Errorf("provisioning again = %v, %v; want the same queues", again, err)
	}
}

func TestProvisionQueuesRejectsBadSets(t *testing.T) {
	t.Parallel()
	client := sqs.NewFromConfig(awslocaltest.Backend(t).Config)
	ctx := context.Background()
	if _, _, err := awslocal.ProvisionQueues(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("pq")},
		queues.Spec{Name: "bulk"}, queues.Spec{Name: "bulk"}); !errors.Is(err, queues.ErrInvalid) || !strings.Contains(err.Error(), `"bulk"`) {
		t.Errorf("two queues named bulk: %v, want ErrInvalid naming it", err)
	}
	if _, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: "ok", Queue: "Bad"}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("Provision with queue Bad = %v, want the name's error", err)
	}
	long := strings.Repeat("s", 55)
	if _, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: long, Queue: "critical_queue_x", FIFO: true}); err == nil || !strings.Contains(err.Error(), "above SQS's 80") {
		t.Errorf("Provision with a name too long = %v, want the length error", err)
	}
}
