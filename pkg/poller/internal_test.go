package poller

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/sqsevent"
)

func TestMD5OfMessageAttributes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		attrs map[string]sqstypes.MessageAttributeValue
		want  string
	}{
		{
			// A digest SQS returned for these attributes (the vector other SQS implementations test with).
			name: "string and number",
			attrs: map[string]sqstypes.MessageAttributeValue{
				"ordinal":  {DataType: aws.String("Number"), StringValue: aws.String("1")},
				"category": {DataType: aws.String("String"), StringValue: aws.String("test")},
			},
			want: "d21ae90c49061e927f57df5f5d72be1f",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := md5OfMessageAttributes(tc.attrs); got != tc.want {
				t.Errorf("md5OfMessageAttributes = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestExtensionStaysWithinTwelveHours(t *testing.T) {
	t.Parallel()
	vis := 30 * time.Second
	for _, tc := range []struct {
		elapsed time.Duration
		want    time.Duration
		ok      bool
	}{
		{0, vis, true},
		{time.Hour, vis, true},
		{12*time.Hour - time.Minute, vis, true}, // 55 s left after the margin: still a full extension
		{12*time.Hour - 20*time.Second, 15 * time.Second, true},
		{12*time.Hour - 5500*time.Millisecond, 0, false}, // less than a second left after the margin
		{12 * time.Hour, 0, false},
		{13 * time.Hour, 0, false},
	} {
		got, ok := extension(vis, tc.elapsed)
		want := min(tc.want, vis)
		if ok != tc.ok || got != want {
			t.Errorf("extension(%v, %v) = %v, %v; want %v, %v", vis, tc.elapsed, got, ok, want, tc.ok)
		}
		if ok && tc.elapsed+got > MaxVisibilityTimeout {
			t.Errorf("extension(%v, %v) = %v ends past 12 h", vis, tc.elapsed, got)
		}
	}
}

func TestExponentialBackoffIsBoundedAndNeverZero(t *testing.T) {
	t.Parallel()
	b := ExponentialBackoff(100*time.Millisecond, 2*time.Second)
	for attempt := 1; attempt <= 50; attempt++ {
		step := min(100*time.Millisecond<<min(attempt-1, 30), 2*time.Second)
		for range 20 {
			d := b(attempt)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: backoff %v outside [%v, %v]", attempt, d, step/2, step)
			}
		}
	}
}

// TestFromMessageMatchesTheEvent: the record a MessageHandler's worker builds from a message
// (sqsevent.FromMessage) is the one it would build from the Lambda event the poller makes of it,
// but for message attributes: nil, not an empty map, when there are none.
func TestFromMessageMatchesTheEvent(t *testing.T) {
	t.Parallel()
	const arn, region = "arn:aws:sqs:eu-west-3:123456789012:jobs.fifo", "eu-west-3"
	for _, tc := range []struct {
		name string
		msg  sqstypes.Message
	}{
		{"bare", sqstypes.Message{MessageId: aws.String("m-1")}},
		{"standard", sqstypes.Message{
			MessageId: aws.String("m-2"), ReceiptHandle: aws.String("rh-2"), Body: aws.String(`{"v":1}`),
			MD5OfBody: aws.String("0123456789abcdef0123456789abcdef"),
			Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764583200000",
				"ApproximateFirstReceiveTimestamp": "1764583200123", "SenderId": "AIDA", "AWSTraceHeader": "Root=1-x",
				"DeadLetterQueueSourceArn": "arn:aws:sqs:eu-west-3:123456789012:src", "SomethingNew": "x"},
		}},
		{"fifo with message attributes", sqstypes.Message{
			MessageId: aws.String("m-3"), Body: aws.String("b"),
			Attributes: map[string]string{"MessageGroupId": "g", "MessageDeduplicationId": "d", "SequenceNumber": "18"},
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				"s": {DataType: aws.String("String"), StringValue: aws.String("v")},
				"b": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1}},
				"l": {DataType: aws.String("String"), StringListValues: []string{"x", "y"}},
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := sqsevent.FromEvent(events.SQSEvent{Records: []events.SQSMessage{toRecord(tc.msg, arn, region)}}, nil)[0]
			var got sqsevent.Record
			sqsevent.FromMessage(&tc.msg, arn, region, &got)
			if len(tc.msg.MessageAttributes) == 0 {
				if got.Attrs != nil {
					t.Errorf("message attributes %v, want nil", got.Attrs)
				}
				want.Attrs = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("FromMessage:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestBodyMatches(t *testing.T) {
	t.Parallel()
	const body, sum = "hello", "5d41402abc4b2a76b9719d911017c592"
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{sum, true},
		{strings.ToUpper(sum), true},
		{"5d41402abc4b2a76b9719d911017c593", false},
		{sum[:31], false},
		{"", false},
	} {
		if got := bodyMatches(body, tc.want); got != tc.ok {
			t.Errorf("bodyMatches(%q, %q) = %v, want %v", body, tc.want, got, tc.ok)
		}
	}
}
