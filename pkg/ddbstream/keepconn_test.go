package ddbstream_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/ddbstream"
)

// optsProbe records, per operation, the Streams calls made without the per-call option that
// holds the HTTP connection (sdkhttp.KeepConnection).
type optsProbe struct {
	next      ddbstream.StreamsAPI
	mu        sync.Mutex
	calls     map[string]int
	unwrapped map[string]int
}

func (p *optsProbe) see(op string, opts []func(*dynamodbstreams.Options)) {
	o := dynamodbstreams.Options{HTTPClient: &http.Client{}}
	for _, f := range opts {
		f(&o)
	}
	_, plain := o.HTTPClient.(*http.Client)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[op]++
	if plain || sdkhttp.KeepConnection(o.HTTPClient) != o.HTTPClient {
		p.unwrapped[op]++
	}
}

func (p *optsProbe) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	p.see("DescribeStream", opts)
	return p.next.DescribeStream(ctx, in, opts...)
}

func (p *optsProbe) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	p.see("GetShardIterator", opts)
	return p.next.GetShardIterator(ctx, in, opts...)
}

func (p *optsProbe) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	p.see("GetRecords", opts)
	return p.next.GetRecords(ctx, in, opts...)
}

// Every Streams call of the poller carries the option that keeps the SDK from losing a response
// and repeating the call (internal/sdkhttp).
func TestEmulatorPollerKeepsTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	table, streamARN := streamTable(t, ddb)
	probe := &optsProbe{next: dynamodbstreams.NewFromConfig(b.Config), calls: map[string]int{}, unwrapped: map[string]int{}}
	var seen atomic.Int64
	p, err := ddbstream.New(ddbstream.Config{Streams: probe, StreamARN: streamARN, PollInterval: 10 * time.Millisecond,
		StartingPosition: ddbstream.TrimHorizon, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: ddbstream.HandlerFunc(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			seen.Add(int64(len(ev.Records)))
			return events.DynamoDBEventResponse{}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "1")}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for seen.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if seen.Load() == 0 {
		t.Fatal("the record never reached the handler")
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	for _, op := range []string{"DescribeStream", "GetShardIterator", "GetRecords"} {
		if probe.calls[op] == 0 {
			t.Errorf("no %s call: the test does not cover it", op)
		}
	}
	if len(probe.unwrapped) != 0 {
		t.Errorf("calls without sdkhttp.KeepConnection: %v (of %v)", probe.unwrapped, probe.calls)
	}
}
