package ddbtable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbtable"
)

// scripted answers DescribeTable from a script, one answer per call (the last one repeats), the
// way DynamoDB reports a table being created.
type scripted struct {
	created  int
	inUse    bool
	answers  []func() (*dynamodb.DescribeTableOutput, error)
	describe int
}

func (s *scripted) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	s.created++
	if s.inUse {
		return nil, &types.ResourceInUseException{Message: aws.String("Table already exists")}
	}
	return &dynamodb.CreateTableOutput{}, nil
}

func (s *scripted) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	a := s.answers[min(s.describe, len(s.answers)-1)]
	s.describe++
	return a()
}

func table(status types.TableStatus, indexes ...types.IndexStatus) func() (*dynamodb.DescribeTableOutput, error) {
	return func() (*dynamodb.DescribeTableOutput, error) {
		t := &types.TableDescription{TableName: aws.String("t"), TableStatus: status}
		for i, st := range indexes {
			t.GlobalSecondaryIndexes = append(t.GlobalSecondaryIndexes, types.GlobalSecondaryIndexDescription{IndexName: aws.String(string(rune('a' + i))), IndexStatus: st})
		}
		return &dynamodb.DescribeTableOutput{Table: t}, nil
	}
}

func notFound() (*dynamodb.DescribeTableOutput, error) {
	return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
}

var fast = ddbtable.Wait{MinDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxWait: time.Minute}

func TestCreateWaitsForTheTableAndItsIndexes(t *testing.T) {
	s := &scripted{answers: []func() (*dynamodb.DescribeTableOutput, error){
		notFound,
		table(types.TableStatusCreating, types.IndexStatusCreating),
		table(types.TableStatusCreating, types.IndexStatusCreating),
		table(types.TableStatusActive, types.IndexStatusActive, types.IndexStatusCreating), // an index added later
		table(types.TableStatusActive, types.IndexStatusActive, types.IndexStatusActive),
	}}
	desc, err := ddbtable.Create(context.Background(), s, &dynamodb.CreateTableInput{TableName: aws.String("t")}, fast)
	if err != nil {
		t.Fatal(err)
	}
	if s.created != 1 || s.describe != 5 {
		t.Errorf("%d CreateTable and %d DescribeTable calls, want 1 and 5", s.created, s.describe)
	}
	if desc.TableStatus != types.TableStatusActive || len(desc.GlobalSecondaryIndexes) != 2 {
		t.Errorf("description %+v", desc)
	}
}

func TestCreateFindsAnExistingTable(t *testing.T) {
	s := &scripted{inUse: true, answers: []func() (*dynamodb.DescribeTableOutput, error){table(types.TableStatusActive)}}
	if _, err := ddbtable.Create(context.Background(), s, &dynamodb.CreateTableInput{TableName: aws.String("t")}, fast); err != nil {
		t.Fatal(err)
	}
	if s.describe != 1 {
		t.Errorf("%d DescribeTable calls, want 1", s.describe)
	}
}

func TestWaitActiveFailsOnADeletedTableOrAnError(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func() (*dynamodb.DescribeTableOutput, error)
		want   string
	}{
		{"deleting", table(types.TableStatusDeleting), "is DELETING"},
		{"index deleting", table(types.TableStatusActive, types.IndexStatusDeleting), "index a of table t is DELETING"},
		{"access denied", func() (*dynamodb.DescribeTableOutput, error) { return nil, errors.New("AccessDeniedException") }, "AccessDeniedException"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{answers: []func() (*dynamodb.DescribeTableOutput, error){tt.answer}}
			_, err := ddbtable.WaitActive(context.Background(), s, "t", fast)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestWaitActiveGivesUp(t *testing.T) {
	s := &scripted{answers: []func() (*dynamodb.DescribeTableOutput, error){table(types.TableStatusCreating)}}
	_, err := ddbtable.WaitActive(context.Background(), s, "t", ddbtable.Wait{MinDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxWait: 20 * time.Millisecond})
	if err == nil {
		t.Fatal("a table CREATING for ever was reported active")
	}
}
