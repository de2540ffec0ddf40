package poller

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
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
