package awslocal

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

// OutboxTableName returns a stack's transactional outbox table name: "<stack>-outbox".
func OutboxTableName(stack string) string { return stack + "-outbox" }

// OutboxProvisioner is the part of the DynamoDB client ProvisionOutboxTable uses.
type OutboxProvisioner interface {
	TableProvisioner
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// ProvisionOutboxTable creates (or finds) the stack's outbox table (dynamooutbox.TableInput:
// its indexes and a NEW_IMAGE stream) and enables its TTL. It returns the table name and its
// stream's ARN.
func ProvisionOutboxTable(ctx context.Context, client OutboxProvisioner, stack string) (table, streamARN string, err error) {
	if err := validStackName(stack); err != nil {
		return "", "", err
	}
	name := OutboxTableName(stack)
	_, err = client.CreateTable(ctx, dynamooutbox.TableInput(name))
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return "", "", fmt.Errorf("awslocal: create table %s: %w", name, err)
	}
	if err := dynamooutbox.EnableTTL(ctx, client, name); err != nil {
		return "", "", err
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return "", "", fmt.Errorf("awslocal: describe table %s: %w", name, err)
	}
	return name, aws.ToString(out.Table.LatestStreamArn), nil
}
