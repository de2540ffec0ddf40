package sqsevent

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/internal/jsonscan"
)

// FuzzDecode checks that Decode never panics, rejects every input that is not JSON, and agrees
// with encoding/json + FromEvent on every input that encoding/json reads as an events.SQSEvent
// (but for the documented differences). The seeds run as an ordinary test.
//
//	go test ./internal/sqsevent -run '^$' -fuzz FuzzDecode -fuzztime 60s
func FuzzDecode(f *testing.F) {
	for _, seed := range seedEvents() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkAgainstEncodingJSON(t, payload)
	})
}

// seedEvents are realistic Lambda events and the edge cases the tests name.
func seedEvents() [][]byte {
	seeds := [][]byte{
		lambdaEvent(1, eventOptions{}),
		lambdaEvent(2, eventOptions{fifo: true, trace: true}),
		lambdaEvent(2, eventOptions{msgAttrs: true, indent: true}),
		lambdaEvent(1, eventOptions{bodyExtra: `,"meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"note":"h\u00e9llo \ud83c\udf89 \\ \" \t\n"`}),
		[]byte(awsSampleEvent),
		[]byte(`{"Records":[{"messageId":"1","body":"\ud800 lone \udc00 low \ud83d\ude00 pair \uD83D\uDE00","receiptHandle":"h\u00e9"}]}`),
		[]byte(`{"Records":[{"body":"bad \xff utf8 \xe2\x82 \xed\xa0\x80","messageId":"\xc0\xaf"}]}`),
		[]byte(`{"Records":[null,{},{"attributes":null,"messageAttributes":null,"body":null}]}`),
		[]byte(`{"unknown":[1,{"a":[true,false,null,-1.5e+3,"x"]}],"Records":[{"x":{"y":[{}]},"body":"b"}],"z":0}`),
		[]byte(`{"Records":[{"messageAttributes":{"a":{"stringValue":"1","dataType":"String"}},"messageAttributes":{"b":{"stringValue":"2","dataType":"Number"}}}]}`),
		[]byte(`{"Records":[{"attributes":{"SenderId":"a","SenderId":"b","ApproximateReceiveCount":"x"},"attributes":{"MessageGroupId":"g"}}]}`),
		[]byte(`{"Records":[{"body":"a","Body":"b","BODY":5}],"records":[]}`),
		[]byte(`{"Records":[],"Records":[{}]}`),
		[]byte(`{"Records":[{"eventSourceARN":"a","awsRegion":"r","attributes":{"SenderId":"s"}},{"eventSourceARN":null,"awsRegion":"r\u0072","attributes":{"SenderId":"s"}},{"eventSourceARN":"a","awsRegion":"rr","attributes":{"SenderId":"s\""}}]}`),
		[]byte(`{"Records":[{"eventSourceARN":"a"},{"eventSourceARN":"a"},{"eventSourceARN":5}]}`),
		[]byte(`null`),
		[]byte(` { "Records" : [ { "body" : "x" } ] } `),
		[]byte(`{"Records":[{"body":"x"}]} trailing`),
		[]byte(`{"Records":[{"body":"x\u00"}]}`),
		[]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`),
	}
	return seeds
}

// awsSampleEvent is aws-lambda-go's events/testdata/sqs-event.json.
const awsSampleEvent = `{
  "Records": [
    {
      "messageId" : "MessageID_1",
      "receiptHandle" : "MessageReceiptHandle",
      "body" : "Message Body",
      "md5OfBody" : "fce0ea8dd236ccb3ed9b37dae260836f",
      "md5OfMessageAttributes" : "582c92c5c5b6ac403040a4f3ab3115c9",
      "eventSourceARN": "arn:aws:sqs:us-west-2:123456789012:SQSQueue",
      "eventSource": "aws:sqs",
      "awsRegion": "us-west-2",
      "attributes" : {
        "ApproximateReceiveCount" : "2",
        "SentTimestamp" : "1520621625029",
        "SenderId" : "AROAIWPX5BD2BHG722MW4:sender",
        "ApproximateFirstReceiveTimestamp" : "1520621634884"
      },
      "messageAttributes" : {
        "Attribute3" : {
          "binaryValue" : "MTEwMA==",
          "stringListValues" : ["abc", "123"],
          "binaryListValues" : ["MA==", "MQ==", "MA=="],
          "dataType" : "Binary"
        },
        "Attribute2" : {
          "stringValue" : "123",
          "stringListValues" : [ ],
          "binaryListValues" : ["MQ==", "MA=="],
          "dataType" : "Number"
        },
        "Attribute1" : {
          "stringValue" : "AttributeValue1",
          "stringListValues" : [ ],
          "binaryListValues" : [ ],
          "dataType" : "String"
        }
      }
    }
  ]
}`

// checkAgainstEncodingJSON decodes payload with Decode and with encoding/json + FromEvent and
// fails t where they disagree. It returns the records when both accepted the payload.
func checkAgainstEncodingJSON(t *testing.T, payload []byte) []Record {
	t.Helper()
	got, err := Decode(payload)
	var je *jsonscan.Error
	if err != nil && !errors.As(err, &je) {
		t.Fatalf("Decode error %v is not a *jsonscan.Error", err)
	}
	if je != nil && (je.Offset < 0 || je.Offset > len(payload)) {
		t.Fatalf("Decode error offset %d outside the payload (%d bytes)", je.Offset, len(payload))
	}
	var ev events.SQSEvent
	if jerr := json.Unmarshal(payload, &ev); jerr != nil {
		var syntax *json.SyntaxError
		if errors.As(jerr, &syntax) && err == nil {
			t.Fatalf("Decode accepted %q, encoding/json: %v", payload, jerr)
		}
		return nil
	}
	if hasFoldedKey(payload) {
		return nil // documented: encoding/json matches keys case-insensitively
	}
	if err != nil {
		if je != nil && strings.Contains(je.Msg, `duplicate "Records"`) {
			return nil // documented
		}
		t.Fatalf("Decode(%q): %v; encoding/json accepts it", payload, err)
	}
	want := FromEvent(ev, nil)
	if len(got) != len(want) {
		t.Fatalf("Decode read %d records, encoding/json %d, from %q", len(got), len(want), payload)
	}
	for i := range got {
		compareRecords(t, i, &got[i], &want[i])
	}
	return got
}

// compareRecords compares every field of Record, the message attributes after decoding.
func compareRecords(t *testing.T, i int, got, want *Record) {
	t.Helper()
	gotAttrs, err := got.MessageAttributes()
	if err != nil {
		t.Fatalf("record %d: MessageAttributes of %q: %v", i, got.RawMessageAttributes, err)
	}
	if len(gotAttrs) != 0 || len(want.Attrs) != 0 {
		if !reflect.DeepEqual(gotAttrs, want.Attrs) {
			t.Errorf("record %d: message attributes %+v, want %+v", i, gotAttrs, want.Attrs)
		}
	}
	g, w := *got, *want
	g.RawMessageAttributes, g.Attrs, w.RawMessageAttributes, w.Attrs = "", nil, "", nil
	gv, wv := reflect.ValueOf(g), reflect.ValueOf(w)
	for f := range gv.NumField() {
		if !reflect.DeepEqual(gv.Field(f).Interface(), wv.Field(f).Interface()) {
			t.Errorf("record %d: %s = %q, want %q", i, gv.Type().Field(f).Name, gv.Field(f).Interface(), wv.Field(f).Interface())
		}
	}
}

var eventFields = []string{"Records"}

var recordFields = []string{"messageId", "receiptHandle", "body", "md5OfBody", "md5OfMessageAttributes",
	"attributes", "messageAttributes", "eventSourceARN", "eventSource", "awsRegion"}

// hasFoldedKey reports whether the event has a key that encoding/json matches to a field
// case-insensitively but Decode does not ("records", "Body", "ſ" for "s"…).
func hasFoldedKey(payload []byte) bool {
	var v any
	if json.Unmarshal(payload, &v) != nil {
		return false
	}
	folded := func(obj map[string]any, fields []string) bool {
		for k := range obj {
			for _, f := range fields {
				if k != f && strings.EqualFold(k, f) {
					return true
				}
			}
		}
		return false
	}
	top, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if folded(top, eventFields) {
		return true
	}
	recs, _ := top["Records"].([]any)
	for _, r := range recs {
		if m, ok := r.(map[string]any); ok && folded(m, recordFields) {
			return true
		}
	}
	return false
}
