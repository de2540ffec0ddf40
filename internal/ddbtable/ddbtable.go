// Package ddbtable creates DynamoDB tables and waits until they can be used. DynamoDB answers
// CreateTable (and an UpdateTable that adds an index) at once, with the table (or index) in state
// CREATING; until it is ACTIVE, writes and UpdateTimeToLive are refused with a
// ResourceNotFoundException. Every table this module creates goes through Create, which waits.
package ddbtable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API is the part of the DynamoDB client Create uses.
type API interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	dynamodb.DescribeTableAPIClient
}

// Defaults of [Wait].
const (
	DefaultMinDelay = 250 * time.Millisecond
	DefaultMaxDelay = 5 * time.Second
	DefaultMaxWait  = 5 * time.Minute
)

// Wait says how Create and WaitActive poll DescribeTable. The zero value is the default: the
// first check at once, then waits from 250 ms growing (with jitter) to 5 s, for at most 5 minutes
// in all.
type Wait struct {
	// MinDelay and MaxDelay bound the waits between DescribeTable calls. Default to
	// DefaultMinDelay and DefaultMaxDelay.
	MinDelay, MaxDelay time.Duration
	// MaxWait bounds the whole wait. Defaults to DefaultMaxWait.
	MaxWait time.Duration
}

// Create creates the table in describes, or finds it (a ResourceInUseException: it exists, or is
// being created), and waits until the table and every one of its global secondary indexes is
// ACTIVE. optFns are passed to every call.
func Create(ctx context.Context, client API, in *dynamodb.CreateTableInput, w Wait, optFns ...func(*dynamodb.Options)) (*types.TableDescription, error) {
	name := aws.ToString(in.TableName)
	_, err := client.CreateTable(ctx, in, optFns...)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return nil, fmt.Errorf("create table %s: %w", name, err)
	}
	return WaitActive(ctx, client, name, w, optFns...)
}

// WaitActive waits, with the SDK's TableExists waiter, until the table name and every one of its
// global secondary indexes is ACTIVE (the SDK's own check looks at the table alone, and an index
// added by UpdateTable is CREATING for a while in an ACTIVE table), and returns its description.
// A table not found yet is waited for; a table that is being deleted, or an index that is, is an
// error.
func WaitActive(ctx context.Context, client dynamodb.DescribeTableAPIClient, name string, w Wait, optFns ...func(*dynamodb.Options)) (*types.TableDescription, error) {
	if w.MinDelay <= 0 {
		w.MinDelay = DefaultMinDelay
	}
	if w.MaxDelay <= 0 {
		w.MaxDelay = DefaultMaxDelay
	}
	w.MaxDelay = max(w.MaxDelay, w.MinDelay)
	if w.MaxWait <= 0 {
		w.MaxWait = DefaultMaxWait
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = w.MinDelay, w.MaxDelay
		o.ClientOptions = optFns
		o.Retryable = activeRetryable
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, w.MaxWait)
	if err != nil {
		return nil, fmt.Errorf("wait for table %s to be active: %w", name, err)
	}
	return out.Table, nil
}

// activeRetryable is the waiter's check: retry while the table is missing or CREATING/UPDATING,
// or one of its indexes is CREATING/UPDATING; stop with an error on any other status.
func activeRetryable(_ context.Context, _ *dynamodb.DescribeTableInput, out *dynamodb.DescribeTableOutput, err error) (bool, error) {
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return true, nil
		}
		return false, err
	}
	if out == nil || out.Table == nil {
		return true, nil
	}
	t := out.Table
	switch t.TableStatus {
	case types.TableStatusActive:
	case types.TableStatusCreating, types.TableStatusUpdating:
		return true, nil
	default:
		return false, fmt.Errorf("table %s is %s", aws.ToString(t.TableName), t.TableStatus)
	}
	for _, g := range t.GlobalSecondaryIndexes {
		switch g.IndexStatus {
		case types.IndexStatusActive:
		case types.IndexStatusCreating, types.IndexStatusUpdating:
			return true, nil
		default:
			return false, fmt.Errorf("index %s of table %s is %s", aws.ToString(g.IndexName), aws.ToString(t.TableName), g.IndexStatus)
		}
	}
	return false, nil
}
