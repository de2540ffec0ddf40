package sqsevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/internal/jsonscan"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		payload string
		want    []Record
	}{
		{"empty object", `{}`, nil},
		{"null event", ` null `, nil},
		{"null records", `{"Records":null}`, nil},
		{"no records", `{"Records":[]}`, nil},
		{
			name: "standard",
			payload: `{"Records":[{"messageId":"m1","receiptHandle":"AQEB1","body":"{\"v\":1}","attributes":{` +
				`"ApproximateReceiveCount":"3","SentTimestamp":"1764410400123","SenderId":"AIDA:x",` +
				`"ApproximateFirstReceiveTimestamp":"1764410400130"},"messageAttributes":{},"md5OfBody":"abc",` +
				`"md5OfMessageAttributes":null,"eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:1:q",` +
				`"awsRegion":"us-east-1"}]}`,
			want: []Record{{MessageID: "m1", ReceiptHandle: "AQEB1", Body: `{"v":1}`, MD5OfBody: "abc",
				EventSourceARN: "arn:aws:sqs:us-east-1:1:q", AWSRegion: "us-east-1", ApproximateReceiveCount: 3,
				SentTimestamp: 1764410400123, ApproximateFirstReceiveTimestamp: 1764410400130, SenderID: "AIDA:x",
				RawMessageAttributes: "{}"}},
		},
		{
			name: "FIFO, trace header, DLQ source",
			payload: `{"Records":[{"attributes":{"MessageGroupId":"g1","MessageDeduplicationId":"d1",` +
				`"SequenceNumber":"18849496460467696128","AWSTraceHeader":"Root=1-5e1b4151-5ac6c58f5b5daa6532e4f1e6",` +
				`"DeadLetterQueueSourceArn":"arn:aws:sqs:us-east-1:1:src"}}]}`,
			want: []Record{{MessageGroupID: "g1", MessageDeduplicationID: "d1", SequenceNumber: "18849496460467696128",
				AWSTraceHeader: "Root=1-5e1b4151-5ac6c58f5b5daa6532e4f1e6", DeadLetterQueueSourceARN: "arn:aws:sqs:us-east-1:1:src"}},
		},
		{
			name:    "whitespace everywhere",
			payload: " \t\r\n{ \"Records\" :\n[ { \"body\" : \"b\" , \"attributes\" : { \"SenderId\" : \"s\" } } , { } ] }\n",
			want:    []Record{{Body: "b", SenderID: "s"}, {}},
		},
		{
			name:    "escapes",
			payload: `{"Records":[{"body":"\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac\ud83c\udf89 \u0000"}]}`,
			want:    []Record{{Body: "\"\\/\b\f\n\r\tAé€🎉 \x00"}},
		},
		{
			name:    "invalid surrogates become U+FFFD",
			payload: `{"Records":[{"body":"\ud800|\udc00|\ud800\u0041|\ud800\ud800\udc00|\udbff\udfff"}]}`,
			want:    []Record{{Body: "\uFFFD|\uFFFD|\uFFFDA|\uFFFD\U00010000|\U0010FFFF"}},
		},
		{
			name:    "invalid UTF-8 becomes U+FFFD",
			payload: "{\"Records\":[{\"body\":\"a\xffb\xe2\x82c\",\"messageId\":\"\xed\xa0\x80\"}]}",
			want:    []Record{{Body: "a\uFFFDb\uFFFD\uFFFDc", MessageID: "\uFFFD\uFFFD\uFFFD"}},
		},
		{
			name:    "unicode unescaped",
			payload: `{"Records":[{"body":"héllo, 世界, 🎉"}]}`,
			want:    []Record{{Body: "héllo, 世界, 🎉"}},
		},
		{
			name:    "escaped keys",
			payload: `{"Rec\u006frds":[{"\u0062ody":"b","attributes":{"Sender\u0049d":"s"}}]}`,
			want:    []Record{{Body: "b", SenderID: "s"}},
		},
		{
			name: "unknown keys at every level",
			payload: `{"x":{"Records":[1]},"Records":[{"y":[{"body":"no"},[],{}],"body":"yes","z":-0.5e-3,` +
				`"attributes":{"Unknown":"u","SenderId":"s"}}],"w":[true,false,null,"\"]"]}`,
			want: []Record{{Body: "yes", SenderID: "s"}},
		},
		{
			name:    "case-sensitive keys",
			payload: `{"Records":[{"Body":"no","BODY":"no","body":"yes"}],"records":[{"body":"no"}]}`,
			want:    []Record{{Body: "yes"}},
		},
		{
			name:    "null string fields leave the value",
			payload: `{"Records":[{"body":null,"messageId":"m","messageId":null,"attributes":{"SenderId":null}}]}`,
			want:    []Record{{MessageID: "m"}},
		},
		{
			name:    "duplicated key: the last wins",
			payload: `{"Records":[{"body":"a","body":"b","attributes":{"SenderId":"x","SenderId":"y"}}]}`,
			want:    []Record{{Body: "b", SenderID: "y"}},
		},
		{
			name:    "duplicated attributes merge",
			payload: `{"Records":[{"attributes":{"SenderId":"s"},"attributes":{"MessageGroupId":"g"}}]}`,
			want:    []Record{{SenderID: "s", MessageGroupID: "g"}},
		},
		{
			name:    "attributes null clears",
			payload: `{"Records":[{"attributes":{"SenderId":"s","SentTimestamp":"5"},"attributes":null,"body":"b"}]}`,
			want:    []Record{{Body: "b"}},
		},
		{
			name:    "unparsable numeric attributes are 0",
			payload: `{"Records":[{"attributes":{"ApproximateReceiveCount":"x","SentTimestamp":""}}]}`,
			want:    []Record{{}},
		},
		{
			name:    "message attributes kept raw",
			payload: `{"Records":[{"messageAttributes": {"a":{"stringValue":"1","dataType":"Number"}} }]}`,
			want:    []Record{{RawMessageAttributes: `{"a":{"stringValue":"1","dataType":"Number"}}`}},
		},
		{
			name:    "duplicated message attributes merge",
			payload: `{"Records":[{"messageAttributes":{"a":{"dataType":"String"}},"messageAttributes":{ },"messageAttributes":{"b":{"dataType":"Number"}}}]}`,
			want:    []Record{{RawMessageAttributes: `{"a":{"dataType":"String"},"b":{"dataType":"Number"}}`}},
		},
		{
			name:    "message attributes null clears",
			payload: `{"Records":[{"messageAttributes":{"a":{"dataType":"String"}},"messageAttributes":null}]}`,
			want:    []Record{{}},
		},
		{
			name:    "null record",
			payload: `{"Records":[null,{"body":"b"}]}`,
			want:    []Record{{}, {Body: "b"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decode([]byte(tc.payload))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Decode = %d records %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
			}
			// Same as encoding/json where the test uses canonical keys.
			if !strings.Contains(tc.name, "case") {
				checkAgainstEncodingJSON(t, []byte(tc.payload))
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		payload string
		offset  int
		msg     string
	}{
		{"empty", ``, 0, "unexpected end of JSON input"},
		{"whitespace only", "  \n", 3, "unexpected end of JSON input"},
		{"not JSON", `hello`, 0, "invalid character 'h' looking for beginning of value"},
		{"array event", `[]`, 0, "the event is an array, want an object"},
		{"string event", `"x"`, 0, "the event is a string, want an object"},
		{"trailing garbage", `{} x`, 3, "invalid character 'x' after top-level value"},
		{"two objects", `{}{}`, 2, "after top-level value"},
		{"truncated", `{"Records":[{"body":"b"}`, 24, "unexpected end of JSON input"},
		{"truncated string", `{"Records":[{"body":"b`, 22, "unexpected end of JSON input in the string that starts at offset 20"},
		{"Records object", `{"Records":{}}`, 11, "Records is an object, want an array"},
		{"record string", `{"Records":["x"]}`, 12, "a record is a string, want an object"},
		{"body number", `{"Records":[{"body":1}]}`, 20, "body is a number, want a string or null"},
		{"body object", `{"Records":[{"body":{}}]}`, 20, "body is an object"},
		{"eventSource bool", `{"Records":[{"eventSource":true}]}`, 27, "eventSource is a boolean"},
		{"attributes array", `{"Records":[{"attributes":[]}]}`, 26, "attributes is an array, want an object or null"},
		{"attribute number", `{"Records":[{"attributes":{"SenderId":5}}]}`, 38, "attributes.SenderId is a number"},
		{"messageAttributes string", `{"Records":[{"messageAttributes":"x"}]}`, 33, "messageAttributes is a string"},
		{"duplicate Records", `{"Records":[],"Records":[]}`, 24, `duplicate "Records" key`},
		{"control character", "{\"Records\":[{\"body\":\"a\nb\"}]}", 22, `invalid character '\n' in string literal`},
		{"bad escape", `{"Records":[{"body":"\x"}]}`, 22, `invalid character 'x' in string escape code`},
		{"bad unicode escape", `{"Records":[{"body":"\u12G4"}]}`, 25, `invalid character 'G' in \u hexadecimal character escape`},
		{"missing colon", `{"Records" []}`, 11, "invalid character '[' after object key"},
		{"missing comma", `{"Records":[{"body":"b" "x":1}]}`, 24, "after object key:value pair"},
		{"trailing comma in object", `{"Records":[{"body":"b",}]}`, 24, "looking for beginning of object key string"},
		{"trailing comma in array", `{"Records":[{},]}`, 15, "looking for beginning of value"},
		{"unquoted key", `{Records:[]}`, 1, "looking for beginning of object key string"},
		{"bad literal", `{"Records":[{"body":nul}]}`, 23, "in literal null"},
		{"bad number in unknown", `{"x":01}`, 6, "after object key:value pair"},
		{"bad number sign", `{"x":-}`, 6, "in numeric literal"},
		{"bad fraction", `{"x":1.}`, 7, "after decimal point"},
		{"bad exponent", `{"x":1e}`, 7, "in exponent"},
		{"syntax error inside message attributes", `{"Records":[{"messageAttributes":{"a":[}]}]}`, 39, "looking for beginning of value"},
		{"syntax error after a type error", `{"Records":[{"body":[1,]}]}`, 23, "looking for beginning of value"},
		{"too deep", `{"x":` + strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth) + `}`, 5 + jsonscan.MaxDepth - 1, "exceeded max depth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decode([]byte(tc.payload))
			if err == nil {
				t.Fatalf("Decode(%q) = %+v, want an error", tc.payload, got)
			}
			var je *jsonscan.Error
			if !errors.As(err, &je) {
				t.Fatalf("error %v is not a *jsonscan.Error", err)
			}
			if je.Offset != tc.offset || !strings.Contains(je.Msg, tc.msg) {
				t.Errorf("error = %v; want offset %d and %q", err, tc.offset, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "sqsevent: ") {
				t.Errorf("error %q does not name the package", err)
			}
			// encoding/json rejects it too (or the difference is documented).
			var ev events.SQSEvent
			if json.Unmarshal([]byte(tc.payload), &ev) == nil && !strings.Contains(tc.name, "duplicate") {
				t.Errorf("encoding/json accepts %q", tc.payload)
			}
		})
	}
}

// TestDecodeMatchesEncodingJSON compares Decode with encoding/json + FromEvent on realistic events.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, seed := range seedEvents() {
		checkAgainstEncodingJSON(t, seed)
	}
	for _, n := range []int{1, 10, 100} {
		for _, o := range []eventOptions{{}, {fifo: true, trace: true}, {msgAttrs: true}, {indent: true, msgAttrs: true, fifo: true}} {
			recs := checkAgainstEncodingJSON(t, lambdaEvent(n, o))
			if len(recs) != n {
				t.Fatalf("%d records, want %d", len(recs), n)
			}
		}
	}
	// The AWS sample, checked field by field.
	recs := checkAgainstEncodingJSON(t, []byte(awsSampleEvent))
	attrs, err := recs[0].MessageAttributes()
	if err != nil || len(attrs) != 3 || *attrs["Attribute2"].StringValue != "123" ||
		string(attrs["Attribute3"].BinaryValue) != "1100" || recs[0].ApproximateReceiveCount != 2 ||
		recs[0].SenderID != "AROAIWPX5BD2BHG722MW4:sender" || recs[0].Body != "Message Body" {
		t.Errorf("AWS sample: %+v, attributes %+v, %v", recs[0], attrs, err)
	}
}

// TestDecodeCopiesPayload checks that the records do not alias the caller's buffer.
func TestDecodeCopiesPayload(t *testing.T) {
	t.Parallel()
	payload := lambdaEvent(3, eventOptions{fifo: true, msgAttrs: true})
	want, err := Decode(bytes.Clone(payload))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = 'X'
	}
	// Every field but the receipt handle, which points into the payload (documented).
	for i := range got {
		if got[i].ReceiptHandle != strings.Repeat("X", len(want[i].ReceiptHandle)) {
			t.Errorf("record %d: receipt handle %q does not point into the payload", i, got[i].ReceiptHandle)
		}
		got[i].ReceiptHandle, want[i].ReceiptHandle = "", ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records changed with the payload buffer:\n got %+v\nwant %+v", got, want)
	}
}

// TestDecodeTruncated checks every prefix of an event: an error with an offset inside it, never
// a panic.
func TestDecodeTruncated(t *testing.T) {
	t.Parallel()
	payload := lambdaEvent(2, eventOptions{fifo: true, trace: true, msgAttrs: true, bodyExtra: `,"u":"\u00e9\ud83c\udf89"`})
	for n := range len(payload) - 1 {
		p := payload[:n]
		_, err := Decode(p)
		var je *jsonscan.Error
		if !errors.As(err, &je) || je.Offset > n {
			t.Fatalf("Decode(%q) = %v, want an error inside it", p, err)
		}
	}
}

// TestClearAttributes checks that clearAttributes zeroes what setAttribute can set, and nothing else.
func TestClearAttributes(t *testing.T) {
	t.Parallel()
	var set Record
	for _, name := range []string{"ApproximateReceiveCount", "SentTimestamp", "ApproximateFirstReceiveTimestamp",
		"SenderId", "MessageGroupId", "MessageDeduplicationId", "SequenceNumber", "AWSTraceHeader",
		"DeadLetterQueueSourceArn"} {
		set.setAttribute(name, "7")
	}
	v := reflect.ValueOf(set)
	for f := range v.NumField() {
		name := v.Type().Field(f).Name
		attr := v.Field(f).IsZero() // not a system attribute
		full := reflect.ValueOf(&Record{}).Elem()
		full.Field(f).Set(reflect.ValueOf(fullValue(full.Field(f).Type())))
		r := full.Addr().Interface().(*Record)
		r.clearAttributes()
		if cleared := reflect.ValueOf(*r).Field(f).IsZero(); cleared == attr {
			t.Errorf("%s: cleared=%v, but it is a system attribute=%v", name, cleared, !attr)
		}
	}
}

func fullValue(t reflect.Type) any {
	switch t.Kind() {
	case reflect.String:
		return "x"
	case reflect.Int:
		return 1
	case reflect.Int64:
		return int64(1)
	case reflect.Map:
		return map[string]events.SQSMessageAttribute{"a": {}}
	}
	panic("add a case for " + t.String())
}

// TestParseInt: the attribute parser's fast path gives what strconv.ParseInt gives (its value,
// errors ignored) for every input.
func TestParseInt(t *testing.T) {
	for _, s := range []string{"", "0", "1", "007", "1764410400123", "+5", "-5", "1e3", " 1", "1 ", "x",
		"999999999999999999", "1000000000000000000", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "١٢"} {
		want, _ := strconv.ParseInt(s, 10, 64)
		if got := parseInt(s); got != want {
			t.Errorf("parseInt(%q) = %d, want %d", s, got, want)
		}
	}
}
