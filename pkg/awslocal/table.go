package awslocal

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TableName returns a stack's job table name: "<stack>-jobs".
func TableName(stack string) string { return stack + "-jobs" }

// TableProvisioner is the part of the DynamoDB client ProvisionTable uses.
type TableProvisioner interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	idempotency.TTLAPI
}

// ProvisionTable creates (or finds) the stack's job table — the idempotency and status records,
// with its two GSIs — waits until the table and its indexes are ACTIVE (DynamoDB creates a table
// in state CREATING and refuses writes and UpdateTimeToLive until then), and enables its TTL. It
// returns the table name.
func ProvisionTable(ctx context.Context, client TableProvisioner, stack string) (string, error) {
	if err := validStackName(stack); err != nil {
		return "", err
	}
	name := TableName(stack)
	if _, err := ddbtable.Create(ctx, client, idempotency.TableInput(name), ddbtable.Wait{}); err != nil {
		return "", fmt.Errorf("awslocal: %w", err)
	}
	if err := idempotency.EnableTTL(ctx, client, name); err != nil {
		return "", err
	}
	return name, nil
}

// DynamoDB returns a DynamoDB client for the backend. Emulators send no response checksums, so
// their validation is turned off for every endpoint that is not AWS's own (*.amazonaws.com):
// otherwise the SDK warns on every call.
func (b *Backend) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(b.Config, awsendpoint.DynamoDB(b.Config))
}

// IsAWSEndpoint reports whether endpoint is one of AWS's own hosts (*.amazonaws.com,
// *.amazonaws.com.cn, *.api.aws, …), as opposed to an emulator or LocalStack.
func IsAWSEndpoint(endpoint string) bool { return awsendpoint.IsAWS(endpoint) }
