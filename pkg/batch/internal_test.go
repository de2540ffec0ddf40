package batch

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/producer"
)

// deltaFor: a child counted for the first time moves one from remaining to its outcome; a
// redriven dead child moves its count; a child counted as the same outcome, or succeeded or
// cancelled before, changes nothing.
func TestDeltaFor(t *testing.T) {
	for _, tt := range []struct {
		prev, o string
		want    delta
		change  bool
	}{
		{"", countedSucceeded, delta{remaining: -1, succeeded: 1}, true},
		{"", countedDead, delta{remaining: -1, dead: 1, xAdd: "j"}, true},
		{"", countedCancelled, delta{remaining: -1, cancelled: 1, xAdd: "j"}, true},
		{countedDead, countedSucceeded, delta{dead: -1, succeeded: 1, xDel: "j"}, true},
		{countedDead, countedCancelled, delta{dead: -1, cancelled: 1}, true},
		{countedDead, countedDead, delta{}, false},
		{countedSucceeded, countedDead, delta{}, false},
		{countedCancelled, countedSucceeded, delta{}, false},
	} {
		got, change := deltaFor(tt.prev, tt.o, "j")
		if change != tt.change || got != tt.want {
			t.Errorf("deltaFor(%q, %q) = %+v, %v; want %+v, %v", tt.prev, tt.o, got, change, tt.want, tt.change)
		}
	}
}

// A part's children survive encoding, a key equal to the id included; chunks stay within their
// bounds and cover every child once.
func TestPartsAndChunks(t *testing.T) {
	kids := []Child{{ID: "a", Kind: "k.x", Key: "a"}, {ID: "b", Kind: "k.y", Key: "order-1"}}
	enc := encodeChildren(kids)
	got, err := decodeChildren(map[string]types.AttributeValue{attrChildren: &types.AttributeValueMemberB{Value: enc}})
	if err != nil || !reflect.DeepEqual(got, kids) {
		t.Fatalf("decode: %v, %v; want %v", got, err, kids)
	}
	many := make([]Child, 2500)
	for i := range many {
		many[i] = Child{ID: strings.Repeat("x", 26), Kind: "k", Key: strings.Repeat("y", 100)}
	}
	seen := 0
	for _, c := range chunks(many, maxPartChildren) {
		n := c[1] - c[0]
		if n < 1 || n > maxPartChildren || c[0] != seen {
			t.Fatalf("chunk %v after %d", c, seen)
		}
		seen = c[1]
	}
	if seen != len(many) {
		t.Errorf("chunks cover %d of %d", seen, len(many))
	}
	if fingerprint(many[:10]) == fingerprint(many[:11]) {
		t.Error("two chunks with the same fingerprint")
	}
}

// withMeta tags a message's envelope and keeps its id, kind, key and args; a message already in
// a batch or chain is refused, and groupOf reads the tags back.
func TestWithMeta(t *testing.T) {
	m := producer.Message{ID: "01J", Kind: "k.x", Key: "01J", Body: `{"v":1,"id":"01J","kind":"k.x","args":{"a":1},"meta":{"tenant":"t1"}}`}
	tagged, err := withMeta(m, MetaBatch, "b1")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"id":"01J","kind":"k.x","args":{"a":1},"meta":{"batch":"b1","tenant":"t1"}}`
	if tagged.Body != want || tagged.ID != "01J" || tagged.Key != "01J" {
		t.Errorf("tagged: %+v\nwant body %s", tagged, want)
	}
	if _, err := withMeta(tagged, MetaChain, "c1", MetaChainStep, "1"); err == nil {
		t.Error("a message in a batch was tagged for a chain")
	}
	for _, tt := range []struct {
		meta map[string]string
		want group
		ok   bool
		bad  bool
	}{
		{nil, group{}, false, false},
		{map[string]string{MetaBatch: "b1"}, group{batch: "b1"}, true, false},
		{map[string]string{MetaChain: "c1", MetaChainStep: "3"}, group{chain: "c1", step: 3}, true, false},
		{map[string]string{MetaChain: "c1", MetaChainStep: "x"}, group{}, false, true},
		{map[string]string{MetaBatch: "a:b"}, group{}, false, true},
	} {
		g, ok, err := groupOf(tt.meta)
		if g != tt.want || ok != tt.ok || (err != nil) != tt.bad {
			t.Errorf("groupOf(%v) = %+v, %v, %v", tt.meta, g, ok, err)
		}
	}
}
