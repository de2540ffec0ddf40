package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// Names of the table's keys, indexes and TTL attribute; they mirror pkg/idempotency (TableInput),
// which this module does not import so that infra stays independent of the library's SDK deps.
const (
	AttrPK        = "pk"
	AttrGSI1PK    = "gsi1pk"
	AttrGSI1SK    = "gsi1sk"
	AttrJobID     = "job_id"
	AttrExpires   = "exp"
	IndexByStatus = "by_status"
	IndexByID     = "by_id"
)

// ByStatusProjection is the INCLUDE projection of IndexByStatus (pkg/idempotency.TableInput).
var ByStatusProjection = []string{"kind", "key", "job_id", "st", "runs", "reason", "upd", "last_at"}

// WorkerTableActions are the DynamoDB actions the Lambda worker (functions/worker) needs, on the
// table only. Its one table client is pkg/idempotency's DynamoDBStore, which calls UpdateItem
// (the claim before a job runs and the finish after it: every status write the worker makes),
// GetItem (a refused claim, when the backend does not return the old item with the
// ConditionalCheckFailedException) and PutItem (replacing an expired record TTL has not deleted
// yet). pkg/worker itself makes no DynamoDB call, and none of these name an index.
var WorkerTableActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}

// StatusTableActions (on the table) and StatusIndexActions (on the two indexes) are what
// pkg/status needs beyond WorkerTableActions, granted to the worker with
// Props.WorkerStatusQueries: Table.GetByID queries the by_id index and then reads the items
// with BatchGetItem; Table.List queries the by_status index (and reads with BatchGetItem too).
// Get, RecordQueued, RecordScheduled, Cancel and ResetForRedrive use only GetItem, PutItem and
// UpdateItem.
var (
	StatusTableActions = []string{"dynamodb:BatchGetItem"}
	StatusIndexActions = []string{"dynamodb:Query"}
)

// table builds the job table: exactly pkg/idempotency.TableInput, TTL on exp, PITR on. With
// DeletionProtection it is protected and retained when the stack is deleted (the only resource
// retained); otherwise it is deleted with the stack.
func (jq *JobQueue) table() {
	p := jq.Props
	removal := awscdk.RemovalPolicy_DESTROY
	if p.DeletionProtection {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	// Completion events read the table's stream: new and old images, to tell a state change.
	var stream awsdynamodb.StreamViewType
	if p.Events != nil {
		stream = awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES
	}
	jq.Table = awsdynamodb.NewTable(jq.Construct, jsii.String("Table"), &awsdynamodb.TableProps{
		TableName:           jsii.String(TableName(p.Name)),
		Stream:              stream,
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(AttrExpires),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(p.DeletionProtection),
		RemovalPolicy:      removal,
	})
	jq.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:        jsii.String(IndexByStatus),
		PartitionKey:     &awsdynamodb.Attribute{Name: jsii.String(AttrGSI1PK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:          &awsdynamodb.Attribute{Name: jsii.String(AttrGSI1SK), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType:   awsdynamodb.ProjectionType_INCLUDE,
		NonKeyAttributes: jsii.Strings(ByStatusProjection...),
	})
	jq.Table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(IndexByID),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(AttrJobID), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
}

// grantWorkerTable gives the worker WorkerTableActions on the table (not CDK's
// GrantReadWriteData, which adds Scan, DeleteItem, batch writes, stream reads and every index)
// and, with WorkerStatusQueries, what pkg/status's lookups add, on the two indexes by name.
func (jq *JobQueue) grantWorkerTable(grantee awsiam.IGrantable) {
	allow := func(actions []string, resources ...*string) {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee:      grantee,
			Actions:      jsii.Strings(actions...),
			ResourceArns: &resources,
		})
	}
	table := jq.Table.TableArn()
	if !jq.Props.WorkerStatusQueries {
		allow(WorkerTableActions, table)
		return
	}
	allow(append(append([]string{}, WorkerTableActions...), StatusTableActions...), table)
	allow(StatusIndexActions, jsii.String(*table+"/index/"+IndexByStatus), jsii.String(*table+"/index/"+IndexByID))
}
