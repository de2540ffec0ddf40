package awscost

import (
	"context"
	"errors"
	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// fakeAWS answers every request with {} (200), except DynamoDB UpdateItem calls, which it
// refuses with a ConditionalCheckFailedException. It records the request bodies it got.
func fakeAWS(t *testing.T) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.UpdateItem" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`)
			return
		}
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

func clients(srv *httptest.Server, c *Counter) (*dynamodb.Client, *sqs.Client) {
	cfg := aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: c,
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }), sqs.NewFromConfig(cfg)
}

func TestCounterCounts(t *testing.T) {
	srv, _ := fakeAWS(t)
	c := &Counter{}
	ddb, sq := clients(srv, c)
	ctx := context.Background()
	for range 3 {
		if _, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: item{"pk": s("a")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item{"pk": s("a")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/000000000000/q")}); err != nil {
		t.Fatal(err)
	}
	calls := c.Calls()
	if calls["dynamodb.GetItem"] != 3 || calls["dynamodb.PutItem"] != 1 || calls["sqs.ReceiveMessage"] != 1 || len(calls) != 3 {
		t.Errorf("calls = %v", calls)
	}
	if Sum(calls, "dynamodb.") != 4 || Sum(calls, "") != 5 {
		t.Errorf("sums: dynamodb %d, all %d", Sum(calls, "dynamodb."), Sum(calls, ""))
	}
	if got := Format(calls); got != "dynamodb.GetItem=3 dynamodb.PutItem=1 sqs.ReceiveMessage=1" {
		t.Errorf("Format = %q", got)
	}
	c.Reset()
	if len(c.Calls()) != 0 {
		t.Errorf("after Reset: %v", c.Calls())
	}
}

func TestCounterOnWrite(t *testing.T) {
	srv, bodies := fakeAWS(t)
	var writes []Write
	c := &Counter{OnWrite: func(w Write) { writes = append(writes, w) }}
	ddb, _ := clients(srv, c)
	ctx := context.Background()
	_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item{
		"pk": s("a"), "n": n("12"), "l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberB{Value: []byte("xyz")}, &types.AttributeValueMemberBOOL{Value: true}}},
		"m": &types.AttributeValueMemberM{Value: item{"ss": &types.AttributeValueMemberSS{Value: []string{"p", "q"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: item{"pk": s("b")},
		UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a"},
		ExpressionAttributeValues: item{":a": s("x")}})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("UpdateItem: %v, want the ConditionalCheckFailedException (the answer must reach the SDK intact)", err)
	}
	if _, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: item{"pk": s("a")}}); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 2 {
		t.Fatalf("OnWrite called %d times, want 2 (reads are not writes): %+v", len(writes), writes)
	}
	put, upd := writes[0], writes[1]
	if put.Op != "PutItem" || put.Table != "t" || put.Status != 200 || put.ConditionFailed || put.Key != nil {
		t.Errorf("put = %+v", put)
	}
	// The item is decoded from the request as sent: its size is the one billed.
	if got, want := ddbsize.ItemSize(put.Item), 2+1+1+2+1+3+(1+3)+(1+1)+1+3+(1+2+2); got != want {
		t.Errorf("put item size = %d, want %d (item %v)", got, want, put.Item)
	}
	if upd.Op != "UpdateItem" || upd.Status != 400 || !upd.ConditionFailed || upd.Key["pk"].(*types.AttributeValueMemberS).Value != "b" {
		t.Errorf("update = %+v", upd)
	}
	// The server got the bodies whole.
	if len(*bodies) != 3 || !strings.Contains((*bodies)[0], `"TableName":"t"`) || !strings.Contains((*bodies)[1], `"UpdateExpression"`) {
		t.Errorf("bodies the server got: %q", *bodies)
	}
}

func TestDecodeValueErrors(t *testing.T) {
	for _, in := range []string{`{}`, `{"S":"a","N":"1"}`, `{"X":1}`, `{"S":1}`, `{"B":"!!"}`, `[]`} {
		if _, err := DecodeValue([]byte(in)); err == nil {
			t.Errorf("DecodeValue(%s) accepted", in)
		}
	}
}

// A TransactWriteItems is one Write per Put, Update and Delete action, each Transactional; a
// cancelled one reports every action as refused; ConditionCheck actions write nothing.
func TestCounterOnWriteTransaction(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if strings.Contains(string(b), `"refuse"`) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled","CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"}]}`)
			return
		}
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	var writes []Write
	c := &Counter{OnWrite: func(w Write) { writes = append(writes, w) }}
	ddb, _ := clients(srv, c)
	ctx := context.Background()
	tx := func(marker string) error {
		_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("t"), Item: item{"pk": s(marker)}}},
			{Update: &types.Update{TableName: aws.String("u"), Key: item{"pk": s("b")}, UpdateExpression: aws.String("SET #a = :a"),
				ExpressionAttributeNames: map[string]string{"#a": "a"}, ExpressionAttributeValues: item{":a": s("x")}}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String("t"), Key: item{"pk": s("c")}, ConditionExpression: aws.String("attribute_exists(pk)")}},
		}})
		return err
	}
	if err := tx("ok"); err != nil {
		t.Fatal(err)
	}
	if len(writes) != 2 || writes[0].Op != "TransactPut" || writes[1].Op != "TransactUpdate" || !writes[0].Transactional ||
		writes[0].Status != 200 || writes[0].ConditionFailed || writes[1].Table != "u" {
		t.Fatalf("writes of a committed transaction: %+v", writes)
	}
	writes = nil
	var tce *types.TransactionCanceledException
	if err := tx("refuse"); !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 {
		t.Fatalf("cancelled transaction: %v (the answer must reach the SDK intact)", err)
	}
	if len(writes) != 2 || !writes[0].ConditionFailed || !writes[1].ConditionFailed {
		t.Errorf("writes of a cancelled transaction: %+v", writes)
	}
}

// RecordTransactional doubles the table's units of a committed write, not its indexes'; a
// cancelled transaction's write is billed once, as a refused write.
func TestLedgerTransactional(t *testing.T) {
	l := NewLedger(map[string]Schema{"t": SchemaFromCreateTable(testTable())})
	c, err := l.RecordTransactional("t", item{"pk": s("a")}, item{"pk": s("a"), "job_id": s("j"), "st": s("running")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Table != 2 || c.Indexes["by_id"] != 1 {
		t.Errorf("transactional insert: %+v, want table 2, by_id 1", c)
	}
	c, _ = l.RecordTransactional("t", item{"pk": s("a")}, nil, true)
	if c.Total() != 1 {
		t.Errorf("cancelled transactional write: %+v, want 1", c)
	}
}
