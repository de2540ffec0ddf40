package ddbstream_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/ddbstream"
)

// streamTable creates a table with a NEW_IMAGE stream and returns its name and stream ARN.
func streamTable(t *testing.T, ddb *dynamodb.Client) (string, string) {
	t.Helper()
	name := awslocal.UniqueName("stream")
	desc, err := ddbtable.Create(context.Background(), ddb, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage},
	}, ddbtable.Wait{})
	if err != nil {
		t.Fatal(err)
	}
	return name, aws.ToString(desc.LatestStreamArn)
}

func item(pk string, n string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "n": &ddbtypes.AttributeValueMemberN{Value: n}}
}

// The poller on the emulator: single-item writes reach the handler in order, filtered to inserts,
// with their new images.
func TestEmulatorPollerReadsInserts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	table, streamARN := streamTable(t, ddb)
	var mu sync.Mutex
	var got []string
	p, err := ddbstream.New(ddbstream.Config{
		Streams: dynamodbstreams.NewFromConfig(b.Config), StreamARN: streamARN, Filter: ddbstream.InsertsOnly,
		BatchSize: 2, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: ddbstream.HandlerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range ev.Records {
				got = append(got, r.EventName+":"+r.Change.NewImage["pk"].String()+"="+r.Change.NewImage["n"].Number())
			}
			return events.DynamoDBEventResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	for _, pk := range []string{"a", "b", "c"} {
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(pk, "1")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "2")}); err != nil { // MODIFY
		t.Fatal(err)
	}
	if _, err := ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("d", "1")}); err != nil {
		t.Fatal(err)
	}
	want := "INSERT:a=1 INSERT:b=1 INSERT:c=1 INSERT:d=1"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p.Stats().Records >= 6 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, " ") != want {
		t.Errorf("handler saw %v, want %s", got, want)
	}
	if st := p.Stats(); st.Records != 6 || st.Filtered != 2 {
		t.Errorf("stats %+v: want 6 records read, 2 filtered out", st)
	}
}

// TestEmulatorStreamsProbe records exactly what the embedded emulator's DynamoDB Streams do
// (docs/OUTBOX.md, "The emulator's streams"). Each check names the behaviour; when an emulator
// upgrade changes one, this test fails and the docs must change with it.
func TestEmulatorStreamsProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	st := dynamodbstreams.NewFromConfig(b.Config)
	table, streamARN := streamTable(t, ddb)
	key := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("put", "1")}))
	must(ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("put"), UpdateExpression: aws.String("SET n = :n"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": &ddbtypes.AttributeValueMemberN{Value: "2"}}}))
	must(ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("upsert"), UpdateExpression: aws.String("SET n = :n"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": &ddbtypes.AttributeValueMemberN{Value: "1"}}}))
	must(ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String(table), Item: item("tx-put", "1")}},
		{Update: &ddbtypes.Update{TableName: aws.String(table), Key: key("put"), UpdateExpression: aws.String("SET n = :n"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": &ddbtypes.AttributeValueMemberN{Value: "3"}}}},
	}}))
	must(ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{
		table: {{PutRequest: &ddbtypes.PutRequest{Item: item("batch-put", "1")}}},
	}}))
	must(ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("upsert")}))

	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamARN)})
	if err != nil {
		t.Fatalf("DescribeStream: %v", err)
	}
	sd := desc.StreamDescription
	if sd.StreamStatus != types.StreamStatusEnabled || sd.StreamViewType != types.StreamViewTypeNewImage || len(sd.Shards) != 1 ||
		sd.Shards[0].SequenceNumberRange.EndingSequenceNumber != nil {
		t.Errorf("DescribeStream: want one open shard of an ENABLED NEW_IMAGE stream, got %+v", sd)
	}
	shard := sd.Shards[0].ShardId
	iter := func(typ types.ShardIteratorType, seq string) *string {
		t.Helper()
		in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamARN), ShardId: shard, ShardIteratorType: typ}
		if seq != "" {
			in.SequenceNumber = aws.String(seq)
		}
		out, err := st.GetShardIterator(ctx, in)
		if err != nil {
			t.Fatalf("GetShardIterator %s: %v", typ, err)
		}
		return out.ShardIterator
	}
	first := iter(types.ShardIteratorTypeTrimHorizon, "")
	recs, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: first})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, r := range recs.Records {
		seen = append(seen, string(r.EventName)+":"+r.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value)
		if r.Dynamodb.SizeBytes == nil || *r.Dynamodb.SizeBytes != 100 {
			t.Errorf("SizeBytes = %v: the emulator writes a constant 100", r.Dynamodb.SizeBytes)
		}
	}
	// Gap: TransactWriteItems and BatchWriteItem emit no records (neither tx-put, nor the
	// transaction's update of "put", nor batch-put appear).
	if got, want := strings.Join(seen, " "), "INSERT:put MODIFY:put INSERT:upsert REMOVE:upsert"; got != want {
		t.Errorf("records: got %s, want %s (PutItem, UpdateItem and DeleteItem only)", got, want)
	}
	if len(recs.Records) > 0 && recs.Records[len(recs.Records)-1].Dynamodb.NewImage != nil {
		t.Errorf("a REMOVE record of a NEW_IMAGE stream has a new image")
	}
	if recs.NextShardIterator == nil {
		t.Errorf("GetRecords of an open shard returned no next iterator")
	}
	// Gap: an iterator works once (AWS: until it expires, 15 minutes).
	if _, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: first}); err == nil || !strings.Contains(err.Error(), "ExpiredIteratorException") {
		t.Errorf("reusing an iterator: %v, want ExpiredIteratorException", err)
	}
	// Gap: AFTER_SEQUENCE_NUMBER (and AT_SEQUENCE_NUMBER) read from the start of the shard.
	if len(recs.Records) > 1 {
		after, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter(types.ShardIteratorTypeAfterSequenceNumber, aws.ToString(recs.Records[1].Dynamodb.SequenceNumber))})
		if err != nil || len(after.Records) != len(recs.Records) {
			t.Errorf("AFTER_SEQUENCE_NUMBER: %d records, %v; the emulator returns all %d", len(after.Records), err, len(recs.Records))
		}
	}
	latest, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter(types.ShardIteratorTypeLatest, "")})
	if err != nil || len(latest.Records) != 0 {
		t.Errorf("LATEST: %d records, %v; want none", len(latest.Records), err)
	}
	// Gap: ListStreams is not implemented (the stream ARN comes from DescribeTable).
	if _, err := st.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)}); err == nil || !strings.Contains(err.Error(), "UnknownOperationException") {
		t.Errorf("ListStreams: %v, want UnknownOperationException", err)
	}
	dt, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil || aws.ToString(dt.Table.LatestStreamArn) != streamARN {
		t.Errorf("DescribeTable: LatestStreamArn %v, %v", dt, err)
	}
	// Gap: UpdateTable ignores StreamSpecification (a stream cannot be turned off or on later).
	if _, err := ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(table), StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	dt, _ = ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if dt.Table.StreamSpecification == nil || !aws.ToBool(dt.Table.StreamSpecification.StreamEnabled) {
		t.Errorf("UpdateTable turned the stream off: %+v", dt.Table.StreamSpecification)
	}
}
