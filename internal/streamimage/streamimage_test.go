package streamimage

import (
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestRoundTrip: every attribute type, nested in a list and a map, comes back as it went.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "x"}, "n": &types.AttributeValueMemberN{Value: "42"},
		"b": &types.AttributeValueMemberB{Value: []byte{1, 2}}, "bool": &types.AttributeValueMemberBOOL{Value: true},
		"null": &types.AttributeValueMemberNULL{Value: true}, "ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns": &types.AttributeValueMemberNS{Value: []string{"1"}}, "bs": &types.AttributeValueMemberBS{Value: [][]byte{{3}}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "in a list"}}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "7"}}},
	}
	img := FromItem(item)
	if img["m"].DataType() != events.DataTypeMap || img["null"].DataType() != events.DataTypeNull {
		t.Fatalf("image %v", img)
	}
	back, err := ToItem(img)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, item) {
		t.Errorf("round trip:\n got %#v\nwant %#v", back, item)
	}
}
