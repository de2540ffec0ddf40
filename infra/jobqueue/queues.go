package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// queues builds the job queue and its DLQ: SSE-SQS (or the customer key), TLS only; the DLQ
// keeps messages 14 days. Both are deleted with the stack.
func (jq *JobQueue) queues() {
	p := jq.Props
	queueProps := func(name string) *awssqs.QueueProps {
		qp := &awssqs.QueueProps{
			QueueName:  jsii.String(name),
			Encryption: awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL: jsii.Bool(true),
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

// grantSend lets grantee send to q, the queue or the DLQ. With a customer key it grants only what
// SendMessage to a KMS-encrypted queue needs on the key, kms:GenerateDataKey and kms:Decrypt,
// where CDK's GrantSendMessages would add kms:Encrypt and kms:ReEncrypt*.
func (jq *JobQueue) grantSend(q awssqs.Queue, grantee awsiam.IGrantable) {
	key := jq.Props.EncryptionKey
	if key == nil {
		q.GrantSendMessages(grantee)
		return
	}
	q.Grant(grantee, jsii.String("sqs:SendMessage"), jsii.String("sqs:GetQueueAttributes"), jsii.String("sqs:GetQueueUrl"))
	key.Grant(grantee, jsii.String("kms:GenerateDataKey"), jsii.String("kms:Decrypt"))
}
