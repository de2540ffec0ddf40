package esm_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/flow/esm"
)

// TestControlPausesTheQueuesEventSource: on a backend with the Lambda API, pausing a queue records
// the pause and disables the queue's event source mapping (found by the queue's ARN); resuming
// enables it and clears the record. Another queue's mapping is left alone.
func TestControlPausesTheQueuesEventSource(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	ddb := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table, err := awslocal.ProvisionTable(context.Background(), ddb, awslocal.UniqueName("esm"))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := flow.NewTable(flow.TableConfig{Client: ddb, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	lc := lambda.NewFromConfig(b.Config)
	ctx := context.Background()
	fn := awslocal.UniqueName("worker")
	if _, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(fn), Runtime: lambdatypes.RuntimeProvidedal2023,
		Role: aws.String("arn:aws:iam::000000000000:role/worker"), Handler: aws.String("bootstrap"),
		Code: &lambdatypes.FunctionCode{ZipFile: []byte("PK\x05\x06" + string(make([]byte, 18)))}}); err != nil {
		t.Fatalf("create function: %v", err)
	}
	queue := awslocal.UniqueName("jobs")
	arn := "arn:aws:sqs:us-east-1:000000000000:" + queue
	otherARN := arn + "-other"
	for _, a := range []string{arn, otherARN} {
		if _, err := lc.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: aws.String(fn), EventSourceArn: aws.String(a)}); err != nil {
			t.Fatalf("create mapping: %v", err)
		}
	}
	c := &flow.Control{Table: tbl, Sources: &esm.Switch{Lambda: lc, Function: fn}}
	res, err := c.PauseQueue(ctx, flow.QueueRef{Name: queue, ARN: arn}, flow.Pause{By: "test"})
	if err != nil || !res.Recorded || len(res.Mappings) != 1 {
		t.Fatalf("pause: %+v, %v; want the record and one mapping", res, err)
	}
	if state := mappingState(t, lc, arn); state != "Disabled" && state != "Disabling" {
		t.Errorf("the queue's mapping is %s, want disabled", state)
	}
	if state := mappingState(t, lc, otherARN); state != "Enabled" {
		t.Errorf("another queue's mapping is %s, want it left enabled", state)
	}
	if p, _ := tbl.Pauses(ctx); !p.QueuePaused(queue) {
		t.Errorf("queue not recorded as paused: %+v", p)
	}
	if !flow.QueueGate(tbl, queue, time.Minute)(ctx) {
		t.Error("QueueGate says the paused queue runs")
	}
	res, err = c.ResumeQueue(ctx, flow.QueueRef{Name: queue, ARN: arn})
	if err != nil || !res.Recorded || len(res.Mappings) != 1 {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if state := mappingState(t, lc, arn); state != "Enabled" && state != "Enabling" {
		t.Errorf("after resume the mapping is %s", state)
	}
	if flow.QueueGate(tbl, queue, time.Minute)(ctx) { // a fresh gate reads the table

		t.Error("QueueGate says the resumed queue is paused")
	}
}

func mappingState(t *testing.T, lc *lambda.Client, arn string) string {
	t.Helper()
	out, err := lc.ListEventSourceMappings(context.Background(), &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(arn)})
	if err != nil || len(out.EventSourceMappings) != 1 {
		t.Fatalf("list mappings of %s: %v, %v", arn, out, err)
	}
	return aws.ToString(out.EventSourceMappings[0].State)
}
