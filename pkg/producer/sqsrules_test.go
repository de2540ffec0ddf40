package producer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/payload"
)

// SQS's Number: up to 38 significant digits, 0 or a magnitude from 10^-128 to 10^126.
func TestCheckNumber(t *testing.T) {
	t.Parallel()
	ok := []string{
		"0", "-0", "+0", "0.0", "000", "0e999", "42", "-42", "+42", "3.14", "-1.5", ".5", "5.", "6.02E23", "1e-7", "1E+5",
		"12345678901234567890123456789012345678",         // 38 digits
		"1234567890123456789012345678901234567800000000", // 38 significant digits, trailing zeros trimmed
		"0.0000012345678901234567890123456789012345678",  // leading zeros trimmed
		"1e126", "1.000e126", "10e125", "9.99e125", "-1e126", // the largest magnitude, 10^126
		"1e-128", "-1e-128", "0.1e-127", "100e-130", // the smallest, 10^-128
	}
	for _, s := range ok {
		if err := checkNumber(s); err != nil {
			t.Errorf("checkNumber(%q) = %v, want nil", s, err)
		}
	}
	bad := map[string]string{
		"":          "is not a number",
		"abc":       "is not a number",
		" 5":        "is not a number",
		"5 ":        `' ' at byte 1`,
		"NaN":       "is not a number",
		"-Infinity": "is not a number",
		"0x10":      `'x' at byte 1`,
		"５":         "is not a number",
		"1５":        `'５' at byte 1`,
		"1_000":     `'_' at byte 1`,
		"1,5":       `',' at byte 1`,
		"1.2.3":     `'.' at byte 3`,
		".":         "is not a number",
		"-":         "is not a number",
		"1e":        "its exponent has no digits",
		"1e+":       "its exponent has no digits",
		"e5":        "is not a number",
		"123456789012345678901234567890123456789":  "has 39 significant digits, SQS keeps at most 38",
		"1.00000000000000000000000000000000000001": "has 39 significant digits",
		"1.1e126":                "outside SQS's range",
		"2e126":                  "outside SQS's range",
		"1e127":                  "outside SQS's range",
		"9.9e-129":               "outside SQS's range",
		"1e-129":                 "outside SQS's range",
		"1e99999999999999999999": "outside SQS's range",
	}
	for s, want := range bad {
		err := checkNumber(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkNumber(%q) = %v, want an error containing %q", s, err, want)
		}
	}
}

// A Number attribute SQS would refuse is refused before anything is sent, by Enqueue, Prepare
// (and so the outboxes' EnqueueTx) and Send alike; a String attribute is not a number's business.
func TestNumberAttributeRefused(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL)
	num := func(v string) Option {
		return WithAttributes(map[string]types.MessageAttributeValue{"price": {DataType: aws.String("Number.usd"), StringValue: aws.String(v)}})
	}
	ctx := context.Background()
	_, err := p.Enqueue(ctx, emailArgs{To: "a@b.c"}, num("twelve"))
	mustContain(t, err, `message attribute "price" (Number.usd): StringValue "twelve" is not a number (SQS wants a decimal such as 42, -1.5 or 6.02E23)`)
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v does not wrap ErrInvalid", err)
	}
	_, err = p.Prepare(ctx, emailArgs{To: "a@b.c"}, num("1e200"))
	mustContain(t, err, `StringValue "1e200" is outside SQS's range for numbers`)
	m, err := p.Prepare(ctx, emailArgs{To: "a@b.c"}, num("12.50"))
	if err != nil {
		t.Fatal(err)
	}
	m.Attributes["price"] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String("NaN")}
	res, err := p.Send(ctx, []Message{m})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	mustContain(t, err, `StringValue "NaN" is not a number`)
	if _, err := p.Enqueue(ctx, emailArgs{To: "a@b.c"}, WithAttributes(map[string]types.MessageAttributeValue{"note": strAttr("NaN")})); err != nil {
		t.Errorf("a String attribute \"NaN\": %v", err)
	}
	if n := len(api.sendCalls()) + len(api.batchCalls()); n != 1 {
		t.Errorf("%d calls, want 1 (the String attribute's job)", n)
	}
}

func TestQueueMaxMessageSizeConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size int
		want string
	}{
		{-1, "Config.QueueMaxMessageSize -1 is not between 16384 and 1048576 bytes"},
		{1024, "Config.QueueMaxMessageSize 1024 is not between 16384 and 1048576 bytes"},
		{1<<20 + 1, "Config.QueueMaxMessageSize 1048577 is not between"},
	} {
		_, err := New(Config{SQS: &fakeSQS{}, QueueURL: stdURL, QueueMaxMessageSize: tc.size})
		mustContain(t, err, tc.want)
	}
	for _, size := range []int{0, 16 << 10, 262144, 1 << 20} {
		if _, err := New(Config{SQS: &fakeSQS{}, QueueURL: stdURL, QueueMaxMessageSize: size}); err != nil {
			t.Errorf("QueueMaxMessageSize %d: %v", size, err)
		}
	}
}

// A queue whose MaximumMessageSize is 256 KiB: the producer's limit is that less 8 KiB, exact,
// and the error names the message's size and the queue's.
func TestQueueMaxMessageSizeLimitIsExact(t *testing.T) {
	t.Parallel()
	api := &fakeSQS{}
	p := newTestProducer(t, api, stdURL, func(c *Config) { c.QueueMaxMessageSize = 262144 })
	ctx := context.Background()
	if _, err := p.Enqueue(ctx, blobArgs{}, WithID("id")); err != nil {
		t.Fatal(err)
	}
	overhead := len(api.sendCalls()[0].Body)
	const limit = 262144 - 8192
	if _, err := p.Enqueue(ctx, blobArgs{Data: strings.Repeat("x", limit-overhead)}, WithID("id")); err != nil {
		t.Fatalf("a message of exactly the limit: %v", err)
	}
	if got := api.sendCalls()[1].size(); got != limit {
		t.Fatalf("message size %d, want %d", got, limit)
	}
	_, err := p.Enqueue(ctx, blobArgs{Data: strings.Repeat("x", limit-overhead+1)}, WithID("id"))
	mustContain(t, err, "message is 253953 bytes (body 253953 + attributes 0), above the limit of 253952 bytes: the queue's MaximumMessageSize of 262144 bytes (producer.Config.QueueMaxMessageSize) less 8 KiB kept for the worker")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v does not wrap ErrTooLarge", err)
	}
	// Prepare (the outboxes' EnqueueTx) refuses it too, and a message prepared by a producer
	// for a larger queue is refused by Send.
	_, err = p.Prepare(ctx, blobArgs{Data: strings.Repeat("x", 300_000)})
	mustContain(t, err, "the queue's MaximumMessageSize of 262144 bytes")
	big := newTestProducer(t, &fakeSQS{}, stdURL)
	m, err := big.Prepare(ctx, blobArgs{Data: strings.Repeat("x", 300_000)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Send(ctx, []Message{m})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	mustContain(t, err, "above the limit of 253952 bytes: the queue's MaximumMessageSize of 262144 bytes")
	if n := len(api.sendCalls()) + len(api.batchCalls()); n != 2 {
		t.Errorf("%d calls, want the 2 jobs within the limit", n)
	}
}

// With a payload store, jobs above the smaller queue's limit (64 KiB less 8 KiB) go through
// S3 instead.
func TestQueueMaxMessageSizeWithPayload(t *testing.T) {
	t.Parallel()
	api, s3api := &fakeSQS{}, &fakeS3{}
	p := newPayloadProducer(t, api, s3api, func(c *Config) { c.QueueMaxMessageSize = 64 << 10 })
	ctx := context.Background()
	if _, err := p.Enqueue(ctx, blobArgs{Data: strings.Repeat("x", 50_000)}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, blobArgs{Data: strings.Repeat("x", 100_000)}); err != nil {
		t.Fatal(err)
	}
	sent := api.sendCalls()
	if len(sent) != 2 || payload.MaybePointer(sent[0].Body) || !payload.MaybePointer(sent[1].Body) || len(s3api.puts) != 1 {
		t.Fatalf("want the 50 KB job in SQS and the 100 KB one through S3; sent %d, %d objects", len(sent), len(s3api.puts))
	}
}
