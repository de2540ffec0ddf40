package status

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// testNow is the clock of every test.
var testNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// byStatusProjection is the by_status index's INCLUDE list, as the store creates the table.
var byStatusProjection = func() []string {
	for _, g := range idempotency.TableInput("x").GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == idempotency.IndexByStatus {
			return g.Projection.NonKeyAttributes
		}
	}
	panic("no by_status index")
}()

// emulatorTable creates a fresh job table on the shared backend and returns a Table on it (clock
// testNow) and the raw client for seeding and inspecting items.
func emulatorTable(t *testing.T) (*Table, *dynamodb.Client, string) {
	t.Helper()
	backend := awslocaltest.Backend(t)
	client := dynamodb.NewFromConfig(backend.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	name := awslocal.UniqueName("status")
	if _, err := ddbtable.Create(context.Background(), client, idempotency.TableInput(name), ddbtable.Wait{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := New(Config{Client: checked{client}, Table: name, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	return tbl, client, name
}

// seed describes a record to put directly, in the shared schema.
type seed struct {
	kind, key, jobID string
	state            idempotency.State
	runs             int
	upd              time.Time
	exp              time.Time // zero: no expiry
	tok, errText     string
	reason           string
}

func (s seed) pk() string { return idempotency.ItemKey(s.kind, s.key) }

// item builds the record's item as the store writes it (by_status keys for indexed states only).
func (s seed) item(shards int) map[string]types.AttributeValue {
	r := idempotency.Record{
		Kind: s.kind, Key: s.key, JobID: s.jobID, State: s.state, Runs: s.runs, Token: s.tok,
		PayloadHash: "h-" + s.key, LastError: s.errText, Reason: s.reason, UpdatedAt: s.upd, ExpiresAt: s.exp,
	}
	if s.runs > 0 {
		r.FirstAttemptAt, r.LastAttemptAt = s.upd.Add(-time.Minute), s.upd.Add(-time.Second)
	}
	if s.tok != "" {
		r.LeaseUntil = s.upd.Add(5 * time.Minute)
	}
	return idempotency.ItemFromRecord(r, shards)
}

func putSeeds(t *testing.T, client *dynamodb.Client, table string, seeds ...seed) {
	t.Helper()
	for _, s := range seeds {
		if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(table), Item: s.item(idempotency.DefaultShards),
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func rawItem(t *testing.T, client *dynamodb.Client, table, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// manySeeds returns n records spread over every state and two kinds, with update times that tie
// across shards (groups of six share one millisecond) but never within a shard of one state:
// the embedded emulator orders equal sort keys differently on every query, so it cannot page
// through ties inside one partition (DynamoDB can; fakeDB tests that). Some dead records are
// expired, one of them exactly at testNow.
func manySeeds(n int) []seed {
	states := []idempotency.State{
		idempotency.StateDead, idempotency.StateRetrying, idempotency.StateScheduled,
		idempotency.StateDead, idempotency.StateRunning, idempotency.StateSucceeded,
		idempotency.StateCancelled, idempotency.StateQueued,
	}
	used := map[string]bool{} // state#shard#upd
	var out []seed
	for i := range n {
		s := seed{
			kind:  []string{"email.send", "report.build"}[i%2],
			key:   fmt.Sprintf("k%03d", i),
			jobID: fmt.Sprintf("job-%03d", i),
			state: states[i%len(states)],
			runs:  i % 4,
			upd:   testNow.Add(-time.Hour + time.Duration(i/6)*time.Second),
		}
		for {
			k := fmt.Sprintf("%s#%d#%d", s.state, idempotency.Shard(s.pk(), idempotency.DefaultShards), unixMs(s.upd))
			if !used[k] {
				used[k] = true
				break
			}
			s.upd = s.upd.Add(time.Millisecond)
		}
		switch {
		case i%16 == 0:
			s.exp = testNow.Add(-time.Second) // expired, not deleted yet
		case i%32 == 3:
			s.exp = testNow // expires exactly now: expired
		default:
			s.exp = testNow.Add(time.Hour)
		}
		if s.state == idempotency.StateDead {
			s.reason, s.errText = "exhausted", "boom "+s.key
		}
		out = append(out, s)
	}
	return out
}

// expected returns the pks List should walk through: seeds in state, of kind (if set), not
// expired at testNow, newest first, ties by pk.
func expected(seeds []seed, state idempotency.State, kind string) []string {
	var want []seed
	for _, s := range seeds {
		if s.state == state && (kind == "" || s.kind == kind) && (s.exp.IsZero() || testNow.Before(s.exp)) {
			want = append(want, s)
		}
	}
	sort.Slice(want, func(a, b int) bool {
		if !want[a].upd.Equal(want[b].upd) {
			return want[a].upd.After(want[b].upd)
		}
		return want[a].pk() < want[b].pk()
	})
	pks := make([]string, len(want))
	for i, s := range want {
		pks[i] = s.pk()
	}
	return pks
}

// walk lists every page of q and returns the pks in order; it fails on a page larger than the
// limit or a short page that is not the last.
func walk(t *testing.T, tbl *Table, q ListQuery) []string {
	t.Helper()
	var pks []string
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("listing does not end")
		}
		p, err := tbl.List(context.Background(), q)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(p.Jobs) > q.Limit && q.Limit > 0 {
			t.Fatalf("page %d has %d jobs, limit %d", page, len(p.Jobs), q.Limit)
		}
		if p.NextPageToken != "" && q.Limit > 0 && len(p.Jobs) < q.Limit && len(p.Jobs) > 0 {
			t.Fatalf("page %d has %d jobs < limit %d but a next page", page, len(p.Jobs), q.Limit)
		}
		for _, j := range p.Jobs {
			if j.State != q.State || j.Expired {
				t.Fatalf("page %d: listed %s/%s in state %s, expired %v", page, j.Kind, j.Key, j.State, j.Expired)
			}
			pks = append(pks, idempotency.ItemKey(j.Kind, j.Key))
		}
		if p.NextPageToken == "" {
			return pks
		}
		q.PageToken = p.NextPageToken
	}
}

// checked wraps a client and rejects requests whose expressions leave an attribute name or value
// placeholder unused, or use one that is not defined: DynamoDB rejects both; the emulator may
// not.
type checked struct{ DynamoDBAPI }

var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

func checkExpr(names map[string]string, values map[string]types.AttributeValue, exprs ...*string) error {
	used := map[string]bool{}
	for _, e := range exprs {
		if e == nil {
			continue
		}
		for _, p := range placeholder.FindAllString(*e, -1) {
			used[p] = true
			_, isName := names[p]
			_, isValue := values[p]
			if !isName && !isValue {
				return fmt.Errorf("placeholder %s is not defined", p)
			}
		}
	}
	for n := range names {
		if !used[n] {
			return fmt.Errorf("ExpressionAttributeNames %s unused", n)
		}
	}
	for v := range values {
		if !used[v] {
			return fmt.Errorf("ExpressionAttributeValues %s unused", v)
		}
	}
	return nil
}

func (c checked) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := checkExpr(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.KeyConditionExpression, in.FilterExpression, in.ProjectionExpression); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.Query(ctx, in, o...)
}

func (c checked) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := checkExpr(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.PutItem(ctx, in, o...)
}

func (c checked) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := checkExpr(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.UpdateExpression, in.ConditionExpression); err != nil {
		return nil, err
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, o...)
}
