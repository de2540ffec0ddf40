package status_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// List the dead jobs of a kind, page by page, then look one up and cancel another. The example
// runs on the embedded emulator; the worker's idempotency store writes the records, as it does
// in production.
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(backend.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	// The job table (idempotency.TableInput), created and waited for until it is ACTIVE, with TTL.
	table, err := awslocal.ProvisionTable(ctx, client, awslocal.UniqueName("example"))
	if err != nil {
		log.Fatal(err)
	}

	// What the worker records: three jobs that ran out of attempts, one still retrying.
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	for i, key := range []string{"order-40", "order-41", "order-42", "order-43"} {
		at := now.Add(time.Duration(i) * time.Second)
		if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: "email.send", Key: key, JobID: "job-" + key,
			Token: "t", Now: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(14 * 24 * time.Hour)}); err != nil {
			log.Fatal(err)
		}
		state, reason := idempotency.StateDead, "exhausted"
		if key == "order-43" {
			state, reason = idempotency.StateRetrying, ""
		}
		if err := store.Finish(ctx, idempotency.Finish{Kind: "email.send", Key: key, Token: "t", State: state,
			Error: "smtp: 550 mailbox unavailable", Reason: reason, Now: at, ExpiresAt: at.Add(14 * 24 * time.Hour)}); err != nil {
			log.Fatal(err)
		}
	}

	jobs, err := status.New(status.Config{Client: client, Table: table})
	if err != nil {
		log.Fatal(err)
	}
	q := status.ListQuery{State: idempotency.StateDead, Kind: "email.send", Limit: 2}
	for {
		page, err := jobs.List(ctx, q)
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range page.Jobs {
			fmt.Println(j.Key, j.State, j.Reason, j.Runs, j.LastError)
		}
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}

	j, err := jobs.GetByID(ctx, "job-order-41")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job-order-41 is", j.Kind, j.Key, j.State)

	if err := jobs.Cancel(ctx, "email.send", "order-43", time.Time{}, "customer left"); err != nil {
		log.Fatal(err)
	}
	j, err = jobs.Get(ctx, "email.send", "order-43")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.Key, j.State, j.Reason)
	// Output:
	// order-42 dead exhausted 1 smtp: 550 mailbox unavailable
	// order-41 dead exhausted 1 smtp: 550 mailbox unavailable
	// order-40 dead exhausted 1 smtp: 550 mailbox unavailable
	// job-order-41 is email.send order-41 dead
	// order-43 cancelled customer left
}
