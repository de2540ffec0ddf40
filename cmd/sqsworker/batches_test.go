package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/batch"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// TestBatchesAndChains runs `batches list|show|cancel|repair` and `chains list|show|cancel|repair` on
// a stack with a batch (one child succeeded, two not started, a hostile description) and a chain,
// built with the library on the emulator.
func TestBatchesAndChains(t *testing.T) {
	stack := newStack(t, "batch", false)
	ctx := context.Background()
	b := backend(t)
	ddb := b.DynamoDB()
	if _, err := dynamooutbox.CreateTable(ctx, ddb, awslocal.OutboxTableName(stack)); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	client, err := batch.New(batch.Config{Client: ddb, Table: awslocal.TableName(stack), Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqs.NewFromConfig(b.Config).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(b.Config), QueueURL: aws.ToString(q.QueueUrl)})
	if err != nil {
		t.Fatal(err)
	}
	prep := func(kind string) producer.Message {
		m, err := prod.PrepareRaw(ctx, kind, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cb := prep("album.ready")
	bt, err := client.Start(ctx, batch.Spec{ID: "album-42", Callback: &cb, Description: "thumbs \x1b[31mred\u202e"})
	if err != nil {
		t.Fatal(err)
	}
	kids, err := bt.Track(ctx, prep("image.resize"), prep("image.resize"), prep("image.resize"))
	if err != nil {
		t.Fatal(err)
	}
	if err := bt.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	// The first child succeeds through the worker's store.
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	store, err := client.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	meta := map[string]string{batch.MetaBatch: "album-42"}
	k := kids[0]
	if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: k.Kind, Key: k.Key, JobID: k.ID, Token: "t", Now: now, LeaseUntil: now.Add(time.Minute), Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if err := store.Finish(ctx, idempotency.Finish{Kind: k.Kind, Key: k.Key, JobID: k.ID, Token: "t", State: idempotency.StateSucceeded,
		Now: now, ExpiresAt: now.Add(time.Hour), Meta: meta}); err != nil {
		t.Fatal(err)
	}
	chain, err := client.StartChain(ctx, batch.ChainSpec{ID: "order-7"}, prep("order.charge"), prep("order.ship"))
	if err != nil {
		t.Fatal(err)
	}

	tr := newTranscript(t, stack)
	out := tr.must("batches", "list")
	for _, want := range []string{"album-42", "sealed", "[###-------] 33%", `thumbs \x1b[31mred\u202e`} {
		if !strings.Contains(out, want) {
			t.Errorf("batches list: no %q in\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Errorf("batches list printed raw control characters:\n%q", out)
	}
	var list []batchJSON
	if err := json.Unmarshal([]byte(tr.must("batches", "list", "--output", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "album-42" || list[0].Total != 3 || list[0].Running != 2 || list[0].Succeeded != 1 || list[0].Callback != cb.ID {
		t.Errorf("batches list --output json: %+v", list)
	}
	out = tr.must("batches", "show", "album-42")
	for _, want := range []string{"1 succeeded, 0 dead, 0 cancelled, 2 running", kids[0].ID, kids[2].ID, "not started", "succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("batches show: no %q in\n%s", want, out)
		}
	}
	out = tr.must("batches", "cancel", "album-42", "--reason", "album deleted")
	if !strings.Contains(out, "2 children cancelled; 0 children running") {
		t.Errorf("batches cancel: %s", out)
	}
	var shown struct {
		batchJSON
		NotSucceeded []string `json:"not_succeeded"`
		Children     []struct {
			ID, State, Counted string
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(tr.must("batches", "show", "album-42", "--output", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.State != batch.StateDone || shown.Cancelled != 2 || len(shown.NotSucceeded) != 2 || len(shown.Children) != 3 || shown.CancelReason != "album deleted" {
		t.Errorf("batches show --output json after the cancel: %+v", shown)
	}
	if out := tr.must("batches", "repair", "album-42"); !strings.Contains(out, "0 children counted") {
		t.Errorf("batches repair: %s", out)
	}
	if _, code := tr.run("", "batches", "show", "nope"); code != exitError {
		t.Errorf("batches show of a missing batch: exit %d, want %d", code, exitError)
	}
	if _, code := tr.run("", "batches", "show", "a:b"); code != exitUsage {
		t.Errorf("batches show of an invalid id: exit %d, want %d", code, exitUsage)
	}
	if _, code := tr.run("", "batches", "cancel", "album-42"); code != exitError {
		t.Errorf("batches cancel of a finished batch: exit %d, want %d", code, exitError)
	}
	if _, code := tr.run("", "batches", "list", "--limit", "0"); code != exitUsage {
		t.Errorf("batches list --limit 0: exit %d, want %d", code, exitUsage)
	}

	out = tr.must("chains", "list")
	if !strings.Contains(out, chain) || !strings.Contains(out, "1/2") || !strings.Contains(out, "running") {
		t.Errorf("chains list:\n%s", out)
	}
	out = tr.must("chains", "show", chain)
	if !strings.Contains(out, "order.charge") || !strings.Contains(out, "order.ship") || !strings.Contains(out, "not started") {
		t.Errorf("chains show:\n%s", out)
	}
	if out := tr.must("chains", "cancel", chain, "--reason", "refunded"); !strings.Contains(out, "cancelled") {
		t.Errorf("chains cancel: %s", out)
	}
	var ch chainJSON
	if err := json.Unmarshal([]byte(tr.must("chains", "show", chain, "--output", "json")), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.State != batch.ChainCancelled || ch.Reason != "refunded" {
		t.Errorf("chains show --output json after the cancel: %+v", ch)
	}
	if _, code := tr.run("", "chains", "cancel", chain); code != exitError {
		t.Errorf("chains cancel of a cancelled chain: exit %d, want %d", code, exitError)
	}
	if out := tr.must("chains", "repair", chain); !strings.Contains(out, "nothing to repair") {
		t.Errorf("chains repair of a chain whose step was never run: %s", out)
	}
	if _, code := tr.run("", "chains", "repair", "nope"); code != exitError {
		t.Errorf("chains repair of a missing chain: exit %d, want %d", code, exitError)
	}
}

// TestBatchesShardedCounts: `batches list` and `batches show` of a batch whose children are
// counted on 4 counter shards print the counts summed over the shards (6 children on at least 2
// shards: 3 succeeded, 1 dead, 2 running), and its shard count.
func TestBatchesShardedCounts(t *testing.T) {
	stack := newStack(t, "shards", false)
	ctx := context.Background()
	b := backend(t)
	ddb := b.DynamoDB()
	if _, err := dynamooutbox.CreateTable(ctx, ddb, awslocal.OutboxTableName(stack)); err != nil {
		t.Fatal(err)
	}
	ob, err := dynamooutbox.New(dynamooutbox.Config{Client: ddb, Table: awslocal.OutboxTableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	client, err := batch.New(batch.Config{Client: ddb, Table: awslocal.TableName(stack), Outbox: ob})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqs.NewFromConfig(b.Config).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: sqs.NewFromConfig(b.Config), QueueURL: aws.ToString(q.QueueUrl)})
	if err != nil {
		t.Fatal(err)
	}
	// Six children whose first four (the ones that finish) hash to at least two of the 4
	// counter shards (pkg/batch counts a child on idempotency.Shard(its id, 4)): ids are
	// random, so draw again when all four would land on one shard (1 time in 64).
	var children []producer.Message
	for distinct := map[int]bool{}; len(distinct) < 2; {
		children, distinct = children[:0], map[int]bool{}
		for i := range 6 {
			m, err := prod.PrepareRaw(ctx, "image.resize", []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if i < 4 {
				distinct[idempotency.Shard(m.ID, 4)] = true
			}
			children = append(children, m)
		}
	}
	bt, err := client.Start(ctx, batch.Spec{ID: "album-sharded", CounterShards: 4})
	if err != nil {
		t.Fatal(err)
	}
	kids, err := bt.Track(ctx, children...)
	if err != nil {
		t.Fatal(err)
	}
	if err := bt.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	inner, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: ddb, Table: awslocal.TableName(stack)})
	if err != nil {
		t.Fatal(err)
	}
	store, err := client.WrapStore(inner)
	if err != nil {
		t.Fatal(err)
	}
	// Children 0-2 succeed, 3 is dead-lettered, 4 and 5 have not run; 0-3 on at least 2 shards.
	now := time.Now()
	shards := map[string]bool{}
	for i, k := range kids[:4] {
		env, err := jobs.ParseEnvelope(k.Body)
		if err != nil {
			t.Fatal(err)
		}
		shards[env.Meta[batch.MetaBatchShard]] = true
		if _, err := store.Claim(ctx, idempotency.ClaimRequest{Kind: k.Kind, Key: k.Key, JobID: k.ID, Token: "t", Now: now,
			LeaseUntil: now.Add(time.Minute), Meta: env.Meta}); err != nil {
			t.Fatal(err)
		}
		st := idempotency.StateSucceeded
		if i == 3 {
			st = idempotency.StateDead
		}
		if err := store.Finish(ctx, idempotency.Finish{Kind: k.Kind, Key: k.Key, JobID: k.ID, Token: "t", State: st,
			Now: now, ExpiresAt: now.Add(time.Hour), Meta: env.Meta}); err != nil {
			t.Fatal(err)
		}
	}
	if len(shards) < 2 || shards[""] {
		t.Fatalf("the finished children's counter shards: %v, want 2 or more", shards)
	}

	tr := newTranscript(t, stack)
	var list []batchJSON
	if err := json.Unmarshal([]byte(tr.must("batches", "list", "--output", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Total != 6 || list[0].Running != 2 || list[0].Succeeded != 3 || list[0].Dead != 1 ||
		list[0].CounterShards != 4 || list[0].State != batch.StateSealed {
		t.Errorf("batches list --output json: %+v", list)
	}
	if out := tr.must("batches", "list"); !strings.Contains(out, "[######----] 66%") {
		t.Errorf("batches list: no 66%% in\n%s", out)
	}
	out := tr.must("batches", "show", "album-sharded")
	for _, want := range []string{"of 6: 3 succeeded, 1 dead, 0 cancelled, 2 running", "counter shards", "4 (the counts are their sums)", kids[3].ID} {
		if !strings.Contains(out, want) {
			t.Errorf("batches show: no %q in\n%s", want, out)
		}
	}
}
