package status

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Listing limits.
const (
	// DefaultListLimit is the page size when ListQuery.Limit is zero.
	DefaultListLimit = 50
	// MaxListLimit is the largest ListQuery.Limit.
	MaxListLimit = 1000
)

// ListQuery selects the jobs List returns.
type ListQuery struct {
	// State is the state to list: retrying, dead, scheduled or cancelled, the states the
	// by_status index holds (idempotency.StatusIndexed). Required.
	State idempotency.State
	// Kind, when set, lists only jobs of that kind.
	Kind string
	// Limit is the most jobs in the page: 1–MaxListLimit. Defaults to DefaultListLimit.
	Limit int
	// PageToken continues a listing: the NextPageToken of the previous page, for the same State
	// and Kind. Empty for the first page.
	PageToken string
}

// Page is one page of a listing.
type Page struct {
	// Jobs are the page's jobs, most recently updated first.
	Jobs []Job
	// NextPageToken continues the listing; empty when there is nothing more. A page may hold
	// fewer than Limit jobs, even none, and still have a NextPageToken.
	NextPageToken string
}

// indexEntry is one by_status entry: only its keys are read, everything else comes from the
// table item (the index projects neither the expiry nor the error).
type indexEntry struct {
	pk string
	sk int64
}

// shardScan is the state of one shard during a List call.
type shardScan struct {
	id int
	// at is where the shard's next page starts: after the last consumed entry, or at the start
	// key of the buffered response (everything before it was consumed or filtered out). nil:
	// from the newest entry.
	at *shardCursor
	// buf holds fetched entries not consumed yet, newest first.
	buf []indexEntry
	// next is the ExclusiveStartKey of the next query; nil with fetched set: no more entries.
	next    map[string]types.AttributeValue
	fetched bool
	done    bool
}

// List returns the jobs in q.State, newest first (by the time of their last update), across
// every shard of the by_status index: each shard is queried newest first, the results are merged,
// and each listed job is then read from the table with a strongly consistent read, so that a page
// shows current records. Records that expired, or left the state after the index entry was read,
// are skipped (the index lags writes by up to about a second).
//
// Pagination neither repeats nor skips a job that stays in the state while the listing runs. A
// job updated meanwhile moves to the top of its state's index and is not listed again.
func (t *Table) List(ctx context.Context, q ListQuery) (Page, error) {
	if q.State == "" {
		return Page{}, fmt.Errorf("%w: ListQuery.State is empty", ErrInvalid)
	}
	if !idempotency.StatusIndexed(q.State) {
		return Page{}, fmt.Errorf("%w: ListQuery.State %q is not indexed: List lists retrying, dead, scheduled or cancelled jobs; look other jobs up one at a time with Get or GetByID", ErrInvalid, q.State)
	}
	if q.Kind != "" {
		if err := jobs.ValidateKind(q.Kind); err != nil {
			return Page{}, fmt.Errorf("%w: ListQuery.Kind: %v", ErrInvalid, err)
		}
	}
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return Page{}, fmt.Errorf("%w: ListQuery.Limit is %d, want 1–%d (0 for %d)", ErrInvalid, q.Limit, MaxListLimit, DefaultListLimit)
	}
	shards := make([]*shardScan, t.shards)
	for i := range shards {
		shards[i] = &shardScan{id: i}
	}
	if q.PageToken != "" {
		tok, err := decodeToken(q.PageToken, q.State, q.Kind, t.shards)
		if err != nil {
			return Page{}, err
		}
		for _, c := range tok.Pos {
			s := shards[c.I]
			if c.Done {
				s.done = true
				continue
			}
			s.at = &shardCursor{I: c.I, PK: c.PK, SK: c.SK}
			s.next = t.startKey(q.State, s.at)
		}
	}

	var (
		result = make([]Job, 0, limit)
		seen   = make(map[string]bool)
		now    = t.now()
	)
	for len(result) < limit {
		// Merge: take the newest head among the shards until the page could be full. Every
		// shard that is not exhausted must have a buffered head before one is taken.
		var picked []indexEntry
		for len(result)+len(picked) < limit {
			if err := t.fill(ctx, q, limit, shards); err != nil {
				return Page{}, err
			}
			best := -1
			for i, s := range shards {
				if len(s.buf) > 0 && (best < 0 || newer(s.buf[0], shards[best].buf[0])) {
					best = i
				}
			}
			if best < 0 {
				break // every shard is exhausted
			}
			s := shards[best]
			e := s.buf[0]
			s.buf = s.buf[1:]
			s.at = &shardCursor{I: s.id, PK: e.pk, SK: &e.sk}
			s.done = len(s.buf) == 0 && s.next == nil
			if !seen[e.pk] {
				seen[e.pk] = true
				picked = append(picked, e)
			}
		}
		if len(picked) == 0 {
			break
		}
		found, err := t.current(ctx, picked, q, now)
		if err != nil {
			return Page{}, err
		}
		result = append(result, found...)
	}

	page := Page{Jobs: result}
	if !allDone(shards) {
		tok := &pageToken{V: tokenVersion, State: string(q.State), Kind: q.Kind, Shards: t.shards}
		for _, s := range shards {
			switch {
			case s.done:
				tok.Pos = append(tok.Pos, shardCursor{I: s.id, Done: true})
			case s.at != nil:
				tok.Pos = append(tok.Pos, *s.at)
			}
		}
		page.NextPageToken = encodeToken(tok)
	}
	return page, nil
}

// newer orders index entries newest first; ties go to the smaller partition key, so that the
// merged order does not depend on which shard answered first.
func newer(a, b indexEntry) bool {
	if a.sk != b.sk {
		return a.sk > b.sk
	}
	return a.pk < b.pk
}

func allDone(shards []*shardScan) bool {
	for _, s := range shards {
		if !s.done || len(s.buf) > 0 {
			return false
		}
	}
	return true
}

// startKey returns the ExclusiveStartKey that continues a shard after c: the table key plus the
// index keys, as DynamoDB requires for an index query.
func (t *Table) startKey(state idempotency.State, c *shardCursor) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{idempotency.AttrPK: attrS(c.PK), idempotency.AttrGSI1PK: attrS(shardPartition(state, c.I))}
	if c.SK != nil {
		key[idempotency.AttrGSI1SK] = attrN(*c.SK)
	}
	return key
}

// fill queries, concurrently, every shard that has no buffered entry and is not exhausted, until
// each has an entry (a kind filter may leave whole responses empty) or is exhausted.
func (t *Table) fill(ctx context.Context, q ListQuery, limit int, shards []*shardScan) error {
	var need []*shardScan
	for _, s := range shards {
		if len(s.buf) == 0 && !s.done {
			need = append(need, s)
		}
	}
	if len(need) == 0 {
		return nil
	}
	return t.parallel(ctx, len(need), func(ctx context.Context, i int) error {
		s := need[i]
		for len(s.buf) == 0 && !s.done {
			if err := t.fetch(ctx, q, limit, s); err != nil {
				return fmt.Errorf("status: list %s: query shard %d: %w", q.State, s.id, err)
			}
		}
		return nil
	})
}

// fetch runs one query on a shard, from s.next, and buffers its entries.
func (t *Table) fetch(ctx context.Context, q ListQuery, limit int, s *shardScan) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(t.table),
		IndexName:                 aws.String(idempotency.IndexByStatus),
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": idempotency.AttrGSI1PK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": attrS(shardPartition(q.State, s.id))},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
		ExclusiveStartKey:         s.next,
	}
	if q.Kind != "" {
		// DynamoDB applies Limit before the filter: a response may hold fewer entries than
		// Limit, or none, and still have a LastEvaluatedKey. fill keeps querying.
		in.FilterExpression = aws.String("#k = :k")
		in.ExpressionAttributeNames["#k"] = idempotency.AttrKind
		in.ExpressionAttributeValues[":k"] = attrS(q.Kind)
	}
	out, err := t.client.Query(ctx, in)
	if err != nil {
		return err
	}
	if s.fetched && s.next != nil {
		// Everything up to this response's start key was consumed or filtered out.
		c, err := cursorFromKey(s.id, s.next)
		if err != nil {
			return err
		}
		s.at = c
	}
	s.fetched = true
	s.buf = s.buf[:0]
	for _, item := range out.Items {
		pk, err := getS(item, idempotency.AttrPK)
		if err != nil {
			return err
		}
		sk, ok, err := getN(item, idempotency.AttrGSI1SK)
		if err != nil {
			return err
		}
		if pk == "" || !ok {
			return fmt.Errorf("index entry without %s or %s", idempotency.AttrPK, idempotency.AttrGSI1SK)
		}
		s.buf = append(s.buf, indexEntry{pk: pk, sk: sk})
	}
	s.next = out.LastEvaluatedKey
	if len(s.next) == 0 {
		s.next = nil
	}
	s.done = len(s.buf) == 0 && s.next == nil
	return nil
}

// cursorFromKey turns a LastEvaluatedKey into a shard position.
func cursorFromKey(shard int, key map[string]types.AttributeValue) (*shardCursor, error) {
	pk, err := getS(key, idempotency.AttrPK)
	if err != nil {
		return nil, err
	}
	if pk == "" {
		return nil, fmt.Errorf("LastEvaluatedKey without %s", idempotency.AttrPK)
	}
	c := &shardCursor{I: shard, PK: pk}
	if sk, ok, err := getN(key, idempotency.AttrGSI1SK); err != nil {
		return nil, err
	} else if ok {
		c.SK = &sk
	}
	return c, nil
}

// current reads the picked entries' items and returns, in the entries' order, the jobs still in
// q's state and not expired at now.
func (t *Table) current(ctx context.Context, picked []indexEntry, q ListQuery, now time.Time) ([]Job, error) {
	pks := make([]string, len(picked))
	for i, e := range picked {
		pks[i] = e.pk
	}
	items, err := t.batchGet(ctx, pks)
	if err != nil {
		return nil, fmt.Errorf("status: list %s: %w", q.State, err)
	}
	out := make([]Job, 0, len(picked))
	for _, e := range picked {
		item, ok := items[e.pk]
		if !ok {
			continue // deleted (TTL) after the index entry was read
		}
		j, err := jobFromItem(item, now)
		if err != nil {
			return nil, err
		}
		if j.State != q.State || j.Expired || q.Kind != "" && j.Kind != q.Kind {
			continue
		}
		out = append(out, j)
	}
	return out, nil
}
