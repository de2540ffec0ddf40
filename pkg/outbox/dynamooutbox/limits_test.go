package dynamooutbox_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// refusingDB fails the test if any call reaches DynamoDB: the limits are checked before.
type refusingDB struct {
	dynamooutbox.DynamoDBAPI
	t *testing.T
}

func (r refusingDB) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	r.t.Error("TransactWriteItems called with a transaction DynamoDB would refuse")
	return nil, errors.New("refused")
}

type nopSQS struct{}

func (nopSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("no")
}

func (nopSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("no")
}

type blobArgs struct {
	Blob string `json:"blob"`
}

func (blobArgs) Kind() string { return "blob.store" }

func TestLimitsAreCheckedBeforeTheCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, err := dynamooutbox.New(dynamooutbox.Config{Client: refusingDB{t: t}, Table: "app-outbox"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{SQS: nopSQS{}, QueueURL: "https://sqs.us-east-1.amazonaws.com/1/jobs"})
	if err != nil {
		t.Fatal(err)
	}
	small := func() dynamooutbox.Job {
		j, err := o.Prepare(ctx, p, blobArgs{Blob: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	business := func(i int, size int) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}, "data": &types.AttributeValueMemberS{Value: strings.Repeat("d", size)},
		}}}
	}
	var hundred []dynamooutbox.Job
	for range 100 {
		hundred = append(hundred, small())
	}
	// 4 MB: eleven business items of 390 KB and a job.
	var big []types.TransactWriteItem
	for i := range 11 {
		big = append(big, business(i, 390<<10))
	}
	dupKey := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}}
	tests := []struct {
		name  string
		in    []types.TransactWriteItem
		jobs  []dynamooutbox.Job
		limit bool
		want  string
	}{
		{"101 actions", []types.TransactWriteItem{business(0, 1)}, hundred, true, "101 actions, DynamoDB takes at most 100"},
		{"an item over 400 KB", []types.TransactWriteItem{business(0, 400<<10)}, []dynamooutbox.Job{small()}, true, "above DynamoDB's item limit"},
		{"over 4 MB in all", big, []dynamooutbox.Job{small()}, true, "above DynamoDB's limit of 4194304 bytes"},
		{"two actions on one item", []types.TransactWriteItem{
			{Update: &types.Update{TableName: aws.String("orders"), Key: dupKey, UpdateExpression: aws.String("SET a = :a"), ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: "1"}}}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String("orders"), Key: dupKey, ConditionExpression: aws.String("attribute_exists(id)")}},
		}, []dynamooutbox.Job{small()}, false, "actions 0 and 1 both write item"},
		{"an empty action", []types.TransactWriteItem{{}}, []dynamooutbox.Job{small()}, false, "want exactly one of Put, Update, Delete and ConditionCheck"},
		{"no table", []types.TransactWriteItem{{Delete: &types.Delete{Key: dupKey}}}, []dynamooutbox.Job{small()}, false, "no TableName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := o.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tt.in}, tt.jobs...)
			if !errors.Is(err, outbox.ErrInvalid) || errors.Is(err, dynamooutbox.ErrLimit) != tt.limit || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Transact = %v; want ErrInvalid (ErrLimit %v) with %q", err, tt.limit, tt.want)
			}
		})
	}
	// The same job twice in one transaction.
	j := small()
	if _, err := o.Transact(ctx, nil, j, j); !errors.Is(err, outbox.ErrInvalid) || !strings.Contains(err.Error(), "both write item") {
		t.Errorf("a job twice: %v", err)
	}
	// A job whose item cannot fit 400 KB even compressed: random text compresses little.
	raw := make([]byte, 600<<10)
	rand.Read(raw)
	if _, err := o.Prepare(ctx, p, blobArgs{Blob: base64.StdEncoding.EncodeToString(raw)}); !errors.Is(err, dynamooutbox.ErrLimit) || !strings.Contains(err.Error(), "even with the envelope compressed") {
		t.Errorf("Prepare of a 800 KB random job: %v; want ErrLimit", err)
	}
	// A job of 800 KB of compressible text fits: its item is compressed.
	if j, err := o.Prepare(ctx, p, blobArgs{Blob: strings.Repeat("abc", 270_000)}); err != nil || dynamooutbox.ItemSize(j.Items[0].Put.Item) > 64<<10 {
		t.Errorf("Prepare of 800 KB of text: %v (item %d bytes)", err, dynamooutbox.ItemSize(j.Items[0].Put.Item))
	}
	// Over the envelope's 1 MiB: the producer refuses it first.
	if _, err := o.Prepare(ctx, p, blobArgs{Blob: strings.Repeat("a", 1<<20)}); !errors.Is(err, outbox.ErrInvalid) || !errors.Is(err, producer.ErrTooLarge) {
		t.Errorf("Prepare over 1 MiB: %v; want the producer's ErrTooLarge", err)
	}
	// A hand-made message over the limit is refused too.
	if _, err := o.PrepareMessage(producer.Message{ID: "m", Kind: "blob.store", QueueURL: p.QueueURL(), Body: strings.Repeat("a", producer.MaxMessageSize+1)}); !errors.Is(err, dynamooutbox.ErrLimit) {
		t.Errorf("PrepareMessage over the limit: %v", err)
	}
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "abc"},                                                                              // 1 + 3
		"n": &types.AttributeValueMemberN{Value: "12345"},                                                                            // 1 + 4 (3 digit pairs started, + 1)
		"b": &types.AttributeValueMemberB{Value: []byte{1, 2}},                                                                       // 1 + 2
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberBOOL{Value: true}}}, // 1 + 3 + (1+1+1)
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}}},               // 1 + 3 + (1+1)
	}
	if got, want := dynamooutbox.ItemSize(item), 4+5+3+7+6; got != want {
		t.Errorf("ItemSize = %d, want %d", got, want)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []dynamooutbox.Config{
		{Table: "app-outbox"},
		{Client: refusingDB{t: t}, Table: "x"},
		{Client: refusingDB{t: t}, Table: "app-outbox", SweepAfter: -1},
		{Client: refusingDB{t: t}, Table: "app-outbox", CompressAbove: -2},
	} {
		if _, err := dynamooutbox.New(cfg); !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}
