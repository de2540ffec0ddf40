package flow

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// Limit types, as ListQuery.Type and LimitState.Type name them.
const (
	TypeConcurrency = "concurrency"
	TypeRate        = "rate"
)

// ListQuery selects limit items to list.
type ListQuery struct {
	// Type is TypeConcurrency or TypeRate. Required.
	Type string
	// Name, when set, lists only the items of that limit name.
	Name string
	// Limit is the most items of a page: 1-1000. Defaults to 100.
	Limit int
	// PageToken continues a listing: a NextPageToken, unchanged.
	PageToken string
	// Now tells expired leases and items apart. Defaults to time.Now().
	Now time.Time
}

// LimitState is one limit item: a concurrency limit's slots or a rate limit's bucket for one key.
type LimitState struct {
	// Type is TypeConcurrency or TypeRate; Name the limit's name; Key the key ("" for a limit
	// of its whole name).
	Type, Name, Key string
	// Limit is the slots (concurrency) or the jobs per Period (rate).
	Limit int
	// Holders are the jobs holding slots, earliest lease first (concurrency).
	Holders []Holder
	// Period and Burst are the rate; Available is how many jobs may start now, and NextAt, when
	// none may, when the next may (rate).
	Period    time.Duration
	Burst     int
	Available int
	NextAt    time.Time
	// Created is when the item was created; ExpiresAt when it expires unless used again.
	Created, ExpiresAt time.Time
}

// Holder is a job holding a concurrency slot.
type Holder struct {
	// JobID is the job's id ("" when the id was too unusual to name an attribute: it is hashed).
	JobID string
	// LeaseUntil is when the slot returns unless renewed; Expired reports that it has ended
	// (the holder died; the next acquisition removes it).
	LeaseUntil time.Time
	Expired    bool
}

// LimitPage is a page of limit items.
type LimitPage struct {
	Limits []LimitState
	// NextPageToken continues the listing ("" at its end).
	NextPageToken string
}

// List lists limit items, newest first, without a table scan: one Query of the by_status index
// partition of the type (the items enter it once, when created), and one strongly consistent
// BatchGetItem of the page's items. Reads: about half a unit per 4 KB of index entries and one
// unit per item under 4 KB.
func (t *Table) List(ctx context.Context, q ListQuery) (LimitPage, error) {
	var partition, prefix string
	switch q.Type {
	case TypeConcurrency:
		partition, prefix = IndexPartitionLimits, LimitKeyPrefix
	case TypeRate:
		partition, prefix = IndexPartitionRates, RateKeyPrefix
	default:
		return LimitPage{}, fmt.Errorf("%w: list type %q: want %s or %s", ErrInvalid, q.Type, TypeConcurrency, TypeRate)
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 1 || q.Limit > 1000 {
		return LimitPage{}, fmt.Errorf("%w: list limit %d: want 1-1000", ErrInvalid, q.Limit)
	}
	if q.Now.IsZero() {
		q.Now = time.Now()
	}
	e := newExpr()
	in := &dynamodb.QueryInput{
		TableName:              aws.String(t.table),
		IndexName:              aws.String(idempotency.IndexByStatus),
		KeyConditionExpression: aws.String(e.n(idempotency.AttrGSI1PK) + " = " + e.v(avS(partition))),
		ScanIndexForward:       aws.Bool(false),
		Limit:                  aws.Int32(int32(q.Limit)),
	}
	if q.Name != "" {
		in.FilterExpression = aws.String("begins_with(" + e.n(idempotency.AttrPK) + ", " + e.v(avS(prefix+q.Name+"#")) + ")")
	}
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.names, e.valuesOrNil()
	if q.PageToken != "" {
		start, err := decodePageToken(q.PageToken, partition)
		if err != nil {
			return LimitPage{}, err
		}
		in.ExclusiveStartKey = start
	}
	var pks []string
	var page LimitPage
	for {
		out, err := t.client.Query(ctx, in, keepConnection)
		if err != nil {
			return LimitPage{}, fmt.Errorf("flow: list %s limits: %w", q.Type, err)
		}
		for _, it := range out.Items {
			if pk, ok := getS(it, idempotency.AttrPK); ok && strings.HasPrefix(pk, prefix) {
				pks = append(pks, pk)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		if len(pks) >= q.Limit {
			page.NextPageToken = encodePageToken(out.LastEvaluatedKey)
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey // a filtered page came back short: read on
	}
	items, err := t.batchGet(ctx, pks)
	if err != nil {
		return LimitPage{}, err
	}
	for _, pk := range pks {
		item, ok := items[pk]
		if !ok {
			continue // gone since the index was read
		}
		if st, ok := limitState(item, q.Now); ok {
			page.Limits = append(page.Limits, st)
		}
	}
	return page, nil
}

// batchGet reads items by partition key, strongly consistent, 100 per request.
func (t *Table) batchGet(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(pks))
	for start := 0; start < len(pks); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, 100)
		for _, pk := range pks[start:min(start+100, len(pks))] {
			keys = append(keys, map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)})
		}
		req := map[string]types.KeysAndAttributes{t.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == 10 {
				return nil, fmt.Errorf("flow: read limit items: unprocessed after %d requests", attempt)
			}
			res, err := t.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req}, keepConnection)
			if err != nil {
				return nil, fmt.Errorf("flow: read limit items: %w", err)
			}
			for _, item := range res.Responses[t.table] {
				if pk, ok := getS(item, idempotency.AttrPK); ok {
					out[pk] = item
				}
			}
			req = res.UnprocessedKeys
			if len(req) > 0 {
				time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond) // back off before asking again
			}
		}
	}
	return out, nil
}

// limitState reads a limit item (false for an expired one, or one that is not a limit item).
func limitState(item map[string]types.AttributeValue, now time.Time) (LimitState, bool) {
	pk, _ := getS(item, idempotency.AttrPK)
	var st LimitState
	var rest string
	switch {
	case strings.HasPrefix(pk, LimitKeyPrefix):
		st.Type, rest = TypeConcurrency, strings.TrimPrefix(pk, LimitKeyPrefix)
	case strings.HasPrefix(pk, RateKeyPrefix):
		st.Type, rest = TypeRate, strings.TrimPrefix(pk, RateKeyPrefix)
	default:
		return st, false
	}
	name, key, ok := strings.Cut(rest, "#")
	if !ok {
		return st, false
	}
	st.Name, st.Key = name, key
	if k, ok := getS(item, attrKey); ok {
		st.Key = k
	}
	if exp, ok := getInt(item, idempotency.AttrExpires); ok {
		st.ExpiresAt = time.Unix(exp, 0)
		if !st.ExpiresAt.After(now) {
			return st, false // expired: absent, whatever DynamoDB's TTL lag
		}
	}
	if c, ok := getInt(item, idempotency.AttrGSI1SK); ok {
		st.Created = time.UnixMilli(c)
	}
	if l, ok := getInt(item, attrLimit); ok {
		st.Limit = int(l)
	}
	if st.Type == TypeConcurrency {
		for _, h := range readHolders(item) {
			end := time.UnixMilli(h.leaseMs)
			st.Holders = append(st.Holders, Holder{JobID: holderJob(h.attr), LeaseUntil: end, Expired: !end.After(now)})
		}
		sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].LeaseUntil.Before(st.Holders[j].LeaseUntil) })
		return st, true
	}
	if p, ok := getInt(item, attrPeriod); ok {
		st.Period = time.Duration(p) * time.Millisecond
	}
	if b, ok := getInt(item, attrBurst); ok {
		st.Burst = int(b)
	}
	if st.Limit > 0 && st.Period > 0 && st.Burst > 0 {
		T := interval(st.Limit, st.Period)
		tat, _ := getInt(item, attrTAT)
		us := now.UnixMicro()
		// Tokens due now: those that fit below now + Burst·T after max(tat, now).
		free := (us + int64(st.Burst)*T - max(tat, us)) / T
		st.Available = int(min(max(free, 0), int64(st.Burst)))
		if st.Available == 0 {
			st.NextAt = time.UnixMicro(tat - int64(st.Burst-1)*T)
		}
	}
	return st, true
}

// pageToken is a listing's position: the index key of the last entry read.
type pageToken struct {
	PK  string `json:"pk"`
	GSI string `json:"gp"`
	SK  string `json:"gs"`
}

func encodePageToken(lek map[string]types.AttributeValue) string {
	var p pageToken
	p.PK, _ = getS(lek, idempotency.AttrPK)
	p.GSI, _ = getS(lek, idempotency.AttrGSI1PK)
	p.SK, _ = getN(lek, idempotency.AttrGSI1SK)
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s, partition string) (map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var p pageToken
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.PK == "" || (p.GSI != "" && p.GSI != partition) {
		return nil, fmt.Errorf("%w: page token is not one of this listing's", ErrInvalid)
	}
	key := map[string]types.AttributeValue{idempotency.AttrPK: avS(p.PK)}
	if p.GSI != "" {
		key[idempotency.AttrGSI1PK] = avS(p.GSI)
	}
	if p.SK != "" {
		key[idempotency.AttrGSI1SK] = avNs(p.SK)
	}
	return key, nil
}
