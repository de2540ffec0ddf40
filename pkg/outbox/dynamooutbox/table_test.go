package dynamooutbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// creatingDB is the emulator made to behave as DynamoDB does after CreateTable: the new table is
// CREATING for the first `creating` DescribeTable calls, and until one of them has answered
// ACTIVE, TTL calls and writes on it are refused with ResourceNotFoundException (the emulator's
// tables are ACTIVE at once).
type creatingDB struct {
	*dynamodb.Client
	mu                 sync.Mutex
	creating, describe int
	active             bool
	refused            int
}

func (c *creatingDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := c.Client.DescribeTable(ctx, in, o...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.describe++
	if err == nil && c.describe <= c.creating {
		out.Table.TableStatus = types.TableStatusCreating
	} else if err == nil {
		c.active = true
	}
	return out, err
}

func (c *creatingDB) notActive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active {
		return nil
	}
	c.refused++
	return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Table is being created")}
}

func (c *creatingDB) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	if err := c.notActive(); err != nil {
		return nil, err
	}
	return c.Client.DescribeTimeToLive(ctx, in, o...)
}

func (c *creatingDB) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	if err := c.notActive(); err != nil {
		return nil, err
	}
	return c.Client.UpdateTimeToLive(ctx, in, o...)
}

func (c *creatingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if err := c.notActive(); err != nil {
		return nil, err
	}
	return c.Client.TransactWriteItems(ctx, in, o...)
}

// TestCreateTableWaitsUntilActive: CreateTable of a table that is CREATING for two DescribeTable
// calls returns once it is ACTIVE, with its TTL on and its stream ARN, and a job can be written at
// once (without the wait, the TTL call is refused).
func TestCreateTableWaitsUntilActive(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	db := &creatingDB{Client: b.DynamoDB(), creating: 2}
	name := awslocal.UniqueName("outbox-creating")
	ctx := context.Background()
	arn, err := dynamooutbox.CreateTable(ctx, db, name)
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	if arn == "" || db.refused != 0 || db.describe != 3 {
		t.Errorf("stream ARN %q, %d calls refused, %d DescribeTable calls; want an ARN, 0 and 3", arn, db.refused, db.describe)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: db, Table: name, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(b.Config), QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := ob.Prepare(ctx, p, emailArgs{Order: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Transact(ctx, nil, j); err != nil {
		t.Errorf("a job written right after CreateTable: %v", err)
	}
}
