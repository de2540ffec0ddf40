package idempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// replayingClient sends every UpdateItem twice and answers with the second response, as the
// SDK's retryer does when the first response is lost on the way back.
type replayingClient struct {
	*dynamodb.Client
	replays atomic.Int64
}

func (c *replayingClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := c.Client.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	c.replays.Add(1)
	return c.Client.UpdateItem(ctx, in, o...)
}

func TestRetriedWritesAreRecognisedAsOurOwn(t *testing.T) {
	t.Parallel()
	client := &replayingClient{Client: emulatorDynamoDB(t)}
	store := newDynamoStore(t, client)
	ctx := context.Background()
	now := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: "k", Key: "retried", JobID: "j", Token: "tok-1",
		PayloadHash: "h", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || !res.Claimed || res.Record.Runs != 1 {
		t.Fatalf("retried claim = %+v, %v; want claimed with 1 run", res, err)
	}
	err = store.Finish(ctx, idempotency.Finish{Kind: "k", Key: "retried", Token: "tok-1", State: idempotency.StateSucceeded,
		Now: now.Add(time.Second), ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatalf("retried finish = %v, want nil (the first attempt did it)", err)
	}
	if client.replays.Load() < 2 {
		t.Fatalf("the writes were not replayed")
	}
	// A finish by a claim that really is gone is still refused.
	err = store.Finish(ctx, idempotency.Finish{Kind: "k", Key: "retried", Token: "tok-1", State: idempotency.StateRetrying,
		Now: now.Add(2 * time.Second), ExpiresAt: now.Add(time.Hour)})
	if err != idempotency.ErrLeaseLost {
		t.Errorf("finish without the claim = %v, want ErrLeaseLost", err)
	}
}
