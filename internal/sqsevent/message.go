package sqsevent

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// FromMessage fills r from m, a message as ReceiveMessage returned it from the queue queueARN in
// region: the record FromEvent gives of the Lambda event built of m (pkg/poller builds it), but
// for the message attributes, which are nil (not an empty map) when m has none, as Decode leaves
// them for Lambda's "messageAttributes":{}.
func FromMessage(m *sqstypes.Message, queueARN, region string, r *Record) {
	*r = Record{
		MessageID:      aws.ToString(m.MessageId),
		ReceiptHandle:  aws.ToString(m.ReceiptHandle),
		Body:           aws.ToString(m.Body),
		MD5OfBody:      aws.ToString(m.MD5OfBody),
		EventSourceARN: queueARN,
		AWSRegion:      region,
	}
	for name, v := range m.Attributes {
		r.setAttribute(name, v)
	}
	if len(m.MessageAttributes) > 0 {
		r.Attrs = MessageAttributes(m.MessageAttributes)
	}
}

// MessageAttributes converts the SDK's message attributes into the Lambda event's: both lists
// always present, empty when unused, as Lambda sends them.
func MessageAttributes(attrs map[string]sqstypes.MessageAttributeValue) map[string]events.SQSMessageAttribute {
	out := make(map[string]events.SQSMessageAttribute, len(attrs))
	for name, v := range attrs {
		a := events.SQSMessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
		if a.StringListValues == nil {
			a.StringListValues = []string{}
		}
		if a.BinaryListValues == nil {
			a.BinaryListValues = [][]byte{}
		}
		out[name] = a
	}
	return out
}
