package awslocal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

// TestEmbeddedRefusesPlaceholderPrefixes: the embedded emulator substitutes expression attribute
// names as text in random order, so a condition naming #p and #pk is misread some of the time
// (measured here with a client without the guard: it fails at least once in 256 tries on an item
// that satisfies it, and this part of the test fails when an upgrade of the emulator fixes it).
// The embedded backend's clients refuse such a request every time, with the reason.
func TestEmbeddedRefusesPlaceholderPrefixes(t *testing.T) {
	t.Parallel()
	b := awslocaltest.Backend(t)
	if b.Kind != awslocal.Embedded {
		t.Skipf("skipped: the guard is the embedded emulator's; this backend is %s", b.Kind)
	}
	ctx := context.Background()
	table, err := awslocal.ProvisionTable(ctx, b.DynamoDB(), awslocal.UniqueName("names"))
	if err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "item"}}
	if _, err := b.DynamoDB().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": key["pk"], "dead": &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	update := func(names map[string]string, cond string) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key,
			UpdateExpression:          aws.String("SET #last = :now"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":zero": &types.AttributeValueMemberN{Value: "0"}, ":now": &types.AttributeValueMemberN{Value: "5"}},
		}
	}
	prefixed := update(map[string]string{"#pk": "pk", "#p": "dead", "#last": "last"}, "attribute_exists(#pk) AND #p > :zero")

	_, err = b.DynamoDB().UpdateItem(ctx, prefixed)
	if !errors.Is(err, awslocal.ErrPlaceholderPrefix) {
		t.Errorf("UpdateItem with #p and #pk: %v, want ErrPlaceholderPrefix", err)
	}
	if _, err := b.DynamoDB().UpdateItem(ctx, update(map[string]string{"#pk": "pk", "#prv": "dead", "#last": "last"},
		"attribute_exists(#pk) AND #prv > :zero")); err != nil {
		t.Errorf("UpdateItem with #prv and #pk: %v", err)
	}

	cfg := b.Config.Copy()
	cfg.APIOptions = nil
	unguarded := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	misread := 0
	for range 256 {
		_, err := unguarded.UpdateItem(ctx, prefixed)
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			misread++
		case err != nil:
			t.Fatal(err)
		}
	}
	if misread == 0 {
		t.Error("the emulator read #p inside #pk in none of 256 tries: it may read placeholders as tokens now; the guard (pkg/awslocal/exprnames.go) and the gap in docs/ARCHITECTURE.md can go")
	}
	t.Logf("without the guard, the emulator misread the condition %d times in 256", misread)
}
