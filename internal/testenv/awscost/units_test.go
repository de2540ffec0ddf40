package awscost

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// testTable has a sparse INCLUDE index (by_status-like) and a keys-only one (by_id-like).
func testTable() *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String("t"),
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName: aws.String("by_status"),
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String("g1"), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String("g2"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"st", "runs"}},
			},
			{
				IndexName:  aws.String("by_id"),
				KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("job_id"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
			{
				IndexName: aws.String("all"),
				KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("a"), KeyType: types.KeyTypeHash}},
			},
		},
	}
}

type item = map[string]types.AttributeValue

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func TestSchemaFromCreateTable(t *testing.T) {
	sc := SchemaFromCreateTable(testTable())
	if len(sc.Keys) != 1 || sc.Keys[0] != "pk" || len(sc.Indexes) != 3 {
		t.Fatalf("schema = %+v", sc)
	}
	if ix := sc.Indexes[0]; ix.Name != "by_status" || strings.Join(ix.Keys, ",") != "g1,g2" ||
		ix.Projection != types.ProjectionTypeInclude || strings.Join(ix.Include, ",") != "st,runs" {
		t.Errorf("by_status = %+v", ix)
	}
	if ix := sc.Indexes[2]; ix.Projection != types.ProjectionTypeAll {
		t.Errorf("an index without a projection projects %q, want ALL", ix.Projection)
	}
}

func TestWriteUnits(t *testing.T) {
	sc := SchemaFromCreateTable(testTable())
	big := strings.Repeat("e", 1500)
	for _, tc := range []struct {
		name     string
		old, new item
		failed   bool
		table    int
		indexes  map[string]int
	}{
		{"insert without index keys", nil, item{"pk": s("a"), "st": s("running")}, false, 1, nil},
		{"insert with a by_id key", nil, item{"pk": s("a"), "job_id": s("j")}, false, 1, map[string]int{"by_id": 1}},
		{"update, the keys-only index key unchanged, other attributes changed", item{"pk": s("a"), "job_id": s("j"), "st": s("running")},
			item{"pk": s("a"), "job_id": s("j"), "st": s("succeeded")}, false, 1, nil},
		{"enter the sparse index", item{"pk": s("a"), "st": s("running")},
			item{"pk": s("a"), "st": s("retrying"), "g1": s("retrying#3"), "g2": n("5")}, false, 1, map[string]int{"by_status": 1}},
		{"leave it", item{"pk": s("a"), "st": s("retrying"), "g1": s("retrying#3"), "g2": n("5")},
			item{"pk": s("a"), "st": s("running")}, false, 1, map[string]int{"by_status": 1}},
		{"index key changes: delete and put", item{"pk": s("a"), "g1": s("retrying#3"), "g2": n("5")},
			item{"pk": s("a"), "g1": s("dead#3"), "g2": n("6")}, false, 1, map[string]int{"by_status": 2}},
		{"a projected attribute changes", item{"pk": s("a"), "g1": s("x"), "g2": n("5"), "runs": n("1")},
			item{"pk": s("a"), "g1": s("x"), "g2": n("5"), "runs": n("2")}, false, 1, map[string]int{"by_status": 1}},
		{"an attribute not projected changes", item{"pk": s("a"), "g1": s("x"), "g2": n("5"), "err": s("a")},
			item{"pk": s("a"), "g1": s("x"), "g2": n("5"), "err": s("b")}, false, 1, nil},
		{"ALL projection: any change", item{"pk": s("a"), "a": s("x"), "z": s("1")},
			item{"pk": s("a"), "a": s("x"), "z": s("2")}, false, 1, map[string]int{"all": 1}},
		{"billed on the larger item", item{"pk": s("a"), "err": s(big)}, item{"pk": s("a")}, false, 2, nil},
		{"delete", item{"pk": s("a"), "job_id": s("j")}, nil, false, 1, map[string]int{"by_id": 1}},
		{"refused, no item", nil, nil, true, 1, nil},
		{"refused, by the item's size", item{"pk": s("a"), "job_id": s("j"), "err": s(big)}, nil, true, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sc.WriteUnits(tc.old, tc.new, tc.failed)
			if c.Table != tc.table {
				t.Errorf("table units = %d, want %d", c.Table, tc.table)
			}
			if len(c.Indexes) != len(tc.indexes) {
				t.Errorf("index units = %v, want %v", c.Indexes, tc.indexes)
			}
			for k, v := range tc.indexes {
				if c.Indexes[k] != v {
					t.Errorf("index units = %v, want %v", c.Indexes, tc.indexes)
				}
			}
		})
	}
}

func TestLargeIndexEntry(t *testing.T) {
	sc := SchemaFromCreateTable(testTable())
	// ALL projects the whole item: a 1.5 KB item is a 2-unit index entry.
	c := sc.WriteUnits(nil, item{"pk": s("a"), "a": s("x"), "big": s(strings.Repeat("b", 1500))}, false)
	if c.Table != 2 || c.Indexes["all"] != 2 || c.Total() != 4 {
		t.Errorf("cost = %+v (total %d), want 2 + 2", c, c.Total())
	}
}

func TestLedger(t *testing.T) {
	l := NewLedger(map[string]Schema{"t": SchemaFromCreateTable(testTable())})
	key := item{"pk": s("a")}
	steps := []struct {
		after  item
		failed bool
		want   int
	}{
		{item{"pk": s("a"), "job_id": s("j"), "st": s("running")}, false, 2}, // insert + by_id
		{nil, true, 1}, // a refused duplicate claim
		{item{"pk": s("a"), "job_id": s("j"), "st": s("succeeded")}, false, 1},
	}
	for i, st := range steps {
		c, err := l.Record("t", key, st.after, st.failed)
		if err != nil {
			t.Fatal(err)
		}
		if c.Total() != st.want {
			t.Errorf("step %d: %d units, want %d", i, c.Total(), st.want)
		}
	}
	table, ix, writes := l.Totals()
	if table != 3 || ix["by_id"] != 1 || writes != 3 {
		t.Errorf("totals: table %d, indexes %v, writes %d; want 3, by_id 1, 3", table, ix, writes)
	}
	if _, err := l.Record("other", key, nil, false); err == nil {
		t.Error("a table without a schema was accepted")
	}
	if _, err := l.Record("t", item{"pk": &types.AttributeValueMemberBOOL{}}, nil, false); err == nil {
		t.Error("a key of type BOOL was accepted")
	}
}

// The ledger's images are what the writes recorded left: a deleted item is gone, a refused write
// changes nothing, and a copy does not change the ledger.
func TestLedgerItem(t *testing.T) {
	l := NewLedger(map[string]Schema{"t": SchemaFromCreateTable(testTable())})
	a, b := item{"pk": s("a")}, item{"pk": s("b")}
	if got, ok, err := l.Item("t", a); err != nil || ok || got != nil {
		t.Fatalf("an item never written: %v, %v, %v; want nil, false, nil", got, ok, err)
	}
	mustRecord := func(key, after item, failed bool) {
		t.Helper()
		if _, err := l.Record("t", key, after, failed); err != nil {
			t.Fatal(err)
		}
	}
	mustRecord(a, item{"pk": s("a"), "st": s("running")}, false)
	mustRecord(a, nil, true) // refused: the image stays
	mustRecord(b, item{"pk": s("b"), "st": s("queued")}, false)
	got, ok, err := l.Item("t", a)
	if err != nil || !ok || got["st"].(*types.AttributeValueMemberS).Value != "running" {
		t.Fatalf("item a: %v, %v, %v; want st running", got, ok, err)
	}
	got["st"] = s("changed")
	if again, _, _ := l.Item("t", a); again["st"].(*types.AttributeValueMemberS).Value != "running" {
		t.Error("changing the returned item changed the ledger's image")
	}
	if items := l.Items("t"); len(items) != 2 {
		t.Errorf("Items: %d items, want 2", len(items))
	}
	mustRecord(b, nil, false) // deleted
	if _, ok, _ := l.Item("t", b); ok {
		t.Error("a deleted item is still in the ledger")
	}
	if items := l.Items("t"); len(items) != 1 || items[0]["pk"].(*types.AttributeValueMemberS).Value != "a" {
		t.Errorf("Items after the delete: %v, want item a only", items)
	}
	if items := l.Items("other"); len(items) != 0 {
		t.Errorf("Items of a table never written: %v", items)
	}
	if _, _, err := l.Item("other", a); err == nil {
		t.Error("Item of a table without a schema: no error")
	}
	if _, _, err := l.Item("t", item{"pk": &types.AttributeValueMemberBOOL{}}); err == nil {
		t.Error("Item with a key of type BOOL: no error")
	}
}
