package dynamooutbox

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

type fuzzArgs struct {
	S string `json:"s"`
}

func (fuzzArgs) Kind() string { return "fuzz.job" }

type noSQS struct{}

func (noSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("no SQS")
}

func (noSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("no SQS")
}

// seedItems are items the outbox writes: standard and FIFO, with attributes, a delay, a
// compressed body.
func seedItems(t testing.TB) []map[string]types.AttributeValue {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	var out []map[string]types.AttributeValue
	for i, c := range []struct {
		url      string
		opts     []producer.Option
		compress int
		text     string
	}{
		{"https://sqs.us-east-1.amazonaws.com/1/jobs", nil, -1, "a"},
		{"https://sqs.us-east-1.amazonaws.com/1/jobs", []producer.Option{producer.WithDelay(time.Hour), producer.WithKey("k ✓"),
			producer.WithAttributes(map[string]sqstypes.MessageAttributeValue{
				"s": {DataType: aws.String("String"), StringValue: aws.String("v")},
				"b": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 255}},
			})}, 8, "a longer text that is compressed"},
		{"https://sqs.us-east-1.amazonaws.com/1/jobs.fifo", []producer.Option{producer.WithGroupID("g#1"), producer.WithDeduplicationID("d-1")}, -1, "f"},
	} {
		p, err := producer.New(producer.Config{SQS: noSQS{}, QueueURL: c.url, Clock: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		m, err := p.Prepare(context.Background(), fuzzArgs{S: c.text}, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		e := outbox.Entry{Message: m, CreatedAt: t0, AvailableAt: t0.Add(time.Duration(i) * time.Second), Attempts: i}
		item, _, err := encodeItem(&e, ordKey(t0.UnixNano()+int64(i), m.ID), c.compress)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, item)
	}
	return out
}

// FuzzDecodeItem feeds arbitrary DynamoDB JSON images, as a stream record or another writer may
// bring them, through FromStreamImage and decodeItem: they never panic, an item they accept has
// an id, and an entry read back clean encodes to an item that reads back the same.
func FuzzDecodeItem(f *testing.F) {
	for _, item := range seedItems(f) {
		b, err := json.Marshal(ToStreamImage(item))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"pk":{"S":"job#x"},"sk":{"S":"job"},"v":{"N":"1"},"attempts":{"N":"1e400"},"gz_body":{"B":"H4sIAAAAAAAA/w=="}}`))
	f.Add([]byte(`{"pk":{"S":"fifo#q.fifo#g"},"sk":{"S":"0000000000000000001#id"},"v":{"N":"1"},"queue_url":{"S":"https://x/1/q"},"attrs":{"M":{"a":{"S":"x"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var img map[string]events.DynamoDBAttributeValue
		if json.Unmarshal(data, &img) != nil {
			return
		}
		item, err := FromStreamImage(img)
		if err != nil {
			return
		}
		e, k, err := decodeItem(item)
		if err != nil {
			if !errors.Is(err, errForeign) {
				t.Fatalf("decodeItem error %v does not wrap errForeign", err)
			}
			return
		}
		if e.ID() == "" || k.pk == "" || k.sk == "" {
			t.Fatalf("accepted an item without an id or key: %+v %+v", e, k)
		}
		if e.Corrupt != "" || e.CreatedAt.IsZero() || e.State != outbox.StatePending {
			return
		}
		ord, _ := getS(item, AttrOrd)
		if k.fifo() {
			ord = k.sk
		}
		again, k2, err := encodeItem(&e, ord, DefaultCompressAbove)
		if err != nil {
			return // an entry the writer would refuse (no group on a FIFO queue…)
		}
		e2, _, err := decodeItem(again)
		if err != nil || e2.Corrupt != "" {
			t.Fatalf("re-encoded entry does not read back: %v %q", err, e2.Corrupt)
		}
		if k2 != k && k.fifo() {
			t.Fatalf("key changed: %+v → %+v", k, k2)
		}
		if !reflect.DeepEqual(e.Message, e2.Message) {
			t.Fatalf("message changed:\n %#v\n %#v", e.Message, e2.Message)
		}
	})
}

// The seeds read back as the entries that were encoded.
func TestItemRoundTrip(t *testing.T) {
	for _, item := range seedItems(t) {
		b, _ := json.Marshal(ToStreamImage(item))
		var img map[string]events.DynamoDBAttributeValue
		if err := json.Unmarshal(b, &img); err != nil {
			t.Fatal(err)
		}
		via, err := FromStreamImage(img)
		if err != nil {
			t.Fatal(err)
		}
		direct, _, err1 := decodeItem(item)
		streamed, _, err2 := decodeItem(via)
		if err1 != nil || err2 != nil || direct.Corrupt != "" || !reflect.DeepEqual(direct, streamed) {
			t.Errorf("round trip: %v %v\n direct   %+v\n streamed %+v", err1, err2, direct, streamed)
		}
		if direct.Message.Body == "" || direct.Message.ID == "" || direct.State != outbox.StatePending {
			t.Errorf("decoded %+v", direct)
		}
	}
}
