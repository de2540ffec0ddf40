package poller

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client (*sqs.Client) a Poller uses.
type SQSAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Handler handles one batch of SQS messages, as a Lambda function behind an SQS event source
// mapping with ReportBatchItemFailures does: it returns the messages to retry in
// BatchItemFailures, or an error to retry the whole batch.
type Handler interface {
	HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
}

// MessageHandler is a Handler that also takes a batch as ReceiveMessage returned it, without the
// Lambda event: when the Poller's Handler is one, the poller calls HandleMessages instead of
// HandleSQS, and skips building the event (worker.Handler is one). HandleMessages must judge the
// batch as HandleSQS would judge the event built from it: queueARN and region are the event's
// eventSourceARN and awsRegion, and it returns the ids of the messages to retry (what
// BatchItemFailures would name), or an error to retry the whole batch. A type that embeds a
// MessageHandler (a *worker.Handler) to wrap its HandleSQS must wrap HandleMessages as well, or
// the poller calls the embedded one and skips the wrapper.
type MessageHandler interface {
	Handler
	HandleMessages(ctx context.Context, queueARN, region string, msgs []sqstypes.Message) (failedIDs []string, err error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// HandleSQS calls f(ctx, ev).
func (f HandlerFunc) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return f(ctx, ev)
}
