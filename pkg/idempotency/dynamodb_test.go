package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/idempotency/idempotencytest"
)

// emulatorClient returns a DynamoDB client on the shared embedded emulator (or AWS_ENDPOINT_URL).
func emulatorClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	backend := awslocaltest.Backend(t)
	// The embedded emulator sends no CRC32 header: without this the SDK warns on every call.
	return dynamodb.NewFromConfig(backend.Config, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
}

// newTable creates a job table with TableInput, waits until it is active, and enables TTL.
func newTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := awslocal.ProvisionTable(ctx, client, awslocal.UniqueName("idem"))
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func newDynamoDBStore(t *testing.T, client idempotency.DynamoDBAPI, table string) *idempotency.DynamoDBStore {
	t.Helper()
	s, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func seedDynamoDB(t *testing.T, s idempotency.Store, r idempotency.Record) {
	t.Helper()
	if err := s.(*idempotency.DynamoDBStore).Put(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// allOldClient makes the emulator behave like DynamoDB on a failed condition: it attaches the
// item to the ConditionalCheckFailedException when ReturnValuesOnConditionCheckFailure is
// ALL_OLD (read through raw, which the counting wrapper does not see).
type allOldClient struct {
	idempotency.DynamoDBAPI
	raw *dynamodb.Client
}

func (c allOldClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.DynamoDBAPI.UpdateItem(ctx, in, opts...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) == 0 && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
		if g, gerr := c.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)}); gerr == nil {
			ccf.Item = g.Item
		}
	}
	return out, err
}

func TestDynamoDBStoreConformance(t *testing.T) {
	t.Parallel()
	client := emulatorClient(t)
	table := newTable(t, client)
	for _, tt := range []struct {
		name   string
		client idempotency.DynamoDBAPI
	}{
		{"GetItemFallback", client}, // the emulator ignores ALL_OLD on a failed condition
		{"AllOld", allOldClient{DynamoDBAPI: client, raw: client}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newDynamoDBStore(t, tt.client, table)
			idempotencytest.RunWithOptions(t, func(*testing.T) idempotency.Store { return s },
				idempotencytest.Options{Seed: seedDynamoDB})
		})
	}
}

// countingClient counts calls per operation and keeps every input's expression names.
type countingClient struct {
	idempotency.DynamoDBAPI
	mu     sync.Mutex
	calls  map[string]int
	inputs []map[string]string // ExpressionAttributeNames of each call
}

func (c *countingClient) count(op string, names map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
	c.inputs = append(c.inputs, names)
}

func (c *countingClient) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

func (c *countingClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem", in.ExpressionAttributeNames)
	return c.DynamoDBAPI.UpdateItem(ctx, in, opts...)
}

func (c *countingClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem", in.ExpressionAttributeNames)
	return c.DynamoDBAPI.GetItem(ctx, in, opts...)
}

func (c *countingClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.count("PutItem", in.ExpressionAttributeNames)
	return c.DynamoDBAPI.PutItem(ctx, in, opts...)
}

func TestDynamoDBStoreCallCounts(t *testing.T) {
	t.Parallel()
	raw := emulatorClient(t)
	table := newTable(t, raw)
	t0 := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	claim := func(key, token string, now time.Time) idempotency.ClaimRequest {
		return idempotency.ClaimRequest{Kind: "count", Key: key, JobID: "job-" + token, PayloadHash: "h", Token: token,
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	}
	finish := func(key, token string, state idempotency.State, now time.Time, exp time.Time) idempotency.Finish {
		return idempotency.Finish{Kind: "count", Key: key, Token: token, State: state, Now: now, ExpiresAt: exp}
	}
	type calls = map[string]int
	tests := []struct {
		name      string
		allOld    bool
		setup     func(t *testing.T, s idempotency.Store, key string)
		act       func(t *testing.T, s idempotency.Store, key string)
		want      calls
		wantClaim bool
	}{
		{
			name: "claim+finish success",
			act: func(t *testing.T, s idempotency.Store, key string) {
				mustClaimed(t, s, claim(key, "A", t0), true)
				mustFinish(t, s, finish(key, "A", idempotency.StateSucceeded, t0.Add(time.Second), t0.Add(24*time.Hour)))
			},
			want: calls{"UpdateItem": 2},
		},
		{
			name: "claim+finish failure",
			act: func(t *testing.T, s idempotency.Store, key string) {
				mustClaimed(t, s, claim(key, "A", t0), true)
				f := finish(key, "A", idempotency.StateRetrying, t0.Add(time.Second), t0.Add(24*time.Hour))
				f.Error = "boom"
				mustFinish(t, s, f)
			},
			want: calls{"UpdateItem": 2},
		},
		{
			name:  "duplicate of a succeeded job (GetItem fallback)",
			setup: succeeded(t0, claim, finish),
			act: func(t *testing.T, s idempotency.Store, key string) {
				mustClaimed(t, s, claim(key, "B", t0.Add(time.Minute)), false)
			},
			want: calls{"UpdateItem": 1, "GetItem": 1},
		},
		{
			name:   "duplicate of a succeeded job (ALL_OLD returned)",
			allOld: true,
			setup:  succeeded(t0, claim, finish),
			act: func(t *testing.T, s idempotency.Store, key string) {
				mustClaimed(t, s, claim(key, "B", t0.Add(time.Minute)), false)
			},
			want: calls{"UpdateItem": 1},
		},
		{
			name:   "claim over an expired record",
			allOld: true,
			setup:  succeeded(t0, claim, finish),
			act: func(t *testing.T, s idempotency.Store, key string) {
				mustClaimed(t, s, claim(key, "B", t0.Add(48*time.Hour)), true)
			},
			want: calls{"UpdateItem": 1, "PutItem": 1},
		},
		{
			name: "claim with attempts_before (no record)",
			act: func(t *testing.T, s idempotency.Store, key string) {
				r := claim(key, "A", t0)
				r.AttemptsBefore = 2
				if rec := mustClaimed(t, s, r, true); rec.Runs != 3 {
					t.Errorf("runs %d, want 3", rec.Runs)
				}
			},
			want: calls{"UpdateItem": 1},
		},
		{
			name:   "claim with attempts_before below the record's runs",
			allOld: true,
			setup: func(t *testing.T, s idempotency.Store, key string) {
				for i, tok := range []string{"A", "B"} {
					now := t0.Add(time.Duration(i) * time.Second)
					mustClaimed(t, s, claim(key, tok, now), true)
					mustFinish(t, s, finish(key, tok, idempotency.StateRetrying, now.Add(time.Millisecond), t0.Add(24*time.Hour)))
				}
			},
			act: func(t *testing.T, s idempotency.Store, key string) {
				r := claim(key, "C", t0.Add(time.Minute))
				r.AttemptsBefore = 1
				if rec := mustClaimed(t, s, r, true); rec.Runs != 3 {
					t.Errorf("runs %d, want 3", rec.Runs)
				}
			},
			want: calls{"UpdateItem": 2}, // the first write's runs condition refuses it
		},
		{
			name:  "renew",
			setup: func(t *testing.T, s idempotency.Store, key string) { mustClaimed(t, s, claim(key, "A", t0), true) },
			act: func(t *testing.T, s idempotency.Store, key string) {
				if err := s.Renew(context.Background(), idempotency.Renewal{Kind: "count", Key: key, Token: "A", LeaseUntil: t0.Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
			},
			want: calls{"UpdateItem": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var inner idempotency.DynamoDBAPI = raw
			if tt.allOld {
				inner = allOldClient{DynamoDBAPI: raw, raw: raw}
			}
			counter := &countingClient{DynamoDBAPI: inner}
			s := newDynamoDBStore(t, counter, table)
			key := awslocal.UniqueName("k")
			if tt.setup != nil {
				tt.setup(t, s, key)
			}
			counter.reset()
			tt.act(t, s, key)
			got := counter.reset()
			if len(got) != len(tt.want) {
				t.Errorf("calls %v, want %v", got, tt.want)
			}
			for op, n := range tt.want {
				if got[op] != n {
					t.Errorf("calls %v, want %v", got, tt.want)
					break
				}
			}
			checkPlaceholders(t, counter.inputs)
		})
	}
}

func succeeded(t0 time.Time, claim func(key, token string, now time.Time) idempotency.ClaimRequest,
	finish func(key, token string, state idempotency.State, now, exp time.Time) idempotency.Finish) func(*testing.T, idempotency.Store, string) {
	return func(t *testing.T, s idempotency.Store, key string) {
		mustClaimed(t, s, claim(key, "A", t0), true)
		mustFinish(t, s, finish(key, "A", idempotency.StateSucceeded, t0.Add(time.Second), t0.Add(24*time.Hour)))
	}
}

// checkPlaceholders checks that no expression attribute name placeholder is a prefix of another:
// some emulators substitute names textually.
func checkPlaceholders(t *testing.T, inputs []map[string]string) {
	t.Helper()
	for _, names := range inputs {
		for a := range names {
			for b := range names {
				if a != b && strings.HasPrefix(b, a) {
					t.Errorf("placeholder %s is a prefix of %s", a, b)
				}
			}
		}
	}
}

func mustClaimed(t *testing.T, s idempotency.Store, r idempotency.ClaimRequest, want bool) idempotency.Record {
	t.Helper()
	res, err := s.Claim(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Claimed != want {
		t.Fatalf("Claimed = %v, want %v (%+v)", res.Claimed, want, res.Record)
	}
	return res.Record
}

func mustFinish(t *testing.T, s idempotency.Store, f idempotency.Finish) {
	t.Helper()
	if err := s.Finish(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// TestDynamoDBStoreStatusIndex checks the sparse by-status index attributes: present exactly for
// retrying, dead, cancelled (and seeded scheduled) records, keyed by state and shard, sorted by
// the update time.
func TestDynamoDBStoreStatusIndex(t *testing.T) {
	t.Parallel()
	client := emulatorClient(t)
	table := newTable(t, client)
	s := newDynamoDBStore(t, client, table)
	t0 := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	raw := func(t *testing.T, key string) map[string]types.AttributeValue {
		t.Helper()
		out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{idempotency.AttrPK: &types.AttributeValueMemberS{Value: idempotency.ItemKey("idx", key)}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	checkIndexed := func(t *testing.T, key string, state idempotency.State, upd time.Time) {
		t.Helper()
		item := raw(t, key)
		pk, hasPK := item[idempotency.AttrGSI1PK].(*types.AttributeValueMemberS)
		sk, hasSK := item[idempotency.AttrGSI1SK].(*types.AttributeValueMemberN)
		if !idempotency.StatusIndexed(state) {
			if hasPK || hasSK {
				t.Errorf("state %s: index attributes present (%v, %v)", state, item[idempotency.AttrGSI1PK], item[idempotency.AttrGSI1SK])
			}
			return
		}
		wantPK := idempotency.StatusPartition(state, idempotency.ItemKey("idx", key), idempotency.DefaultShards)
		if !hasPK || pk.Value != wantPK {
			t.Errorf("state %s: %s = %v, want %q", state, idempotency.AttrGSI1PK, item[idempotency.AttrGSI1PK], wantPK)
		}
		if wantSK := strconv.FormatInt(upd.UnixMilli(), 10); !hasSK || sk.Value != wantSK {
			t.Errorf("state %s: %s = %v, want %d", state, idempotency.AttrGSI1SK, item[idempotency.AttrGSI1SK], upd.UnixMilli())
		}
	}
	for _, state := range []idempotency.State{idempotency.StateSucceeded, idempotency.StateRetrying, idempotency.StateDead, idempotency.StateCancelled} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			key := awslocal.UniqueName(string(state))
			r := idempotency.ClaimRequest{Kind: "idx", Key: key, JobID: "j1", Token: "A", Now: t0, LeaseUntil: t0.Add(time.Minute)}
			mustClaimed(t, s, r, true)
			checkIndexed(t, key, idempotency.StateRunning, t0)
			upd := t0.Add(1234 * time.Millisecond)
			mustFinish(t, s, idempotency.Finish{Kind: "idx", Key: key, Token: "A", State: state, Now: upd, Error: "e"})
			checkIndexed(t, key, state, upd)
			if state.Claimable() {
				r.Token, r.Now, r.LeaseUntil = "B", upd.Add(time.Second), upd.Add(time.Minute)
				mustClaimed(t, s, r, true)
				checkIndexed(t, key, idempotency.StateRunning, r.Now)
			}
		})
	}
	t.Run("scheduled", func(t *testing.T) {
		t.Parallel()
		key := awslocal.UniqueName("scheduled")
		if err := s.Put(context.Background(), idempotency.Record{Kind: "idx", Key: key, JobID: "j", State: idempotency.StateScheduled, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		checkIndexed(t, key, idempotency.StateScheduled, t0)
	})
	t.Run("query", func(t *testing.T) {
		t.Parallel()
		key := awslocal.UniqueName("query")
		pk := idempotency.ItemKey("idx", key)
		mustClaimed(t, s, idempotency.ClaimRequest{Kind: "idx", Key: key, JobID: "jq", Token: "A", Now: t0, LeaseUntil: t0.Add(time.Minute)}, true)
		mustFinish(t, s, idempotency.Finish{Kind: "idx", Key: key, Token: "A", State: idempotency.StateDead, Reason: "exhausted", Now: t0})
		out, err := client.Query(context.Background(), &dynamodb.QueryInput{
			TableName: aws.String(table), IndexName: aws.String(idempotency.IndexByStatus),
			KeyConditionExpression:    aws.String("#p = :p"),
			ExpressionAttributeNames:  map[string]string{"#p": idempotency.AttrGSI1PK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: idempotency.StatusPartition(idempotency.StateDead, pk, idempotency.DefaultShards)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, item := range out.Items {
			rec, err := idempotency.RecordFromItem(item)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Key == key {
				found = rec.State == idempotency.StateDead && rec.Reason == "exhausted" && rec.JobID == "jq"
			}
		}
		if !found {
			t.Errorf("the dead record is not listed by %s: %v", idempotency.IndexByStatus, out.Items)
		}
	})
}

// failingClient fails every call with err.
type failingClient struct{ err error }

func (c failingClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, c.err
}

func (c failingClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, c.err
}

func (c failingClient) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, c.err
}

func TestDynamoDBStoreWrapsErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	s := newDynamoDBStore(t, failingClient{boom}, "jobs")
	ctx := context.Background()
	now := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	_, claimErr := s.Claim(ctx, idempotency.ClaimRequest{Kind: "k", Key: "a", Token: "t", Now: now, LeaseUntil: now.Add(time.Minute)})
	_, getErr := s.Get(ctx, "k", "a")
	for name, err := range map[string]error{
		"Claim":  claimErr,
		"Finish": s.Finish(ctx, idempotency.Finish{Kind: "k", Key: "a", Token: "t", State: idempotency.StateSucceeded, Now: now}),
		"Renew":  s.Renew(ctx, idempotency.Renewal{Kind: "k", Key: "a", Token: "t", LeaseUntil: now}),
		"Get":    getErr,
		"Put":    s.Put(ctx, idempotency.Record{Kind: "k", Key: "a", State: idempotency.StateQueued}),
	} {
		if !errors.Is(err, boom) || errors.Is(err, idempotency.ErrLeaseLost) || !strings.Contains(err.Error(), "k#a") {
			t.Errorf("%s = %v, want the client's error wrapped with the item key", name, err)
		}
	}
}

// staleClient refuses every claim and answers reads with a claimable record, as a record that
// keeps changing between the refused write and the read would: the claim loop must stop.
type staleClient struct{ failingClient }

func (staleClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
}

func (staleClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: idempotency.ItemFromRecord(idempotency.Record{Kind: "k", Key: "a", State: idempotency.StateRetrying, Runs: 1}, 0)}, nil
}

func TestDynamoDBStoreClaimLoopIsBounded(t *testing.T) {
	t.Parallel()
	s := newDynamoDBStore(t, staleClient{}, "jobs")
	now := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := s.Claim(context.Background(), idempotency.ClaimRequest{Kind: "k", Key: "a", Token: "t", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err == nil || res.Claimed {
		t.Errorf("Claim = %+v, %v; want an error after a bounded number of rounds", res, err)
	}
}

func TestNewDynamoDBStoreValidates(t *testing.T) {
	t.Parallel()
	client := failingClient{}
	tests := []struct {
		name    string
		cfg     idempotency.DynamoDBConfig
		wantErr bool
		shards  int
	}{
		{"defaults", idempotency.DynamoDBConfig{Client: client, Table: "jobs"}, false, idempotency.DefaultShards},
		{"shards", idempotency.DynamoDBConfig{Client: client, Table: "my_jobs-1.x", Shards: 4}, false, 4},
		{"no client", idempotency.DynamoDBConfig{Table: "jobs"}, true, 0},
		{"no table", idempotency.DynamoDBConfig{Client: client}, true, 0},
		{"short table", idempotency.DynamoDBConfig{Client: client, Table: "ab"}, true, 0},
		{"bad table", idempotency.DynamoDBConfig{Client: client, Table: "jobs table"}, true, 0},
		{"long table", idempotency.DynamoDBConfig{Client: client, Table: strings.Repeat("t", 256)}, true, 0},
		{"negative shards", idempotency.DynamoDBConfig{Client: client, Table: "jobs", Shards: -1}, true, 0},
		{"too many shards", idempotency.DynamoDBConfig{Client: client, Table: "jobs", Shards: 1001}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := idempotency.NewDynamoDBStore(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (s.Shards() != tt.shards || s.Table() != tt.cfg.Table) {
				t.Errorf("store table %q shards %d", s.Table(), s.Shards())
			}
		})
	}
}
