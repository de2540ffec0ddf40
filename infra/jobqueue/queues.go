package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// MaxMessageSize is the MaximumMessageSize of every queue the construct creates (the job queue,
// its DLQ, the scheduler DLQ, the DynamoDB outbox's failures queue): 1,048,576 bytes, SQS's
// largest (CreateQueue: 1,024 to 1,048,576 bytes; aws-sdk-go-v2 service/sqs v1.53.0, read
// 2026-12-02) and what the producer assumes (pkg/producer MaxMessageSize, 1 MiB less 8 KiB for
// the worker's re-sends, and MaxBatchRequestSize). It is written into the template even though
// it is now SQS's default for new queues: a queue created under the old default of 262,144
// (256 KiB) keeps that value until it is set, and would refuse the larger jobs the producer
// accepts, and their dead letters.
const MaxMessageSize = 1 << 20

// queues builds the job queue and its DLQ: SSE-SQS (or the customer key), TLS only,
// MaxMessageSize; the DLQ keeps messages 14 days. Both are deleted with the stack.
func (jq *JobQueue) queues() {
	p := jq.Props
	queueProps := func(name string) *awssqs.QueueProps {
		qp := &awssqs.QueueProps{
			QueueName:           jsii.String(name),
			Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:          jsii.Bool(true),
			MaxMessageSizeBytes: jsii.Number(MaxMessageSize),
		}
		if p.EncryptionKey != nil {
			qp.Encryption = awssqs.QueueEncryption_KMS
			qp.EncryptionMasterKey = p.EncryptionKey
		}
		if p.FIFO {
			qp.Fifo = jsii.Bool(true)
			qp.ContentBasedDeduplication = jsii.Bool(true)
		}
		return qp
	}
	dlqProps := queueProps(DLQName(p.Name, p.FIFO))
	dlqProps.RetentionPeriod = secs(DLQRetention)
	jq.DLQ = awssqs.NewQueue(jq.Construct, jsii.String("DLQ"), dlqProps)

	qProps := queueProps(QueueName(p.Name, p.FIFO))
	qProps.VisibilityTimeout = secs(p.VisibilityTimeout)
	qProps.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: jq.DLQ, MaxReceiveCount: jsii.Number(float64(p.MaxReceiveCount))}
	jq.Queue = awssqs.NewQueue(jq.Construct, jsii.String("Queue"), qProps)
}

// SendOnlyActions are the SQS actions of a principal that only sends to a queue of the stack:
// SendMessage, which also authorizes SendMessageBatch. The scheduler role (EventBridge
// Scheduler's SQS target and its dead-letter queue), the API and both outbox relays (whose
// producer calls SendMessage and SendMessageBatch only, pkg/producer) get these alone.
var SendOnlyActions = []string{"sqs:SendMessage"}

// SendAndLookUpActions are SendOnlyActions plus the look-ups CDK's GrantSendMessages adds,
// GetQueueAttributes and GetQueueUrl, for principals that may look a queue up: GrantEnqueue's
// producers (the sqsworker CLI finds the queue by name with GetQueueUrl, and reads its ARN with
// GetQueueAttributes to schedule delayed jobs) and the worker on its queue and DLQ (a worker main
// without SQSWORKER_DLQ_URL finds the DLQ from the queue's redrive policy, pkg/worker).
var SendAndLookUpActions = []string{"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}

// grantSend lets grantee send to q, the queue or the DLQ, and look it up (SendAndLookUpActions).
// With a customer key it grants only what SendMessage to a KMS-encrypted queue needs on the key,
// kms:GenerateDataKey and kms:Decrypt, where CDK's GrantSendMessages would add kms:Encrypt and
// kms:ReEncrypt*.
func (jq *JobQueue) grantSend(q awssqs.Queue, grantee awsiam.IGrantable) {
	jq.grantQueueActions(q, grantee, SendAndLookUpActions)
}

// grantSendOnly lets grantee send to q and nothing else of SQS (SendOnlyActions), with the
// customer key's data-key actions as grantSend.
func (jq *JobQueue) grantSendOnly(q awssqs.Queue, grantee awsiam.IGrantable) {
	jq.grantQueueActions(q, grantee, SendOnlyActions)
}

func (jq *JobQueue) grantQueueActions(q awssqs.Queue, grantee awsiam.IGrantable, actions []string) {
	q.Grant(grantee, *jsii.Strings(actions...)...)
	if key := jq.Props.EncryptionKey; key != nil {
		key.Grant(grantee, jsii.String("kms:GenerateDataKey"), jsii.String("kms:Decrypt"))
	}
}
