package poller

import (
	"crypto/md5" //nolint:gosec // SQS defines the attribute digest as MD5.
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/sqsevent"
)

// eventSource is the eventSource of every record Lambda builds from SQS.
const eventSource = "aws:sqs"

// toRecord builds the record Lambda's SQS event source mapping would deliver for m.
func toRecord(m sqstypes.Message, queueARN, region string) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             make(map[string]string, len(m.Attributes)),
		MessageAttributes:      sqsevent.MessageAttributes(m.MessageAttributes),
		EventSourceARN:         queueARN,
		EventSource:            eventSource,
		AWSRegion:              region,
	}
	maps.Copy(rec.Attributes, m.Attributes)
	// SQS returns the digest whenever a message has attributes, and Lambda passes it on; a backend
	// that omits it (the embedded emulator does) gets it computed here, so handlers see the same.
	if rec.Md5OfMessageAttributes == "" && len(m.MessageAttributes) > 0 {
		rec.Md5OfMessageAttributes = md5OfMessageAttributes(m.MessageAttributes)
	}
	return rec
}

// md5OfMessageAttributes computes SQS's MD5OfMessageAttributes: over the attributes sorted by
// name, each as its length-prefixed (4 bytes, big-endian) name and data type, a transport byte
// (1 string, 2 binary, 3 string list, 4 binary list) and the length-prefixed value(s).
func md5OfMessageAttributes(attrs map[string]sqstypes.MessageAttributeValue) string {
	h := md5.New() //nolint:gosec // SQS defines the attribute digest as MD5.
	put := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		put([]byte(name))
		put([]byte(aws.ToString(v.DataType)))
		switch {
		case v.StringValue != nil:
			h.Write([]byte{1})
			put([]byte(*v.StringValue))
		case v.BinaryValue != nil || strings.HasPrefix(aws.ToString(v.DataType), "Binary"):
			h.Write([]byte{2})
			put(v.BinaryValue)
		case len(v.StringListValues) > 0:
			h.Write([]byte{3})
			for _, s := range v.StringListValues {
				put([]byte(s))
			}
		case len(v.BinaryListValues) > 0:
			h.Write([]byte{4})
			for _, b := range v.BinaryListValues {
				put(b)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
