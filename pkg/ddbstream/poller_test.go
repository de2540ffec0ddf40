package ddbstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sqsworker/sqsworker/pkg/ddbstream"
)

const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2026-01-01T00:00:00.000"

// fakeStream is one closed shard of records with sequence numbers "1"…"n" (odd ones INSERT,
// even ones MODIFY), read through iterators "pos:<i>".
type fakeStream struct {
	recs []types.Record
}

func newFakeStream(n int) *fakeStream {
	f := &fakeStream{}
	for i := 1; i <= n; i++ {
		name := types.OperationTypeInsert
		if i%2 == 0 {
			name = types.OperationTypeModify
		}
		f.recs = append(f.recs, types.Record{EventName: name, EventID: aws.String("e" + strconv.Itoa(i)), Dynamodb: &types.StreamRecord{
			SequenceNumber: aws.String(strconv.Itoa(i)),
			Keys:           map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(i)}},
			NewImage:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(i)}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(i)}},
		}})
	}
	return f
}

func (f *fakeStream) DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: &types.StreamDescription{Shards: []types.Shard{{ShardId: aws.String("shard-0")}}}}, nil
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String("pos:0")}, nil
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	pos, _ := strconv.Atoi(strings.TrimPrefix(aws.ToString(in.ShardIterator), "pos:"))
	end := min(pos+int(aws.ToInt32(in.Limit)), len(f.recs))
	out := &dynamodbstreams.GetRecordsOutput{Records: f.recs[pos:end]}
	if end < len(f.recs) {
		out.NextShardIterator = aws.String("pos:" + strconv.Itoa(end)) // nil at the end: the shard is closed
	}
	return out, nil
}

// recorder is a handler that logs the sequence numbers of every batch and answers with decide.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	decide  func(call int, seqs []string) (events.DynamoDBEventResponse, error)
}

func (r *recorder) HandleDynamoDB(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var seqs []string
	for _, rec := range ev.Records {
		seqs = append(seqs, rec.Change.SequenceNumber)
		if rec.EventSourceArn != arn || rec.AWSRegion != "eu-west-1" || rec.EventSource != "aws:dynamodb" || rec.Change.NewImage["n"].Number() != rec.Change.SequenceNumber {
			panic(fmt.Sprintf("record not as Lambda builds it: %+v", rec))
		}
	}
	r.mu.Lock()
	r.batches = append(r.batches, seqs)
	call := len(r.batches)
	r.mu.Unlock()
	if r.decide == nil {
		return events.DynamoDBEventResponse{}, nil
	}
	return r.decide(call, seqs)
}

func (r *recorder) got() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func fail(seqs ...string) events.DynamoDBEventResponse {
	var resp events.DynamoDBEventResponse
	for _, s := range seqs {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: s})
	}
	return resp
}

func TestPollerSemantics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		n        int
		cfg      ddbstream.Config
		decide   func(call int, seqs []string) (events.DynamoDBEventResponse, error)
		want     string // the batches, "|" between them
		discards []string
	}{
		{name: "batches in order", n: 7, cfg: ddbstream.Config{BatchSize: 3}, want: "1,2,3|4,5,6|7"},
		{name: "filter drops records before the handler", n: 9, cfg: ddbstream.Config{BatchSize: 3, Filter: ddbstream.InsertsOnly}, want: "1,3,5|7,9"},
		{name: "partial failure retries from the lowest failed record", n: 6, cfg: ddbstream.Config{BatchSize: 6, ReportBatchItemFailures: true, MaximumRetryAttempts: 3},
			decide: func(call int, seqs []string) (events.DynamoDBEventResponse, error) {
				if call == 1 {
					return fail("5", "3"), nil
				}
				return events.DynamoDBEventResponse{}, nil
			}, want: "1,2,3,4,5,6|3,4,5,6"},
		{name: "without ReportBatchItemFailures a response is ignored", n: 3, cfg: ddbstream.Config{BatchSize: 3},
			decide: func(int, []string) (events.DynamoDBEventResponse, error) { return fail("2"), nil }, want: "1,2,3"},
		{name: "an error retries the whole batch, then discards it", n: 4, cfg: ddbstream.Config{BatchSize: 2, MaximumRetryAttempts: 2},
			decide: func(call int, seqs []string) (events.DynamoDBEventResponse, error) {
				if seqs[0] == "1" {
					return events.DynamoDBEventResponse{}, errors.New("boom")
				}
				return events.DynamoDBEventResponse{}, nil
			}, want: "1,2|1,2|1,2|3,4", discards: []string{"1-2/2"}},
		{name: "no retries: discarded at the first failure", n: 2, cfg: ddbstream.Config{BatchSize: 2, ReportBatchItemFailures: true},
			decide: func(int, []string) (events.DynamoDBEventResponse, error) { return fail("2"), nil }, want: "1,2", discards: []string{"2-2/1"}},
		{name: "bisect isolates a poison record", n: 8, cfg: ddbstream.Config{BatchSize: 8, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 1},
			decide: func(call int, seqs []string) (events.DynamoDBEventResponse, error) {
				if slices.Contains(seqs, "6") {
					return events.DynamoDBEventResponse{}, errors.New("poison")
				}
				return events.DynamoDBEventResponse{}, nil
			}, want: "1,2,3,4,5,6,7,8|1,2,3,4|5,6,7,8|5,6|5|6|6|7,8", discards: []string{"6-6/1"}},
		{name: "an unknown itemIdentifier fails the whole batch", n: 2, cfg: ddbstream.Config{BatchSize: 2, ReportBatchItemFailures: true, MaximumRetryAttempts: 1},
			decide: func(call int, seqs []string) (events.DynamoDBEventResponse, error) {
				if call == 1 {
					return fail("nope"), nil
				}
				return events.DynamoDBEventResponse{}, nil
			}, want: "1,2|1,2"},
		{name: "a panic fails the whole batch", n: 2, cfg: ddbstream.Config{BatchSize: 2, MaximumRetryAttempts: 1},
			decide: func(call int, seqs []string) (events.DynamoDBEventResponse, error) {
				if call == 1 {
					panic("kaboom")
				}
				return events.DynamoDBEventResponse{}, nil
			}, want: "1,2|1,2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &recorder{decide: tt.decide}
			var mu sync.Mutex
			var discards []string
			cfg := tt.cfg
			cfg.Streams, cfg.StreamARN, cfg.Handler = newFakeStream(tt.n), arn, h
			cfg.RetryDelay, cfg.PollInterval = time.Millisecond, time.Millisecond
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg.OnFailure = func(_ context.Context, f ddbstream.Failure) {
				mu.Lock()
				defer mu.Unlock()
				if f.Condition != "RetryAttemptsExhausted" || f.StreamARN != arn || f.ShardID != "shard-0" || f.Error == "" {
					t.Errorf("failure record %+v", f)
				}
				discards = append(discards, fmt.Sprintf("%s-%s/%d", f.StartSequenceNumber, f.EndSequenceNumber, f.BatchSize))
			}
			p, err := ddbstream.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			deadline := time.Now().Add(30 * time.Second)
			for p.Stats().ShardsDone == 0 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run = %v", err)
			}
			var got []string
			for _, b := range h.got() {
				got = append(got, strings.Join(b, ","))
			}
			if strings.Join(got, "|") != tt.want {
				t.Errorf("batches\n got  %s\n want %s", strings.Join(got, "|"), tt.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(discards) != fmt.Sprint(tt.discards) && !(len(discards) == 0 && len(tt.discards) == 0) {
				t.Errorf("discarded %v, want %v", discards, tt.discards)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	h := ddbstream.HandlerFunc(func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	})
	for _, cfg := range []ddbstream.Config{
		{StreamARN: arn, Handler: h},
		{Streams: newFakeStream(0), Handler: h},
		{Streams: newFakeStream(0), StreamARN: arn},
		{Streams: newFakeStream(0), StreamARN: arn, Handler: h, BatchSize: 10001},
		{Streams: newFakeStream(0), StreamARN: arn, Handler: h, MaximumRetryAttempts: -2},
		{Streams: newFakeStream(0), StreamARN: arn, Handler: h, StartingPosition: "AT_SEQUENCE_NUMBER"},
	} {
		if _, err := ddbstream.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}
