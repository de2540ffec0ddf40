package dynamooutbox

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbtable"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// The outbox table (docs/OUTBOX.md, "DynamoDB"): one item per unsent job.
//
//   - Keys: partition key AttrPK and sort key AttrSK, both strings. A job for a standard queue is
//     the item ("job#<id>", "job"). The jobs of one FIFO message group share the partition
//     "fifo#<queue name>#<group>" and are sorted by AttrOrd, their commit order, so that one
//     strongly consistent Query reads a group's unsent jobs in order.
//   - GSI IndexByState (sparse): AttrGSIPK = "pending#<shard>" or "dead#<shard>", sort key
//     AttrOrd; it projects AttrAvailableAt and AttrCreatedAt, which never change on a claim, so a
//     claim does not write the index. Sent jobs leave it.
//   - GSI IndexByID (sparse, keys only): AttrJobID, written on FIFO items only (a standard item's
//     key is its id).
//   - TTL on AttrExpires (unix seconds): only on jobs kept after they were sent
//     (Config.KeepSent).
const (
	AttrPK          = "pk"           // S: "job#<id>", or "fifo#<queue name>#<group>"
	AttrSK          = "sk"           // S: "job", or the FIFO job's AttrOrd
	AttrVersion     = "v"            // N: the item format, ItemVersion
	AttrJobID       = "job_id"       // S: FIFO items only; the key of IndexByID
	AttrKind        = "kind"         // S
	AttrKey         = "key"          // S: the effective idempotency key
	AttrQueueURL    = "queue_url"    // S
	AttrBody        = "body"         // S: the envelope, when not compressed
	AttrBodyGzip    = "gz_body"      // B: the envelope, gzip-compressed (Config.CompressAbove)
	AttrAttributes  = "attrs"        // M: name → M{"t": S data type, "s": S | "b": B}
	AttrGroupID     = "group_id"     // S
	AttrDedupID     = "dedup_id"     // S
	AttrRunAt       = "run_at"       // N: unix ms
	AttrCreatedAt   = "created_at"   // N: unix ms
	AttrAvailableAt = "available_at" // N: unix ms
	AttrAttempts    = "attempts"     // N
	AttrLockedBy    = "locked_by"    // S
	AttrLockedUntil = "locked_until" // N: unix ms
	AttrLastError   = "last_error"   // S
	AttrState       = "state"        // S: pending, dead or sent
	AttrOrd         = "ord"          // S: commit order, "<19-digit unix ns>#<id>"
	AttrGSIPK       = "gpk"          // S: "<state>#<shard>", pending and dead items only
	AttrExpires     = idempotency.AttrExpires
)

// Index names of the outbox table.
const (
	IndexByState = "by_state"
	IndexByID    = "by_id"
)

// ItemVersion is the item format this package writes. Items of a newer format are left alone
// (a newer relay sends them).
const ItemVersion = 1

// Shards is the number of IndexByState partitions per state: a partition takes about 1,000
// writes a second, so the outbox takes 16,000 new jobs a second before the index throttles.
const Shards = 16

const (
	standardPrefix = "job#"
	standardSK     = "job"
	fifoPrefix     = "fifo#"
)

// shard returns a job's IndexByState shard: fnv32a(id) mod Shards.
func shard(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % Shards)
}

func statePartition(state string, shard int) string { return state + "#" + strconv.Itoa(shard) }

// TableInput returns the CreateTable input of an outbox table named name: on-demand billing,
// the keys, both indexes and a stream of new images (the relay's trigger). Enable TTL afterwards
// with EnableTTL.
func TableInput(name string) *dynamodb.CreateTableInput {
	attr := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	key := func(name string, t types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: t}
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{attr(AttrPK), attr(AttrSK), attr(AttrGSIPK), attr(AttrOrd), attr(AttrJobID)},
		KeySchema:            []types.KeySchemaElement{key(AttrPK, types.KeyTypeHash), key(AttrSK, types.KeyTypeRange)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName: aws.String(IndexByState),
				KeySchema: []types.KeySchemaElement{key(AttrGSIPK, types.KeyTypeHash), key(AttrOrd, types.KeyTypeRange)},
				Projection: &types.Projection{
					ProjectionType:   types.ProjectionTypeInclude,
					NonKeyAttributes: []string{AttrAvailableAt, AttrCreatedAt},
				},
			},
			{
				IndexName:  aws.String(IndexByID),
				KeySchema:  []types.KeySchemaElement{key(AttrJobID, types.KeyTypeHash)},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	}
}

// EnableTTL turns on the table's TTL on AttrExpires (idempotent): see idempotency.EnableTTL,
// whose attribute this table shares.
func EnableTTL(ctx context.Context, client idempotency.TTLAPI, table string) error {
	return idempotency.EnableTTL(ctx, client, table)
}

// TableAPI is the part of the DynamoDB client CreateTable uses.
type TableAPI interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	idempotency.TTLAPI
}

// CreateTable creates (or finds) an outbox table named name (TableInput), waits until the table
// and its indexes are ACTIVE (DynamoDB creates a table in state CREATING and refuses writes and
// UpdateTimeToLive until then), and enables its TTL, for local runs and tests (the CDK stack
// declares the same table). It returns the table's stream ARN.
func CreateTable(ctx context.Context, client TableAPI, name string) (streamARN string, err error) {
	desc, err := ddbtable.Create(ctx, client, TableInput(name), ddbtable.Wait{}, keepConnection)
	if err != nil {
		return "", fmt.Errorf("dynamooutbox: %w", err)
	}
	if err := EnableTTL(ctx, client, name); err != nil {
		return "", err
	}
	return aws.ToString(desc.LatestStreamArn), nil
}
