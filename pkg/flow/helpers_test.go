package flow_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// newDynamoDB returns a DynamoDB client of the shared emulator and a new job table on it.
func newDynamoDB(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	b := awslocaltest.Backend(t)
	client := dynamodb.NewFromConfig(b.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	name := awslocal.UniqueName("flow")
	if _, err := client.CreateTable(context.Background(), idempotency.TableInput(name)); err != nil {
		t.Fatal(err)
	}
	return client, name
}

// newTable returns a flow table on a new job table of the emulator.
func newTable(t testing.TB) (*flow.Table, *dynamodb.Client, string) {
	t.Helper()
	client, name := newDynamoDB(t)
	tbl, err := flow.NewTable(flow.TableConfig{Client: client, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	return tbl, client, name
}
