package dynamooutbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// WelcomeArgs are the arguments of an "email.welcome" job.
type WelcomeArgs struct {
	To string `json:"to"`
}

// Kind names the job type.
func (WelcomeArgs) Kind() string { return "email.welcome" }

// A sign-up writes the user and enqueues their welcome email in one transaction: both happen,
// or neither. The relay then sends the job to SQS.
func ExampleOutbox_Transact() {
	ctx := context.Background()
	// The embedded emulator stands in for AWS; in production pass dynamodb.NewFromConfig(cfg),
	// sqs.NewFromConfig(cfg) and your stack's names.
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	ddb, sqsClient := backend.DynamoDB(), sqs.NewFromConfig(backend.Config)
	name := awslocal.UniqueName("example")
	stack, err := awslocal.Provision(ctx, sqsClient, awslocal.StackOptions{Name: name})
	if err != nil {
		log.Fatal(err)
	}
	table := awslocal.OutboxTableName(name)
	if _, err := dynamooutbox.CreateTable(ctx, ddb, table); err != nil {
		log.Fatal(err)
	}
	users := name + "-users"
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(users), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("email"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("email"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		log.Fatal(err)
	}
	// DynamoDB creates a table in state CREATING: wait until it is ACTIVE before writing to it.
	if err := dynamodb.NewTableExistsWaiter(ddb, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = time.Second }).
		Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(users)}, 5*time.Minute); err != nil {
		log.Fatal(err)
	}

	p, err := producer.New(producer.Config{SQS: sqsClient, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	signUp := func(email string) error {
		job, err := ob.Prepare(ctx, p, WelcomeArgs{To: email}, producer.WithKey("welcome-"+email))
		if err != nil {
			return err
		}
		// Your business write, with its own condition: a new user only.
		user := types.TransactWriteItem{Put: &types.Put{
			TableName:           aws.String(users),
			Item:                map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: email}},
			ConditionExpression: aws.String("attribute_not_exists(email)"),
		}}
		_, err = ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{user}}, job)
		return err
	}
	fmt.Println("first sign-up:", signUp("ada@example.com"))
	var te *dynamooutbox.TransactionError
	err = signUp("ada@example.com")
	fmt.Println("second sign-up refused by its condition:", errors.As(err, &te) && te.ConditionFailed(0))

	// The relay: in AWS the stream's Lambda and a sweep every minute; here one sweep.
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: ob, Producers: []*producer.Producer{p}})
	if err != nil {
		log.Fatal(err)
	}
	st, err := relay.Drain(ctx)
	fmt.Println("sent:", st.Sent, err)
	// Output:
	// first sign-up: <nil>
	// second sign-up refused by its condition: true
	// sent: 1 <nil>
}
