package idempotency_test

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

func TestItemKeyAndShards(t *testing.T) {
	t.Parallel()
	if got := idempotency.ItemKey("email.send", "order-42"); got != "email.send#order-42" {
		t.Errorf("ItemKey = %q", got)
	}
	// The shard formula is shared with pkg/status (and any other reader): fnv32a(pk) mod shards.
	pk := idempotency.ItemKey("email.send", "order-42")
	if got, want := idempotency.Shard(pk, 1<<31), int(fnv32a(pk)%(1<<31)); got != want {
		t.Errorf("Shard(%q) = %d, want fnv32a %% n = %d", pk, got, want)
	}
	seen := map[int]bool{}
	for i := range 1000 {
		s := idempotency.Shard(idempotency.ItemKey("email.send", "order-"+strconv.Itoa(i)), 16)
		if s < 0 || s >= 16 {
			t.Fatalf("shard %d out of range", s)
		}
		seen[s] = true
	}
	if len(seen) != 16 {
		t.Errorf("1000 keys used %d of 16 shards", len(seen))
	}
	if got, want := idempotency.StatusPartition(idempotency.StateDead, pk, 16), "dead#"+strconv.Itoa(idempotency.Shard(pk, 16)); got != want {
		t.Errorf("StatusPartition = %q, want %q", got, want)
	}
	long := strings.Repeat("k", idempotency.MaxItemKeyBytes)
	if got := idempotency.ItemKey("email.send", long); len(got) > idempotency.MaxItemKeyBytes || !strings.HasPrefix(got, "email.send#sha256:") ||
		got == idempotency.ItemKey("email.send", long+"x") {
		t.Errorf("ItemKey of a long key = %q", got)
	}
	if idempotency.Shard(pk, 1) != 0 {
		t.Error("one shard is not shard 0")
	}
}

func TestStatusIndexed(t *testing.T) {
	t.Parallel()
	want := map[idempotency.State]bool{idempotency.StateRetrying: true, idempotency.StateDead: true,
		idempotency.StateScheduled: true, idempotency.StateCancelled: true}
	for _, s := range []idempotency.State{idempotency.StateQueued, idempotency.StateScheduled, idempotency.StateRunning,
		idempotency.StateSucceeded, idempotency.StateRetrying, idempotency.StateDead, idempotency.StateCancelled} {
		if got := idempotency.StatusIndexed(s); got != want[s] {
			t.Errorf("StatusIndexed(%s) = %v", s, got)
		}
	}
}

func TestTableInput(t *testing.T) {
	t.Parallel()
	in := idempotency.TableInput("jobs")
	if aws.ToString(in.TableName) != "jobs" || in.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("table %q billing %s", aws.ToString(in.TableName), in.BillingMode)
	}
	if len(in.KeySchema) != 1 || aws.ToString(in.KeySchema[0].AttributeName) != idempotency.AttrPK {
		t.Errorf("key schema %+v", in.KeySchema)
	}
	defs := map[string]types.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		defs[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	wantDefs := map[string]types.ScalarAttributeType{idempotency.AttrPK: "S", idempotency.AttrGSI1PK: "S", idempotency.AttrGSI1SK: "N", idempotency.AttrJobID: "S"}
	if len(defs) != len(wantDefs) {
		t.Errorf("attribute definitions %v, want %v", defs, wantDefs)
	}
	for k, v := range wantDefs {
		if defs[k] != v {
			t.Errorf("attribute %s: %s, want %s", k, defs[k], v)
		}
	}
	idx := map[string]types.GlobalSecondaryIndex{}
	for _, g := range in.GlobalSecondaryIndexes {
		idx[aws.ToString(g.IndexName)] = g
	}
	byStatus, byID := idx[idempotency.IndexByStatus], idx[idempotency.IndexByID]
	if byStatus.Projection == nil || byStatus.Projection.ProjectionType != types.ProjectionTypeInclude || len(byStatus.KeySchema) != 2 {
		t.Fatalf("%s: %+v", idempotency.IndexByStatus, byStatus)
	}
	for _, a := range []string{idempotency.AttrKind, idempotency.AttrKey, idempotency.AttrJobID, idempotency.AttrState,
		idempotency.AttrRuns, idempotency.AttrReason, idempotency.AttrUpdated, idempotency.AttrLastAt} {
		if !slices.Contains(byStatus.Projection.NonKeyAttributes, a) {
			t.Errorf("%s does not project %s", idempotency.IndexByStatus, a)
		}
	}
	if byID.Projection == nil || byID.Projection.ProjectionType != types.ProjectionTypeKeysOnly ||
		len(byID.KeySchema) != 1 || aws.ToString(byID.KeySchema[0].AttributeName) != idempotency.AttrJobID {
		t.Errorf("%s: %+v", idempotency.IndexByID, byID)
	}
}

func TestRecordFromItem(t *testing.T) {
	t.Parallel()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	tests := []struct {
		name    string
		item    map[string]types.AttributeValue
		want    idempotency.Record
		wantErr bool
	}{
		{"full", map[string]types.AttributeValue{
			"pk": s("k#a"), "kind": s("k"), "key": s("a"), "job_id": s("j"), "st": s("running"), "runs": n("3"),
			"tok": s("t"), "lease": n("2524608001234"), "hash": s("h"), "err": s("e"), "reason": s("r"),
			"first_at": n("2524608000000"), "last_at": n("2524608000001"), "upd": n("2524608000002"), "exp": n("2524694400"),
		}, idempotency.Record{Kind: "k", Key: "a", JobID: "j", State: idempotency.StateRunning, Runs: 3, Token: "t",
			LeaseUntil: time.UnixMilli(2524608001234), PayloadHash: "h", LastError: "e", Reason: "r",
			FirstAttemptAt: time.UnixMilli(2524608000000), LastAttemptAt: time.UnixMilli(2524608000001),
			UpdatedAt: time.UnixMilli(2524608000002), ExpiresAt: time.Unix(2524694400, 0)}, false},
		{"kind and key from pk", map[string]types.AttributeValue{"pk": s("email.send#a#b"), "st": s("dead")},
			idempotency.Record{Kind: "email.send", Key: "a#b", State: idempotency.StateDead}, false},
		{"float-formatted number", map[string]types.AttributeValue{"pk": s("k#a"), "runs": n("2.0")},
			idempotency.Record{Kind: "k", Key: "a", Runs: 2}, false},
		{"fractional number", map[string]types.AttributeValue{"pk": s("k#a"), "runs": n("2.5")}, idempotency.Record{}, true},
		{"wrong type", map[string]types.AttributeValue{"pk": s("k#a"), "st": n("1")}, idempotency.Record{}, true},
		{"wrong number type", map[string]types.AttributeValue{"pk": s("k#a"), "lease": s("soon")}, idempotency.Record{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := idempotency.RecordFromItem(tt.item)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !recordsEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func recordsEqual(a, b idempotency.Record) bool {
	return a.Kind == b.Kind && a.Key == b.Key && a.JobID == b.JobID && a.State == b.State && a.Runs == b.Runs &&
		a.Token == b.Token && a.LeaseUntil.Equal(b.LeaseUntil) && a.PayloadHash == b.PayloadHash &&
		a.LastError == b.LastError && a.Reason == b.Reason && a.FirstAttemptAt.Equal(b.FirstAttemptAt) &&
		a.LastAttemptAt.Equal(b.LastAttemptAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

func TestItemFromRecordRoundTrip(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	in := idempotency.Record{Kind: "k", Key: "a", JobID: "j", State: idempotency.StateRetrying, Runs: 2,
		PayloadHash: "h", LastError: strings.Repeat("e", idempotency.MaxErrorBytes+5), Reason: "r",
		FirstAttemptAt: t0.Add(1500 * time.Microsecond), LastAttemptAt: t0.Add(time.Second), UpdatedAt: t0.Add(2 * time.Second),
		ExpiresAt: t0.Add(time.Hour + time.Millisecond)}
	item := idempotency.ItemFromRecord(in, 4)
	if _, ok := item[idempotency.AttrToken]; ok {
		t.Error("empty token written")
	}
	if pk := item[idempotency.AttrGSI1PK].(*types.AttributeValueMemberS).Value; pk != idempotency.StatusPartition(idempotency.StateRetrying, "k#a", 4) {
		t.Errorf("gsi1pk %q", pk)
	}
	got, err := idempotency.RecordFromItem(item)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.LastError = in.LastError[:idempotency.MaxErrorBytes]
	want.FirstAttemptAt = t0.Add(time.Millisecond)
	want.ExpiresAt = t0.Add(time.Hour + time.Second) // rounded up: never expires early
	if !recordsEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// ttlClient fakes the TTL calls.
type ttlClient struct {
	status  types.TimeToLiveStatus
	attr    string
	updates int
}

func (c *ttlClient) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: &types.TimeToLiveDescription{
		TimeToLiveStatus: c.status, AttributeName: aws.String(c.attr)}}, nil
}

func (c *ttlClient) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	c.updates++
	if aws.ToString(in.TimeToLiveSpecification.AttributeName) != idempotency.AttrExpires || !aws.ToBool(in.TimeToLiveSpecification.Enabled) {
		return nil, &types.ResourceNotFoundException{}
	}
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

func TestEnableTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		client      *ttlClient
		wantUpdates int
	}{
		{"disabled", &ttlClient{status: types.TimeToLiveStatusDisabled}, 1},
		{"enabled", &ttlClient{status: types.TimeToLiveStatusEnabled, attr: idempotency.AttrExpires}, 0},
		{"enabling", &ttlClient{status: types.TimeToLiveStatusEnabling, attr: idempotency.AttrExpires}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := idempotency.EnableTTL(context.Background(), tt.client, "jobs"); err != nil {
				t.Fatal(err)
			}
			if tt.client.updates != tt.wantUpdates {
				t.Errorf("%d UpdateTimeToLive calls, want %d", tt.client.updates, tt.wantUpdates)
			}
		})
	}
	t.Run("emulator twice", func(t *testing.T) {
		t.Parallel()
		client := emulatorClient(t)
		table := newTable(t, client) // enables TTL once
		if err := idempotency.EnableTTL(context.Background(), client, table); err != nil {
			t.Fatal(err)
		}
		d, err := client.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		if d.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.TimeToLiveDescription.AttributeName) != idempotency.AttrExpires {
			t.Errorf("TTL %+v", d.TimeToLiveDescription)
		}
	})
}

func fnv32a(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
