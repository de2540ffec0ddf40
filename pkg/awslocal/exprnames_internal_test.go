package awslocal

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestCheckPlaceholders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		input any
		bad   bool
	}{
		{"no names", &dynamodb.UpdateItemInput{TableName: aws.String("t")}, false},
		{"distinct placeholders", &dynamodb.UpdateItemInput{ExpressionAttributeNames: map[string]string{"#pk": "pk", "#prv": "dead", "#o": "ok"}}, false},
		{"one begins another", &dynamodb.UpdateItemInput{ExpressionAttributeNames: map[string]string{"#pk": "pk", "#p": "dead"}}, true},
		{"#1 and #10", &dynamodb.QueryInput{ExpressionAttributeNames: map[string]string{"#1": "a", "#10": "b", "#2": "c"}}, true},
		{"one between", &dynamodb.PutItemInput{ExpressionAttributeNames: map[string]string{"#a": "a", "#ab": "b", "#b": "c"}}, true},
		{"in a transaction's action", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{ExpressionAttributeNames: map[string]string{"#x": "x"}}},
			{ConditionCheck: &types.ConditionCheck{ExpressionAttributeNames: map[string]string{"#st": "st", "#s": "s"}}},
		}}, true},
		{"across a transaction's actions (each is read alone)", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{ExpressionAttributeNames: map[string]string{"#p": "p"}}},
			{Update: &types.Update{ExpressionAttributeNames: map[string]string{"#pk": "pk"}}},
		}}, false},
		{"in a batch read's table", &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			"t": {ExpressionAttributeNames: map[string]string{"#id": "id", "#i": "i"}},
		}}, true},
		{"items are not entered", &dynamodb.PutItemInput{Item: map[string]types.AttributeValue{
			"#p": &types.AttributeValueMemberS{Value: "x"}, "#pk": &types.AttributeValueMemberS{Value: "y"},
		}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkPlaceholders(reflect.ValueOf(tc.input), 0)
			if got := errors.Is(err, ErrPlaceholderPrefix); got != tc.bad {
				t.Errorf("checkPlaceholders = %v, want refused %v", err, tc.bad)
			}
		})
	}
}
