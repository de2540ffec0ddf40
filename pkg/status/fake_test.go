package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// fakeDB models what List depends on the way DynamoDB documents it, where the embedded emulator
// does not: the by_status index holds only the projected attributes; equal sort keys within a
// partition come in a fixed order (here by pk, descending, so that nothing can rely on the
// merge's own tie order); a LastEvaluatedKey carries the table and index keys, and is returned
// whenever Limit stops the evaluation, even at the very end; an ExclusiveStartKey must carry all
// three keys. Index entries may also lag the table (stale).
type fakeDB struct {
	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
	// stale holds index entries that lag their item: used instead of the item's own.
	stale map[string]map[string]types.AttributeValue
	// unprocessed makes that many BatchGetItem calls return their second half (all of a single
	// key) unprocessed.
	unprocessed int
	// queryErr fails every Query.
	queryErr error

	inFlight, maxInFlight, queries, batchGets atomic.Int64
}

func newFakeDB() *fakeDB {
	return &fakeDB{items: map[string]map[string]types.AttributeValue{}, stale: map[string]map[string]types.AttributeValue{}}
}

func (f *fakeDB) put(s seed, shards int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[s.pk()] = s.item(shards)
}

var errNotModelled = errors.New("fakeDB: not modelled")

func (f *fakeDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errNotModelled
}

func (f *fakeDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errNotModelled
}

func (f *fakeDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errNotModelled
}

func (f *fakeDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	f.batchGets.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(in.RequestItems) != 1 {
		return nil, fmt.Errorf("fakeDB: %d tables", len(in.RequestItems))
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}, UnprocessedKeys: map[string]types.KeysAndAttributes{}}
	for table, ka := range in.RequestItems {
		if len(ka.Keys) > 100 {
			return nil, fmt.Errorf("ValidationException: Too many items requested for the BatchGetItem call")
		}
		if ka.ConsistentRead == nil || !*ka.ConsistentRead {
			return nil, fmt.Errorf("fakeDB: want consistent reads")
		}
		keys := ka.Keys
		seen := map[string]bool{}
		for _, k := range keys {
			pk := k[idempotency.AttrPK].(*types.AttributeValueMemberS).Value
			if seen[pk] {
				return nil, fmt.Errorf("ValidationException: Provided list of item keys contains duplicates")
			}
			seen[pk] = true
		}
		if f.unprocessed > 0 {
			f.unprocessed--
			half := len(keys) / 2
			out.UnprocessedKeys[table] = types.KeysAndAttributes{Keys: keys[half:], ConsistentRead: ka.ConsistentRead}
			keys = keys[:half]
		}
		for _, k := range keys {
			if item, ok := f.items[k[idempotency.AttrPK].(*types.AttributeValueMemberS).Value]; ok {
				out.Responses[table] = append(out.Responses[table], item)
			}
		}
	}
	return out, nil
}

type fakeEntry struct {
	pk   string
	sk   int64
	item map[string]types.AttributeValue
}

func (f *fakeDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.queries.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if err := checkExpr(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.KeyConditionExpression, in.FilterExpression); err != nil {
		return nil, err
	}
	if f.queryErr != nil {
		return nil, f.queryErr
	}
	if *in.IndexName != idempotency.IndexByStatus || *in.KeyConditionExpression != "#p = :p" || in.ExpressionAttributeNames["#p"] != idempotency.AttrGSI1PK {
		return nil, errNotModelled
	}
	partition := in.ExpressionAttributeValues[":p"].(*types.AttributeValueMemberS).Value
	var kind string
	if in.FilterExpression != nil {
		if *in.FilterExpression != "#k = :k" || in.ExpressionAttributeNames["#k"] != idempotency.AttrKind {
			return nil, errNotModelled
		}
		kind = in.ExpressionAttributeValues[":k"].(*types.AttributeValueMemberS).Value
	}
	forward := in.ScanIndexForward == nil || *in.ScanIndexForward

	f.mu.Lock()
	var entries []fakeEntry
	for pk, item := range f.items {
		if s, ok := f.stale[pk]; ok {
			item = s
		}
		if g, _ := getS(item, idempotency.AttrGSI1PK); g == partition {
			sk, _, _ := getN(item, idempotency.AttrGSI1SK)
			entries = append(entries, fakeEntry{pk: pk, sk: sk, item: project(item)})
		}
	}
	for pk, item := range f.stale {
		if _, ok := f.items[pk]; !ok { // deleted from the table, still in the index
			if g, _ := getS(item, idempotency.AttrGSI1PK); g == partition {
				sk, _, _ := getN(item, idempotency.AttrGSI1SK)
				entries = append(entries, fakeEntry{pk: pk, sk: sk, item: project(item)})
			}
		}
	}
	f.mu.Unlock()
	order := func(a, b fakeEntry) int { // ascending: sk, then pk descending
		if c := cmp.Compare(a.sk, b.sk); c != 0 {
			return c
		}
		return -cmp.Compare(a.pk, b.pk)
	}
	slices.SortFunc(entries, order)
	if !forward {
		slices.Reverse(entries)
	}
	if esk := in.ExclusiveStartKey; esk != nil {
		pk, _ := getS(esk, idempotency.AttrPK)
		g, _ := getS(esk, idempotency.AttrGSI1PK)
		sk, ok, _ := getN(esk, idempotency.AttrGSI1SK)
		if pk == "" || g != partition || !ok || len(esk) != 3 {
			return nil, fmt.Errorf("ValidationException: The provided starting key is invalid: %v", esk)
		}
		at := fakeEntry{pk: pk, sk: sk}
		i := 0
		for i < len(entries) {
			c := order(entries[i], at)
			if !forward {
				c = -c
			}
			if c > 0 {
				break
			}
			i++
		}
		entries = entries[i:]
	}
	limit := len(entries)
	if in.Limit != nil && int(*in.Limit) < limit {
		limit = int(*in.Limit)
	}
	out := &dynamodb.QueryOutput{ScannedCount: int32(limit)}
	for _, e := range entries[:limit] {
		if kind == "" || e.item[idempotency.AttrKind].(*types.AttributeValueMemberS).Value == kind {
			out.Items = append(out.Items, e.item)
		}
	}
	out.Count = int32(len(out.Items))
	if in.Limit != nil && limit == int(*in.Limit) && limit > 0 {
		last := entries[limit-1]
		out.LastEvaluatedKey = map[string]types.AttributeValue{
			idempotency.AttrPK: attrS(last.pk), idempotency.AttrGSI1PK: attrS(partition), idempotency.AttrGSI1SK: attrN(last.sk),
		}
	}
	return out, nil
}

// project returns the by_status index's copy of an item: the keys and the INCLUDE list.
func project(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := map[string]types.AttributeValue{}
	for _, name := range append([]string{idempotency.AttrPK, idempotency.AttrGSI1PK, idempotency.AttrGSI1SK}, byStatusProjection...) {
		if v, ok := item[name]; ok {
			out[name] = v
		}
	}
	return out
}
