package awslocal_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

// creatingDB is the emulator made to behave as DynamoDB does after CreateTable: the new table is
// CREATING for the first `creating` DescribeTable calls, and until one of them has answered
// ACTIVE, TTL calls on it are refused with ResourceNotFoundException (the emulator's tables are
// ACTIVE at once).
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

// TestProvisionTableWaitsUntilActive: a table that is CREATING for two DescribeTable calls gets
// its TTL only once it is ACTIVE (without the wait, the TTL call is refused).
func TestProvisionTableWaitsUntilActive(t *testing.T) {
	t.Parallel()
	db := &creatingDB{Client: awslocaltest.Backend(t).DynamoDB(), creating: 2}
	name, err := awslocal.ProvisionTable(context.Background(), db, awslocal.UniqueName("creating"))
	if err != nil {
		t.Fatalf("ProvisionTable: %v", err)
	}
	if db.refused != 0 || db.describe != 3 {
		t.Errorf("%d calls refused before ACTIVE, %d DescribeTable calls; want 0 and 3", db.refused, db.describe)
	}
	ttl, err := db.Client.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil || ttl.TimeToLiveDescription == nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL of %s: %+v, %v; want enabled", name, ttl, err)
	}
}
