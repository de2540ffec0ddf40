package status

import (
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// QueuedWrite returns RecordQueued's record as an action for a TransactWriteItems of the
// caller's (the transactional outbox writes it beside the job), so that the job's status exists
// from the commit on.
//
// Inside a transaction a refused condition would cancel the whole transaction, so the action
// is not conditional: it is an UpdateItem that sets each attribute only where the item has none
// (if_not_exists). With no record it writes a queued one, exactly as RecordQueued does; a record
// the key already has — the same job further along, or another job of the key — keeps its state
// and every attribute it has. (An expired record is left as well, and counts as absent to the
// worker as always.) It costs what RecordQueued costs: one write, two in a transaction.
//
// The attributes such a record lacks, though, are added from the new job, since an expression
// cannot make one attribute's write depend on another's presence: a record without an expiry
// (a running claim, or a dead or retrying record kept without one) gains the new job's, at +
// ExpiresAt, after which DynamoDB's TTL deletes it; one without job_id or hash gains the new
// job's. It happens only when a second job of one kind reuses a key whose record is still there
// (a duplicate, which the worker's idempotency skips): give distinct jobs distinct keys, or
// leave the queued record out of the transaction (dynamooutbox.Config.Status nil).
func (t *Table) QueuedWrite(j QueuedJob) (types.TransactWriteItem, error) {
	at, err := t.checkJob("QueuedJob", j.Kind, j.Key, j.JobID, j.At, j.ExpiresAt)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	item := t.jobItem(j.Kind, j.Key, j.JobID, j.PayloadHash, idempotency.StateQueued, at, j.ExpiresAt)
	pk := item[idempotency.AttrPK]
	delete(item, idempotency.AttrPK)
	attrs := make([]string, 0, len(item))
	for a := range item {
		attrs = append(attrs, a)
	}
	sort.Strings(attrs)
	names := make(map[string]string, len(attrs))
	values := make(map[string]types.AttributeValue, len(attrs))
	set := "SET "
	for i, a := range attrs {
		// Placeholders of one letter and one digit: none is a prefix of another.
		n, v := "#a"+strconv.Itoa(i), ":v"+strconv.Itoa(i)
		names[n], values[v] = a, item[a]
		if i > 0 {
			set += ", "
		}
		set += n + " = if_not_exists(" + n + ", " + v + ")"
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: pk},
		UpdateExpression:          aws.String(set),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}}, nil
}

// EnqueuedWrite is QueuedWrite with RecordEnqueued's expiry (at + Config.CancelTTL): the
// transactional outbox's counterpart of RecordEnqueued. It implements dynamooutbox.StatusWriter.
func (t *Table) EnqueuedWrite(kind, key, jobID, payloadHash string, at time.Time) (types.TransactWriteItem, error) {
	if at.IsZero() {
		at = t.now()
	}
	return t.QueuedWrite(QueuedJob{Kind: kind, Key: key, JobID: jobID, PayloadHash: payloadHash, At: at, ExpiresAt: at.Add(t.cancelTTL)})
}
