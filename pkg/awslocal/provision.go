package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// StackOptions describes the resources Provision creates. The zero value (with a Name) is a
// standard queue with a DLQ and a redrive policy after 15 receives.
type StackOptions struct {
	// Name is the stack name; resource names derive from it: "<name>-jobs" and "<name>-jobs-dlq"
	// (with ".fifo" appended for FIFO). Required: 1-60 characters of [A-Za-z0-9_-].
	Name string
	// FIFO makes both queues FIFO queues. Defaults to false (standard queues).
	FIFO bool
	// ContentBasedDeduplication enables content-based deduplication on a FIFO queue. Defaults to
	// false.
	ContentBasedDeduplication bool
	// MaxReceiveCount is the redrive policy's maxReceiveCount: the safety net for crashes. It
	// should be at least 3 × the largest MaxAttempts of any kind. Defaults to 15 (3 × 5).
	MaxReceiveCount int
	// VisibilityTimeout of the source queue. Defaults to 30 seconds.
	VisibilityTimeout int
}

// Stack names the provisioned resources.
type Stack struct {
	// Name is the stack name the resources derive from.
	Name string
	// QueueURL and QueueARN identify the job queue.
	QueueURL, QueueARN string
	// DLQURL and DLQARN identify its dead-letter queue.
	DLQURL, DLQARN string
	// FIFO reports whether the queues are FIFO queues.
	FIFO bool
}

// QueueMaxMessageSize is the MaximumMessageSize of both queues Provision creates: 1 MiB
// (1,048,576 bytes), the most SQS allows and what the producer assumes
// (producer.Config.QueueMaxMessageSize's default). SQS's default for a queue created without the
// attribute is 256 KiB, which would refuse the producer's larger jobs, and the worker's
// dead-letter copies of them.
const QueueMaxMessageSize = 1 << 20

// QueueName returns the job queue's name for a stack.
func QueueName(stack string, fifo bool) string { return suffix(stack+"-jobs", fifo) }

// DLQName returns the dead-letter queue's name for a stack.
func DLQName(stack string, fifo bool) string { return suffix(stack+"-jobs-dlq", fifo) }

func suffix(name string, fifo bool) string {
	if fifo {
		return name + ".fifo"
	}
	return name
}

// SQSProvisioner is the part of the SQS client Provision uses.
type SQSProvisioner interface {
	CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Provision creates (or finds, since CreateQueue is idempotent for equal attributes) the job
// queue and its DLQ, with the redrive policy from the source to the DLQ, both with a
// MaximumMessageSize of QueueMaxMessageSize (1 MiB).
func Provision(ctx context.Context, client SQSProvisioner, opts StackOptions) (*Stack, error) {
	if err := validStackName(opts.Name); err != nil {
		return nil, err
	}
	if opts.MaxReceiveCount == 0 {
		opts.MaxReceiveCount = 15
	}
	if opts.MaxReceiveCount < 1 || opts.MaxReceiveCount > 1000 {
		return nil, fmt.Errorf("awslocal: MaxReceiveCount %d out of range 1-1000", opts.MaxReceiveCount)
	}
	if opts.VisibilityTimeout == 0 {
		opts.VisibilityTimeout = 30
	}
	if opts.VisibilityTimeout < 0 || opts.VisibilityTimeout > 43200 {
		return nil, fmt.Errorf("awslocal: VisibilityTimeout %d out of range 0-43200", opts.VisibilityTimeout)
	}
	st := &Stack{Name: opts.Name, FIFO: opts.FIFO}
	maxSize := strconv.Itoa(QueueMaxMessageSize)
	dlqAttrs := map[string]string{"MessageRetentionPeriod": "1209600", "MaximumMessageSize": maxSize}
	if opts.FIFO {
		dlqAttrs["FifoQueue"] = "true"
	}
	var err error
	if st.DLQURL, st.DLQARN, err = createQueue(ctx, client, DLQName(opts.Name, opts.FIFO), dlqAttrs); err != nil {
		return nil, err
	}
	redrive, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": st.DLQARN,
		"maxReceiveCount":     strconv.Itoa(opts.MaxReceiveCount),
	})
	attrs := map[string]string{
		"VisibilityTimeout":  strconv.Itoa(opts.VisibilityTimeout),
		"RedrivePolicy":      string(redrive),
		"MaximumMessageSize": maxSize,
	}
	if opts.FIFO {
		attrs["FifoQueue"] = "true"
		if opts.ContentBasedDeduplication {
			attrs["ContentBasedDeduplication"] = "true"
		}
	}
	if st.QueueURL, st.QueueARN, err = createQueue(ctx, client, QueueName(opts.Name, opts.FIFO), attrs); err != nil {
		return nil, err
	}
	return st, nil
}

func createQueue(ctx context.Context, client SQSProvisioner, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("awslocal: create queue %s: %w", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	ga, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("awslocal: get ARN of %s: %w", name, err)
	}
	return url, ga.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}
