package ddbstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
)

// StreamsAPI is the part of the DynamoDB Streams client the poller uses;
// *dynamodbstreams.Client implements it.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ StreamsAPI = (*dynamodbstreams.Client)(nil)

// Handler handles a batch of stream records, as a Lambda function behind a DynamoDB event
// source mapping does.
type Handler interface {
	HandleDynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// HandleDynamoDB calls f.
func (f HandlerFunc) HandleDynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return f(ctx, ev)
}

// Starting positions of a shard.
const (
	TrimHorizon = types.ShardIteratorTypeTrimHorizon
	Latest      = types.ShardIteratorTypeLatest
)

// Defaults of Config.
const (
	DefaultBatchSize    = 100
	DefaultPollInterval = 250 * time.Millisecond
	DefaultRetryDelay   = 200 * time.Millisecond
	// MaxBatchSize is Lambda's limit for a DynamoDB event source.
	MaxBatchSize = 10000
)

// Config configures a Poller. Streams, StreamARN and Handler are required; the zero value of
// every other field is its default.
type Config struct {
	// Streams is the client, usually dynamodbstreams.NewFromConfig(cfg). Required.
	Streams StreamsAPI
	// StreamARN is the stream (the table's LatestStreamArn). Required.
	StreamARN string
	// Handler handles the batches. Required.
	Handler Handler
	// BatchSize is the most records per batch, 1-10,000 (one GetRecords returns at most 1,000).
	// Defaults to 100, as Lambda's.
	BatchSize int
	// Filter, when set, keeps only the records it returns true for (the mapping's filter
	// criteria; InsertsOnly is the outbox's). Defaults to nil: every record.
	Filter func(*events.DynamoDBEventRecord) bool
	// StartingPosition is where a shard is first read: TrimHorizon (its oldest record) or Latest
	// (only records written from now on). Defaults to TrimHorizon.
	StartingPosition types.ShardIteratorType
	// ReportBatchItemFailures honours the handler's batchItemFailures (FunctionResponseTypes
	// ReportBatchItemFailures). Defaults to false, as in Lambda: a response is then ignored and
	// only an error fails a batch.
	ReportBatchItemFailures bool
	// BisectBatchOnFunctionError splits a batch that failed as a whole (an error, a panic, an
	// invalid response) in two before retrying it. Defaults to false.
	BisectBatchOnFunctionError bool
	// MaximumRetryAttempts is how many times a failed batch is retried before it is discarded
	// (OnFailure); -1 retries it for ever. Defaults to 0: no retry, as Lambda's value 0.
	MaximumRetryAttempts int
	// OnFailure receives every discarded batch. Defaults to a log line.
	OnFailure func(ctx context.Context, f Failure)
	// PollInterval is the wait after a read that returned nothing. Defaults to 250 ms (Lambda
	// polls a shard four times a second).
	PollInterval time.Duration
	// RetryDelay is the wait before the first retry of a batch; it doubles on every retry, up
	// to 30 s. Defaults to 200 ms.
	RetryDelay time.Duration
	// InvocationTimeout, when set, is each invocation's deadline. Defaults to none.
	InvocationTimeout time.Duration
	// Region fills the records' awsRegion. Defaults to the region in StreamARN.
	Region string
	// Logger receives read errors and discarded batches. Defaults to slog.Default().
	Logger *slog.Logger
}

// Failure describes a discarded batch, as Lambda's on-failure destination record does for a
// DynamoDB stream ("DDBStreamBatchInfo").
type Failure struct {
	// Condition is why it was discarded: "RetryAttemptsExhausted".
	Condition string `json:"condition"`
	// Error is the last try's error or response.
	Error     string `json:"error"`
	StreamARN string `json:"streamArn"`
	ShardID   string `json:"shardId"`
	// StartSequenceNumber and EndSequenceNumber bound the batch's records.
	StartSequenceNumber string `json:"startSequenceNumber"`
	EndSequenceNumber   string `json:"endSequenceNumber"`
	BatchSize           int    `json:"batchSize"`
}

// InsertsOnly is a Filter that keeps INSERT records (the filter pattern {"eventName":["INSERT"]}).
func InsertsOnly(r *events.DynamoDBEventRecord) bool {
	return r.EventName == string(events.DynamoDBOperationTypeInsert)
}

// Stats counts what a poller did.
type Stats struct {
	// Records read, Filtered out, Invocations of the handler, Retries and Bisects of batches,
	// Discarded records, and closed shards read to their end (ShardsDone).
	Records, Filtered, Invocations, Retries, Bisects, Discarded, ShardsDone int
}

// Poller reads a stream and hands its records to a handler. Create it with New and call Run.
type Poller struct {
	cfg Config

	mu    sync.Mutex
	stats Stats
}

// New checks cfg and returns a Poller.
func New(cfg Config) (*Poller, error) {
	switch {
	case cfg.Streams == nil:
		return nil, errors.New("ddbstream: Config.Streams is nil")
	case cfg.StreamARN == "":
		return nil, errors.New("ddbstream: Config.StreamARN is empty")
	case cfg.Handler == nil:
		return nil, errors.New("ddbstream: Config.Handler is nil")
	case cfg.BatchSize < 0 || cfg.BatchSize > MaxBatchSize:
		return nil, fmt.Errorf("ddbstream: Config.BatchSize %d: want 1-%d", cfg.BatchSize, MaxBatchSize)
	case cfg.MaximumRetryAttempts < -1 || cfg.MaximumRetryAttempts > 10000:
		return nil, fmt.Errorf("ddbstream: Config.MaximumRetryAttempts %d: want -1-10000", cfg.MaximumRetryAttempts)
	case cfg.StartingPosition != "" && cfg.StartingPosition != TrimHorizon && cfg.StartingPosition != Latest:
		return nil, fmt.Errorf("ddbstream: Config.StartingPosition %q: want TRIM_HORIZON or LATEST", cfg.StartingPosition)
	case cfg.PollInterval < 0 || cfg.RetryDelay < 0 || cfg.InvocationTimeout < 0:
		return nil, errors.New("ddbstream: Config.PollInterval, RetryDelay and InvocationTimeout must not be negative")
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.StartingPosition == "" {
		cfg.StartingPosition = TrimHorizon
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.Region == "" {
		if parts := strings.Split(cfg.StreamARN, ":"); len(parts) > 3 {
			cfg.Region = parts[3]
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnFailure == nil {
		log := cfg.Logger
		cfg.OnFailure = func(ctx context.Context, f Failure) {
			log.ErrorContext(ctx, "ddbstream: batch discarded after its retries", "shard", f.ShardID,
				"start", f.StartSequenceNumber, "end", f.EndSequenceNumber, "size", f.BatchSize, "error", f.Error)
		}
	}
	return &Poller{cfg: cfg}, nil
}

// Stats returns what the poller did so far.
func (p *Poller) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Poller) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// Run reads the stream until ctx is done (a batch in flight finishes first, with an
// uncancelled context) and returns nil then. Read errors are logged and retried.
func (p *Poller) Run(ctx context.Context) error {
	started := map[string]bool{}
	done := map[string]chan struct{}{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		desc, err := p.describe(ctx)
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.WarnContext(ctx, "ddbstream: describe stream failed; retrying", "stream", p.cfg.StreamARN, "error", err)
		}
		for _, sh := range desc {
			id := aws.ToString(sh.ShardId)
			if started[id] {
				continue
			}
			parent := aws.ToString(sh.ParentShardId)
			if pd, ok := done[parent]; parent != "" && ok {
				select {
				case <-pd:
				default:
					continue // the parent is still being read
				}
			}
			started[id] = true
			ch := make(chan struct{})
			done[id] = ch
			wg.Go(func() {
				defer close(ch)
				p.readShard(ctx, id)
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
		}
	}
}

func (p *Poller) describe(ctx context.Context) ([]types.Shard, error) {
	var shards []types.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.cfg.StreamARN)}
	for {
		out, err := p.cfg.Streams.DescribeStream(ctx, in, keepConnection)
		if err != nil {
			return shards, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		last := aws.ToString(out.StreamDescription.LastEvaluatedShardId)
		if last == "" {
			return shards, nil
		}
		in.ExclusiveStartShardId = aws.String(last)
	}
}

// readShard reads one shard until it is closed (no next iterator) or ctx is done.
func (p *Poller) readShard(ctx context.Context, shard string) {
	var iter *string
	lastSeq := ""
	backoff := p.cfg.RetryDelay
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for ctx.Err() == nil {
		if iter == nil {
			in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.cfg.StreamARN), ShardId: aws.String(shard), ShardIteratorType: p.cfg.StartingPosition}
			if lastSeq != "" {
				in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(lastSeq)
			}
			out, err := p.cfg.Streams.GetShardIterator(ctx, in, keepConnection)
			if err != nil {
				if ctx.Err() == nil {
					p.cfg.Logger.WarnContext(ctx, "ddbstream: get shard iterator failed; retrying", "shard", shard, "error", err)
				}
				if !wait(backoff) {
					return
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			iter = out.ShardIterator
			if iter == nil {
				return // a closed shard with nothing after lastSeq
			}
		}
		out, err := p.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)}, keepConnection)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var expired *types.ExpiredIteratorException
			if !errors.As(err, &expired) {
				p.cfg.Logger.WarnContext(ctx, "ddbstream: get records failed; retrying", "shard", shard, "error", err)
				if !wait(backoff) {
					return
				}
				backoff = min(2*backoff, 30*time.Second)
			}
			iter = nil // a new iterator after the last record handled
			continue
		}
		backoff = p.cfg.RetryDelay
		recs := make([]events.DynamoDBEventRecord, 0, len(out.Records))
		for i := range out.Records {
			r := toEventRecord(&out.Records[i], p.cfg.StreamARN, p.cfg.Region)
			lastSeq = r.Change.SequenceNumber
			if p.cfg.Filter != nil && !p.cfg.Filter(&r) {
				p.count(func(s *Stats) { s.Filtered++ })
				continue
			}
			recs = append(recs, r)
		}
		p.count(func(s *Stats) { s.Records += len(out.Records) })
		for len(recs) > 0 {
			n := min(len(recs), p.cfg.BatchSize)
			p.process(ctx, shard, recs[:n])
			recs = recs[n:]
		}
		iter = out.NextShardIterator
		if iter == nil && ctx.Err() == nil {
			p.count(func(s *Stats) { s.ShardsDone++ })
			return // the shard is closed and read to its end
		}
		if len(out.Records) == 0 && !wait(p.cfg.PollInterval) {
			return
		}
	}
}

// batch is records to invoke the handler with, and the retries they used.
type batch struct {
	recs    []events.DynamoDBEventRecord
	retries int
}

// process handles one batch with the mapping's retry, checkpoint and bisect rules, until every
// record is done or discarded, or ctx is done (an invocation in flight runs on, uncancelled;
// retries stop).
func (p *Poller) process(ctx context.Context, shard string, recs []events.DynamoDBEventRecord) {
	queue := []batch{{recs: recs}}
	for len(queue) > 0 && ctx.Err() == nil {
		b := queue[0]
		failedAt, whole, reason := p.invoke(context.WithoutCancel(ctx), b.recs)
		switch {
		case !whole && failedAt < 0: // a complete success
			queue = queue[1:]
			continue
		case whole && p.cfg.BisectBatchOnFunctionError && len(b.recs) > 1:
			half := len(b.recs) / 2
			p.count(func(s *Stats) { s.Bisects++ })
			queue = append([]batch{{recs: b.recs[:half], retries: b.retries}, {recs: b.recs[half:], retries: b.retries}}, queue[1:]...)
			continue
		case !whole:
			b.recs = b.recs[failedAt:] // the records before the checkpoint are done
		}
		if p.cfg.MaximumRetryAttempts >= 0 && b.retries >= p.cfg.MaximumRetryAttempts {
			p.count(func(s *Stats) { s.Discarded += len(b.recs) })
			p.cfg.OnFailure(ctx, Failure{
				Condition: "RetryAttemptsExhausted", Error: reason, StreamARN: p.cfg.StreamARN, ShardID: shard,
				StartSequenceNumber: b.recs[0].Change.SequenceNumber, EndSequenceNumber: b.recs[len(b.recs)-1].Change.SequenceNumber,
				BatchSize: len(b.recs),
			})
			queue = queue[1:]
			continue
		}
		b.retries++
		p.count(func(s *Stats) { s.Retries++ })
		queue[0] = b
		select {
		case <-ctx.Done():
		case <-time.After(min(p.cfg.RetryDelay<<min(b.retries-1, 16), 30*time.Second)):
		}
	}
}

// invoke calls the handler once. It returns the index of the checkpoint (the failed record with
// the lowest sequence number, -1 for none), or whole when the batch failed as a whole, with the
// reason.
func (p *Poller) invoke(ctx context.Context, recs []events.DynamoDBEventRecord) (failedAt int, whole bool, reason string) {
	p.count(func(s *Stats) { s.Invocations++ })
	if p.cfg.InvocationTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.InvocationTimeout)
		defer cancel()
	}
	resp, err := p.call(ctx, recs)
	if err != nil {
		return -1, true, err.Error()
	}
	if !p.cfg.ReportBatchItemFailures || len(resp.BatchItemFailures) == 0 {
		return -1, false, ""
	}
	index := make(map[string]int, len(recs))
	for i := range recs {
		index[recs[i].Change.SequenceNumber] = i
	}
	failedAt = len(recs)
	for _, f := range resp.BatchItemFailures {
		i, ok := index[f.ItemIdentifier]
		if f.ItemIdentifier == "" || !ok {
			return -1, true, fmt.Sprintf("invalid batchItemFailures: itemIdentifier %q is not the sequence number of a record of the batch", f.ItemIdentifier)
		}
		failedAt = min(failedAt, i)
	}
	return failedAt, false, fmt.Sprintf("%d record(s) reported failed, the first %s", len(resp.BatchItemFailures), recs[failedAt].Change.SequenceNumber)
}

// call runs the handler, turning a panic into an error.
func (p *Poller) call(ctx context.Context, recs []events.DynamoDBEventRecord) (resp events.DynamoDBEventResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			p.cfg.Logger.ErrorContext(ctx, "ddbstream: handler panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return p.cfg.Handler.HandleDynamoDB(ctx, events.DynamoDBEvent{Records: recs})
}

// keepConnection is passed with every DynamoDB Streams call: without it the SDK may lose a
// response under a race in its HTTP layer and retry the call (internal/sdkhttp); a GetRecords
// retried with a used iterator fails on the emulator, whose iterators work once.
func keepConnection(o *dynamodbstreams.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}
