package ddbsize

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestNumberSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"0", 2},
		{"1", 2},
		{"12", 2},
		{"123", 3},
		{"-123", 3},
		{"1764410400123", 8}, // 13 digits: 7 + 1
		{"1000", 2},          // trailing zeros trimmed
		{"0.0012", 2},        // leading zeros trimmed
		{"12.5", 3},
		{"1.5E+10", 2},
		{"12345678901234567890123456789012345678", 20}, // 38 digits
	} {
		if got := NumberSize(tc.in); got != tc.want {
			t.Errorf("NumberSize(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestItemSize(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"empty", nil, 0},
		{"string: name + UTF-8 bytes", map[string]types.AttributeValue{"pk": s("héllo")}, 2 + 6},
		{"number", map[string]types.AttributeValue{"upd": n("1764410400123")}, 3 + 8},
		{"binary: raw bytes", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3}}}, 1 + 3},
		{"bool and null: 1 byte", map[string]types.AttributeValue{
			"ok": &types.AttributeValueMemberBOOL{Value: true}, "no": &types.AttributeValueMemberNULL{Value: true}}, 2 + 1 + 2 + 1},
		{"list: 3 + 1 per element", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("7")}}},
			1 + 3 + (1 + 2) + (1 + 2)},
		{"empty map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}, 1 + 3},
		{"map: element names count", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"xy": s("abc")}}},
			1 + 3 + (1 + 2 + 3)},
		{"sets: sum of elements", map[string]types.AttributeValue{
			"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}},
			"ns": &types.AttributeValueMemberNS{Value: []string{"1", "123"}},
			"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}}, 2 + 3 + 2 + (2 + 3) + 2 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ItemSize(tc.item); got != tc.want {
				t.Errorf("ItemSize = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct{ size, want int }{{0, 1}, {1, 1}, {1024, 1}, {1025, 2}, {4400, 5}} {
		if got := Units(tc.size, WriteUnitBytes); got != tc.want {
			t.Errorf("Units(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
	big := map[string]types.AttributeValue{"err": &types.AttributeValueMemberS{Value: strings.Repeat("x", 4096)}}
	if got := Units(ItemSize(big), WriteUnitBytes); got != 5 {
		t.Errorf("a 4 KiB error costs %d units, want 5", got)
	}
}
