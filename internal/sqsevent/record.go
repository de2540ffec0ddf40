// Package sqsevent holds the worker's view of an SQS message delivered by Lambda (or the poller),
// and a decoder that reads Lambda's invoke payload into it without allocating per field.
package sqsevent

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// Record is one SQS message of a batch. Strings may point into the batch's buffers: they stay
// valid as long as the Record is reachable (the buffers are never reused), but for ReceiptHandle.
type Record struct {
	MessageID string
	// ReceiptHandle, from Decode, points into the invoke payload: read it only while the
	// batch is handled (before Invoke returns), and copy it to keep it.
	ReceiptHandle  string
	Body           string
	MD5OfBody      string
	EventSourceARN string
	AWSRegion      string

	// System attributes ("attributes" in the event).
	ApproximateReceiveCount          int
	SentTimestamp                    int64 // Unix milliseconds
	ApproximateFirstReceiveTimestamp int64 // Unix milliseconds
	SenderID                         string
	MessageGroupID                   string
	MessageDeduplicationID           string
	SequenceNumber                   string
	AWSTraceHeader                   string
	DeadLetterQueueSourceARN         string

	// RawMessageAttributes is the "messageAttributes" JSON object exactly as in the payload
	// ("" or "{}" when there are none). MessageAttributes decodes it on demand.
	RawMessageAttributes string
	// Attrs, when not nil, are the message attributes already decoded (FromEvent sets it).
	Attrs map[string]events.SQSMessageAttribute
}

// MessageAttributes returns the message attributes, decoding RawMessageAttributes when needed.
func (r *Record) MessageAttributes() (map[string]events.SQSMessageAttribute, error) {
	if r.Attrs != nil || r.RawMessageAttributes == "" || r.RawMessageAttributes == "{}" {
		return r.Attrs, nil
	}
	var m map[string]events.SQSMessageAttribute
	if err := json.Unmarshal([]byte(r.RawMessageAttributes), &m); err != nil {
		return nil, err
	}
	r.Attrs = m
	return m, nil
}

// FromEvent converts an events.SQSEvent into records, appending to dst.
func FromEvent(ev events.SQSEvent, dst []Record) []Record {
	for i := range ev.Records {
		m := &ev.Records[i]
		r := Record{
			MessageID:      m.MessageId,
			ReceiptHandle:  m.ReceiptHandle,
			Body:           m.Body,
			MD5OfBody:      m.Md5OfBody,
			EventSourceARN: m.EventSourceARN,
			AWSRegion:      m.AWSRegion,
			Attrs:          m.MessageAttributes,
		}
		for k, v := range m.Attributes {
			r.setAttribute(k, v)
		}
		dst = append(dst, r)
	}
	return dst
}

// setAttribute stores one system attribute. Unknown names are ignored.
func (r *Record) setAttribute(name, value string) {
	if k := slices.Index(attributeKeys, name); k >= 0 {
		r.setAttributeAt(k, value)
	}
}

// setAttributeAt stores the system attribute attributeKeys[k].
func (r *Record) setAttributeAt(k int, value string) {
	switch k {
	case akApproximateReceiveCount:
		r.ApproximateReceiveCount = int(parseInt(value))
	case akSentTimestamp:
		r.SentTimestamp = parseInt(value)
	case akApproximateFirstReceiveTimestamp:
		r.ApproximateFirstReceiveTimestamp = parseInt(value)
	case akSenderID:
		r.SenderID = value
	case akMessageGroupID:
		r.MessageGroupID = value
	case akMessageDeduplicationID:
		r.MessageDeduplicationID = value
	case akSequenceNumber:
		r.SequenceNumber = value
	case akAWSTraceHeader:
		r.AWSTraceHeader = value
	case akDeadLetterQueueSourceArn:
		r.DeadLetterQueueSourceARN = value
	}
}

// parseInt reads a decimal attribute value as strconv.ParseInt does, 0 when it is not one. Plain
// digits (every value SQS sends: counts and unix milliseconds) take a loop of their own, several
// times cheaper than strconv's general parser, which the others go through.
func parseInt(s string) int64 {
	if len(s) > 0 && len(s) <= 18 {
		var n int64
		for i := 0; i < len(s); i++ {
			c := s[i] - '0'
			if c > 9 {
				goto general
			}
			n = n*10 + int64(c)
		}
		return n
	}
general:
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// SystemAttributes returns the system attributes as Lambda's event carries them.
func (r *Record) SystemAttributes() map[string]string {
	m := make(map[string]string, 8)
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	if r.ApproximateReceiveCount > 0 {
		m["ApproximateReceiveCount"] = strconv.Itoa(r.ApproximateReceiveCount)
	}
	if r.SentTimestamp > 0 {
		m["SentTimestamp"] = strconv.FormatInt(r.SentTimestamp, 10)
	}
	if r.ApproximateFirstReceiveTimestamp > 0 {
		m["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(r.ApproximateFirstReceiveTimestamp, 10)
	}
	put("SenderId", r.SenderID)
	put("MessageGroupId", r.MessageGroupID)
	put("MessageDeduplicationId", r.MessageDeduplicationID)
	put("SequenceNumber", r.SequenceNumber)
	put("AWSTraceHeader", r.AWSTraceHeader)
	put("DeadLetterQueueSourceArn", r.DeadLetterQueueSourceARN)
	return m
}
