package awslocal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

func TestProvisionCreatesQueueDLQAndRedrive(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		b := awslocaltest.Backend(t)
		ctx := context.Background()
		client := sqs.NewFromConfig(b.Config)
		name := awslocal.UniqueName("prov")
		st, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name, FIFO: fifo, MaxReceiveCount: 7})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.HasSuffix(st.QueueURL, ".fifo"), fifo; got != want {
			t.Errorf("queue URL %q: fifo suffix %v, want %v", st.QueueURL, got, want)
		}
		if !strings.HasSuffix(st.DLQARN, awslocal.DLQName(name, fifo)) {
			t.Errorf("DLQ ARN %q does not end with %q", st.DLQARN, awslocal.DLQName(name, fifo))
		}
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(st.QueueURL), AttributeNames: []sqstypes.QueueAttributeName{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		rp := out.Attributes["RedrivePolicy"]
		if !strings.Contains(rp, st.DLQARN) || !strings.Contains(rp, `"7"`) {
			t.Errorf("RedrivePolicy = %s, want the DLQ ARN and maxReceiveCount 7", rp)
		}
		// Provision is idempotent: a second call finds the same queues.
		again, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name, FIFO: fifo, MaxReceiveCount: 7})
		if err != nil {
			t.Fatal(err)
		}
		if again.QueueURL != st.QueueURL || again.DLQURL != st.DLQURL {
			t.Errorf("second Provision = %+v, want %+v", again, st)
		}
	}
}

func TestProvisionRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	client := sqs.NewFromConfig(b.Config)
	for _, opts := range []awslocal.StackOptions{
		{Name: ""},
		{Name: "has space"},
		{Name: strings.Repeat("x", 61)},
		{Name: "ok", MaxReceiveCount: 1001},
		{Name: "ok", VisibilityTimeout: 43201},
	} {
		if _, err := awslocal.Provision(context.Background(), client, opts); err == nil {
			t.Errorf("Provision(%+v) succeeded, want an error", opts)
		}
	}
}

func TestProvisionTableIsIdempotentWithTTL(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	stack := awslocal.UniqueName("tbl")
	for range 2 {
		name, err := awslocal.ProvisionTable(context.Background(), ddb, stack)
		if err != nil {
			t.Fatal(err)
		}
		if name != stack+"-jobs" {
			t.Errorf("table name = %q", name)
		}
	}
	d, err := ddb.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(stack + "-jobs")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Table.GlobalSecondaryIndexes); n != 2 {
		t.Errorf("GSIs = %d, want 2", n)
	}
	ttl, err := ddb.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(stack + "-jobs")})
	if err != nil || ttl.TimeToLiveDescription == nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "exp" {
		t.Errorf("TTL = %+v, %v", ttl, err)
	}
}
