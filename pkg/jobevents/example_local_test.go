package jobevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/ddbstream"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobevents"
)

// printingBus prints the events EventBridge accepted (a subscriber would get them from a rule).
type printingBus struct {
	*eventbridge.Client
	done func()
}

func (b printingBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, o ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out, err := b.Client.PutEvents(ctx, in, o...)
	if err == nil {
		for _, e := range in.Entries {
			var ev jobevents.Event
			_ = json.Unmarshal([]byte(aws.ToString(e.Detail)), &ev)
			fmt.Println(aws.ToString(e.DetailType), ev.JobID, ev.PreviousState, "->", ev.State)
		}
		b.done()
	}
	return out, err
}

// Completion events on the embedded emulator: the job table's stream (NEW_AND_OLD_IMAGES) read by
// a ddbstream Poller with the mapping's filter, and the same Publisher the events function runs
// on AWS. The claim is not final and publishes nothing; the finish does.
func Example_local() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	ddb := backend.DynamoDB()
	in := idempotency.TableInput(awslocal.UniqueName("jobs"))
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	created, err := ddb.CreateTable(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	pub, err := jobevents.New(jobevents.Config{EventBridge: printingBus{eventbridge.NewFromConfig(backend.Config), stop}})
	if err != nil {
		log.Fatal(err)
	}
	poll, err := ddbstream.New(ddbstream.Config{
		Streams: dynamodbstreams.NewFromConfig(backend.Config), StreamARN: aws.ToString(created.TableDescription.LatestStreamArn),
		Handler: ddbstream.HandlerFunc(pub.HandleDynamoDB), Filter: jobevents.Filter, ReportBatchItemFailures: true,
		PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}

	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: aws.ToString(in.TableName)})
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: "report.build", Key: "01JOB", JobID: "01JOB", Token: "t",
		Now: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		log.Fatal(err)
	}
	if err := store.Finish(ctx, idempotency.Finish{Kind: "report.build", Key: "01JOB", JobID: "01JOB", Token: "t",
		State: idempotency.StateSucceeded, Now: now.Add(time.Second)}); err != nil {
		log.Fatal(err)
	}
	if err := poll.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// Job Finished 01JOB running -> succeeded
}
