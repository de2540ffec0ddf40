package jobqueue

import (
	"errors"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// EnvBatchesOutbox turns on batches and chains in the worker (functions/internal/config,
// pkg/batch): it names the outbox table through which the worker enqueues a batch's callback and
// a chain's next step, in the same DynamoDB transaction as the child's or step's final write.
const EnvBatchesOutbox = "SQSWORKER_BATCHES_OUTBOX_TABLE"

// BatchesWorkerOutboxActions are the worker's calls on the outbox table with Props.Batches: the
// Put of a callback or next step, inside TransactWriteItems (which IAM authorizes per action:
// dynamodb:PutItem on the outbox table). Its calls on the job table are WorkerTableActions: the
// batch's and the chain's items are updated in the same transactions (dynamodb:UpdateItem), and
// read with GetItem.
var BatchesWorkerOutboxActions = []string{"dynamodb:PutItem"}

// validateBatches reports what Props.Batches needs: the outbox, whose relay sends what the worker
// puts there.
func (p Props) validateBatches() error {
	if p.Batches && p.Outbox == nil {
		return errors.New("jobqueue: Batches needs Outbox: a batch's callback and a chain's next step are sent by the outbox's relay (set Outbox: &OutboxProps{})")
	}
	return nil
}

// batches gives the worker what Props.Batches needs (after addOutbox): the outbox table in its
// environment, and PutItem on that table for the outbox's own item keys only (the job#… and
// fifo#… partitions, as GrantOutboxWrite).
func (jq *JobQueue) batches() {
	if !jq.Props.Batches || jq.Outbox == nil {
		return
	}
	jq.Worker.AddEnvironment(jsii.String(EnvBatchesOutbox), jq.Outbox.Table.TableName(), nil)
	jq.WorkerRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(BatchesWorkerOutboxActions...),
		Resources: &[]*string{jq.Outbox.Table.TableArn()},
		Conditions: &map[string]any{
			"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": outboxKeyPrefixes},
		},
	}))
}
