package status

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// DynamoDBAPI is the part of the DynamoDB client this package uses; *dynamodb.Client
// implements it.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Errors this package returns (wrapped, with the job or the field they concern).
var (
	// ErrNotFound: no record for that job key or job id.
	ErrNotFound = errors.New("status: job not found")
	// ErrInvalid: a bad argument or Config field; the message names it.
	ErrInvalid = errors.New("status: invalid argument")
	// ErrSucceeded: Cancel refused, the job has already succeeded.
	ErrSucceeded = errors.New("status: the job has already succeeded")
)

// Config configures a [Table]. Client and Table are required; every other field's zero value is
// its default.
type Config struct {
	// Client is the DynamoDB client, usually dynamodb.NewFromConfig(cfg). Required.
	Client DynamoDBAPI
	// Table is the name of the job table (the idempotency store's). Required.
	Table string
	// Shards is the number of by_status partitions per state, at most MaxShards. Defaults to
	// idempotency.DefaultShards (16). It must match the store's (DynamoDBConfig.Shards): records
	// written with another count sit in partitions List does not read.
	Shards int
	// QueryConcurrency bounds the DynamoDB requests one List or GetByID runs at the same time.
	// Defaults to 8.
	QueryConcurrency int
	// Layout is where the records this package writes go (queued, scheduled, cancelled); it must
	// be the store's (idempotency.DynamoDBConfig.Layout). Records of both layouts are read either
	// way. Defaults to idempotency.LayoutByID.
	Layout idempotency.Layout
	// CancelTTL is how long Cancel keeps a cancelled record at least: its expiry becomes the
	// cancel time plus CancelTTL, unless the record already expires later. Defaults to 15 days,
	// longer than SQS keeps a message (14 days at most), so every later delivery still finds
	// the record.
	CancelTTL time.Duration
	// Now returns the time (expiry checks, and writes whose time is zero). Defaults to time.Now.
	Now func() time.Time
}

// Job is a job's record as this package reads it: what a status command shows.
type Job struct {
	idempotency.Record
	// RunAt is when a scheduled job is due, if RecordScheduled was told; zero otherwise.
	RunAt time.Time
	// RequestHash is the hash of the request that reserved the job (QueuedJob.RequestHash), ""
	// when none was recorded.
	RequestHash string
	// SentAt is when the queued job's message was marked sent (MarkSent); zero when it was not.
	SentAt time.Time
	// Expired reports whether the record had expired when it was read. An expired record no
	// longer counts (a new delivery of the key runs as a new job); DynamoDB deletes it within
	// about two days.
	Expired bool
}

// Lapsed reports whether the record expired while its job was still waiting to run (queued or
// scheduled): no worker ever picked it up, and none will under this record — a reservation
// released after its send failed (ReleaseQueued), or a message that never arrived or outlived
// the queue's retention. Such a job does not exist for a caller that enqueued it (functions/api
// answers 404); the record stays readable (Get, GetByID, List) until DynamoDB deletes it.
func (j Job) Lapsed() bool {
	return j.Expired && (j.State == idempotency.StateQueued || j.State == idempotency.StateScheduled)
}

// Table reads and writes job records. It is safe for concurrent use.
type Table struct {
	client      DynamoDBAPI
	table       string
	shards      int
	layout      idempotency.Layout
	concurrency int
	cancelTTL   time.Duration
	now         func() time.Time
	// sleep waits between retries of unprocessed BatchGetItem keys (replaced in tests).
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Table, or an error wrapping ErrInvalid that names the bad Config field.
func New(cfg Config) (*Table, error) {
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: Config.Client is nil", ErrInvalid)
	case cfg.Table == "":
		return nil, fmt.Errorf("%w: Config.Table is empty", ErrInvalid)
	case cfg.Shards < 0 || cfg.Shards > MaxShards:
		return nil, fmt.Errorf("%w: Config.Shards is %d, want 1–%d (0 for %d)", ErrInvalid, cfg.Shards, MaxShards, idempotency.DefaultShards)
	case cfg.QueryConcurrency < 0:
		return nil, fmt.Errorf("%w: Config.QueryConcurrency is %d, want ≥ 0", ErrInvalid, cfg.QueryConcurrency)
	case cfg.CancelTTL < 0:
		return nil, fmt.Errorf("%w: Config.CancelTTL is %v, want ≥ 0", ErrInvalid, cfg.CancelTTL)
	case !cfg.Layout.Valid():
		return nil, fmt.Errorf("%w: Config.Layout %v is not a layout", ErrInvalid, cfg.Layout)
	}
	t := &Table{
		client: cfg.Client, table: cfg.Table, shards: cfg.Shards, layout: cfg.Layout, concurrency: cfg.QueryConcurrency,
		cancelTTL: cfg.CancelTTL, now: cfg.Now, sleep: sleepCtx,
	}
	if t.shards == 0 {
		t.shards = idempotency.DefaultShards
	}
	if t.concurrency == 0 {
		t.concurrency = 8
	}
	if t.cancelTTL == 0 {
		t.cancelTTL = 15 * 24 * time.Hour
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t, nil
}

// putItem runs a PutItem, sent again while a transaction conflict refuses it: the write changed
// nothing, and the transaction holding the item (the transactional outbox writes queued records
// in its transactions) is usually over within milliseconds. See internal/ddbretry.
func (t *Table) putItem(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return t.client.PutItem(ctx, in)
	})
}

// updateItem runs an UpdateItem, sent again while a transaction conflict refuses it (putItem).
func (t *Table) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return t.client.UpdateItem(ctx, in)
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func validKindKey(kind, key string) error {
	switch {
	case kind == "":
		return fmt.Errorf("%w: kind is empty", ErrInvalid)
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalid)
	}
	return nil
}

// Get returns the record of a job key with strongly consistent reads, or an error wrapping
// ErrNotFound. The key may be the job's id (a job enqueued without a key), whose record is kept
// under its id (idempotency.LayoutByID): Get reads both places, two reads at once, and returns
// the more recently updated record of the kind. An expired record is returned with Expired set.
func (t *Table) Get(ctx context.Context, kind, key string) (Job, error) {
	if err := validKindKey(kind, key); err != nil {
		return Job{}, err
	}
	item, _, err := t.currentItem(ctx, kind, key)
	if err != nil {
		return Job{}, fmt.Errorf("status: get %s/%s: %w", kind, key, err)
	}
	if item == nil {
		return Job{}, fmt.Errorf("%w: kind %q, key %q", ErrNotFound, kind, key)
	}
	return jobFromItem(item, t.now())
}

// currentItem reads, at once, the two items a job key may have (under ItemKey(kind, key), and under
// IDItemKey(key) when the key is a job's id) and returns the more recently updated one of that
// kind, with its partition key; nil when there is none.
func (t *Table) currentItem(ctx context.Context, kind, key string) (map[string]types.AttributeValue, string, error) {
	pks := []string{idempotency.ItemKey(kind, key), idempotency.IDItemKey(key)}
	items := make([]map[string]types.AttributeValue, len(pks))
	err := t.parallel(ctx, len(pks), func(ctx context.Context, i int) error {
		item, err := t.getItem(ctx, pks[i])
		items[i] = item
		return err
	})
	if err != nil {
		return nil, "", err
	}
	best, bestPK, bestUpd := map[string]types.AttributeValue(nil), "", int64(-1)
	for i, item := range items {
		if item == nil {
			continue
		}
		rec, err := idempotency.RecordFromItem(item)
		if err != nil {
			return nil, "", err
		}
		if rec.Kind != kind || rec.Key != key {
			continue // another kind's job with this id
		}
		if upd := rec.UpdatedAt.UnixMilli(); upd > bestUpd {
			best, bestPK, bestUpd = item, pks[i], upd
		}
	}
	return best, bestPK, nil
}

func (t *Table) getItem(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.table),
		Key:            map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// maxIDMatches bounds the records GetByID considers: a job id names one job, and the records
// that share it are copies of that job under other keys.
const maxIDMatches = 100

// GetByID returns the record whose job is jobID. A job enqueued without a key has its record
// under its id (idempotency.LayoutByID), read directly; the others are found through the by_id
// index and then read, as are records written under idempotency.LayoutKindKey. Both lookups run
// at once, each with strongly consistent reads of the items. When several records carry the job
// id, the most recently updated one is returned. It returns an error wrapping ErrNotFound when no
// record carries the id (the index lags writes by up to about a second; the direct read does
// not). An expired record is returned with Expired set.
func (t *Table) GetByID(ctx context.Context, jobID string) (Job, error) {
	if jobID == "" {
		return Job{}, fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	var (
		direct map[string]types.AttributeValue
		pks    []string
	)
	err := t.parallel(ctx, 2, func(ctx context.Context, i int) error {
		if i == 0 {
			item, err := t.getItem(ctx, idempotency.IDItemKey(jobID))
			direct = item
			return err
		}
		var err error
		pks, err = t.queryByID(ctx, jobID)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("status: get job %s: %w", jobID, err)
	}
	items, err := t.batchGet(ctx, pks)
	if err != nil {
		return Job{}, fmt.Errorf("status: get job %s: %w", jobID, err)
	}
	now := t.now()
	var found []Job
	if direct != nil {
		items[idempotency.IDItemKey(jobID)] = direct
		pks = append(pks, idempotency.IDItemKey(jobID))
	}
	seen := map[string]bool{}
	for _, pk := range pks {
		item, ok := items[pk]
		if !ok || seen[pk] {
			continue // deleted since the index was written
		}
		seen[pk] = true
		j, err := jobFromItem(item, now)
		if err != nil {
			return Job{}, err
		}
		if j.JobID == jobID { // else the key now belongs to a later job
			found = append(found, j)
		}
	}
	if len(found) == 0 {
		return Job{}, fmt.Errorf("%w: job id %q", ErrNotFound, jobID)
	}
	sort.Slice(found, func(a, b int) bool {
		if !found[a].UpdatedAt.Equal(found[b].UpdatedAt) {
			return found[a].UpdatedAt.After(found[b].UpdatedAt)
		}
		return idempotency.ItemKey(found[a].Kind, found[a].Key) < idempotency.ItemKey(found[b].Kind, found[b].Key)
	})
	return found[0], nil
}

// queryByID returns the partition keys the by_id index holds for jobID (at most maxIDMatches).
func (t *Table) queryByID(ctx context.Context, jobID string) ([]string, error) {
	var pks []string
	var start map[string]types.AttributeValue
	for {
		out, err := t.client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(t.table),
			IndexName:                 aws.String(idempotency.IndexByID),
			KeyConditionExpression:    aws.String("#id = :id"),
			ExpressionAttributeNames:  map[string]string{"#id": idempotency.AttrJobID},
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": attrS(jobID)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", idempotency.IndexByID, err)
		}
		for _, it := range out.Items {
			if pk, err := getS(it, idempotency.AttrPK); err == nil && pk != "" {
				pks = append(pks, pk)
			}
		}
		start = out.LastEvaluatedKey
		if start == nil || len(pks) >= maxIDMatches {
			return pks, nil
		}
	}
}

// batchGetMax is the most keys one BatchGetItem request may carry.
const batchGetMax = 100

// maxBatchAttempts bounds the BatchGetItem requests per chunk when DynamoDB keeps returning
// unprocessed keys (throttling).
const maxBatchAttempts = 8

// batchGet reads items by partition key with strongly consistent reads, in chunks of 100 run
// concurrently (at most QueryConcurrency at once). Missing items are absent from the result.
func (t *Table) batchGet(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	seen := make(map[string]bool, len(pks))
	var unique []string
	for _, pk := range pks {
		if !seen[pk] { // DynamoDB rejects a request that names a key twice
			seen[pk] = true
			unique = append(unique, pk)
		}
	}
	var chunks [][]string
	for len(unique) > 0 {
		n := min(len(unique), batchGetMax)
		chunks = append(chunks, unique[:n])
		unique = unique[n:]
	}
	result := make(map[string]map[string]types.AttributeValue, len(pks))
	var mu sync.Mutex
	err := t.parallel(ctx, len(chunks), func(ctx context.Context, i int) error {
		items, err := t.batchGetChunk(ctx, chunks[i])
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, item := range items {
			if pk, _ := getS(item, idempotency.AttrPK); pk != "" {
				result[pk] = item
			}
		}
		return nil
	})
	return result, err
}

func (t *Table) batchGetChunk(ctx context.Context, pks []string) ([]map[string]types.AttributeValue, error) {
	keys := make([]map[string]types.AttributeValue, len(pks))
	for i, pk := range pks {
		keys[i] = map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)}
	}
	request := map[string]types.KeysAndAttributes{t.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	var items []map[string]types.AttributeValue
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := t.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: request})
		if err != nil {
			return nil, fmt.Errorf("batch get: %w", err)
		}
		items = append(items, out.Responses[t.table]...)
		left, ok := out.UnprocessedKeys[t.table]
		if !ok || len(left.Keys) == 0 {
			return items, nil
		}
		if attempt == maxBatchAttempts {
			return nil, fmt.Errorf("batch get: %d keys still unprocessed after %d attempts", len(left.Keys), attempt)
		}
		if err := t.sleep(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, 2*time.Second)
		request = map[string]types.KeysAndAttributes{t.table: left}
	}
}

// parallel runs fn(0) … fn(n-1), at most QueryConcurrency at once, and returns the first error
// (the context passed to the others is then cancelled).
func (t *Table) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if n == 1 {
		return fn(ctx, 0)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, t.concurrency)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { firstErr = err; cancel(err) })
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return context.Cause(ctx)
}
