package ddbstream_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/ddbstream"
)

// A DynamoDB Streams handler, written for Lambda's event source mapping, run by a Poller on the
// embedded emulator: the new orders reach it in stream order, filtered to inserts as a mapping's
// filter criteria would.
func ExampleNew() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	backend, err := awslocal.Shared() // on AWS the event source mapping does this: no poller
	if err != nil {
		log.Fatal(err)
	}
	ddb := backend.DynamoDB()
	table := awslocal.UniqueName("orders")
	created, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	})
	if err != nil {
		log.Fatal(err)
	}

	seen := 0
	handler := ddbstream.HandlerFunc(func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		for _, r := range ev.Records {
			fmt.Println(r.EventName, r.Change.NewImage["id"].String())
			if seen++; seen == 2 {
				stop() // the example's end; a poller runs until its context ends
			}
		}
		return events.DynamoDBEventResponse{}, nil
	})
	p, err := ddbstream.New(ddbstream.Config{
		Streams:      dynamodbstreams.NewFromConfig(backend.Config),
		StreamARN:    aws.ToString(created.TableDescription.LatestStreamArn),
		Handler:      handler,
		Filter:       ddbstream.InsertsOnly, // the mapping's filter: {"eventName":["INSERT"]}
		PollInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"order-1", "order-1", "order-2"} { // the second write is a MODIFY
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
			Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}}); err != nil {
			log.Fatal(err)
		}
	}
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// INSERT order-1
	// INSERT order-2
}
