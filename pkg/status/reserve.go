package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// maxReserveRounds bounds ReserveQueued's put-then-read rounds when the record it collided with
// is gone (or expired) by the time it reads it.
const maxReserveRounds = 3

// ReserveQueued is the producer-side half of the worker's claim: it writes the queued record of a
// job about to be enqueued, before its message is sent, with one conditional PutItem that
// succeeds only when the key has no live record (none, or an expired one). It returns the record
// and true when it wrote it; otherwise the key's live record, unchanged, and false. A caller
// that enqueues on behalf of clients (functions/api) answers a repeated request with that
// record's job id, refuses one whose RequestHash (else PayloadHash) differs, and sends only after
// a reservation; a repeat that sends the queued job again marks it sent (MarkSent).
//
// Unlike RecordQueued, which the producer calls after SQS accepted the message and which leaves
// a live record alone, ReserveQueued tells the caller what it found. ExpiresAt defaults to At +
// Config.CancelTTL (as RecordEnqueued). The record it collided with comes from the conditional
// check's ALL_OLD item, or, on backends that do not return it, from a strongly consistent
// GetItem (one read).
//
// If the send that follows fails, call ReleaseQueued, so that the key is free again.
func (t *Table) ReserveQueued(ctx context.Context, j QueuedJob) (Job, bool, error) {
	at, err := t.checkJob("QueuedJob", j.Kind, j.Key, j.JobID, j.At, j.ExpiresAt)
	if err != nil {
		return Job{}, false, err
	}
	if j.ExpiresAt.IsZero() {
		j.ExpiresAt = at.Add(t.cancelTTL)
	}
	item := t.jobItem(j.Kind, j.Key, j.JobID, j.PayloadHash, idempotency.StateQueued, at, j.ExpiresAt)
	if j.RequestHash != "" {
		item[attrRequestHash] = attrS(j.RequestHash)
	}
	pk := t.layout.ItemKey(j.Kind, j.Key, j.JobID)
	for range maxReserveRounds {
		now := t.now()
		_, err := t.putItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(t.table),
			Item:                                item,
			ConditionExpression:                 aws.String(absentOrExpired),
			ExpressionAttributeNames:            map[string]string{"#pk": idempotency.AttrPK, "#exp": idempotency.AttrExpires},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": attrN(now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if err == nil {
			written, err := jobFromItem(item, now)
			return written, true, err
		}
		if !errors.As(err, &ccf) {
			return Job{}, false, fmt.Errorf("status: reserve %s/%s: %w", j.Kind, j.Key, err)
		}
		old := ccf.Item
		if len(old) == 0 { // the backend did not return the item (kumo ignores ALL_OLD)
			if old, err = t.getItem(ctx, pk); err != nil {
				return Job{}, false, fmt.Errorf("status: reserve %s/%s: read the existing record: %w", j.Kind, j.Key, err)
			}
		}
		if old == nil {
			continue // deleted since the check: try again
		}
		cur, err := jobFromItem(old, t.now())
		if err != nil {
			return Job{}, false, err
		}
		if cur.Expired {
			continue // expired since the check: it no longer counts
		}
		return cur, false, nil
	}
	return Job{}, false, fmt.Errorf("status: reserve %s/%s: the record kept changing (%d attempts)", j.Kind, j.Key, maxReserveRounds)
}

// ReleaseQueued undoes a ReserveQueued whose message could not be sent: it expires the key's
// record (exp = now), so that every reader and writer treats the key as free and DynamoDB's TTL
// deletes the item, provided the record is still that job's queued record. One conditional
// UpdateItem; a record that moved on (a worker claimed it: the message was sent after all) or
// belongs to another job is left alone, and that is not an error.
func (t *Table) ReleaseQueued(ctx context.Context, kind, key, jobID string) error {
	if err := validKindKey(kind, key); err != nil {
		return err
	}
	if jobID == "" {
		return fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	if err := t.updateQueued(ctx, kind, key, jobID, "#exp", idempotency.AttrExpires, attrN(t.now().Unix())); err != nil {
		return fmt.Errorf("status: release %s/%s (job %s): %w", kind, key, jobID, err)
	}
	return nil
}

// MarkSent records that the message of the queued job jobID under (kind, key) was sent (SQS
// accepted it), so that a caller answering repeated requests (functions/api) does not send it
// again: one conditional UpdateItem of sent_at (not an indexed attribute: no index write), made
// only while the record is still that job's queued record. A record that moved on (a worker
// claimed it) or belongs to another job is left alone, and that is not an error. at defaults to
// Config.Now().
func (t *Table) MarkSent(ctx context.Context, kind, key, jobID string, at time.Time) error {
	if err := validKindKey(kind, key); err != nil {
		return err
	}
	if jobID == "" {
		return fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	if at.IsZero() {
		at = t.now()
	}
	if err := t.updateQueued(ctx, kind, key, jobID, "#sent", attrSentAt, attrN(unixMs(at))); err != nil {
		return fmt.Errorf("status: mark %s/%s (job %s) sent: %w", kind, key, jobID, err)
	}
	return nil
}

// updateQueued sets one attribute (name, its placeholder ph) of the record of the queued job jobID
// under (kind, key), with one conditional UpdateItem made only while the record is still that
// job's queued record. A record that moved on or belongs to another job is left alone, and that
// is not an error.
func (t *Table) updateQueued(ctx context.Context, kind, key, jobID, ph, name string, value types.AttributeValue) error {
	names := map[string]string{"#pk": idempotency.AttrPK, "#st": idempotency.AttrState, ph: name}
	values := map[string]types.AttributeValue{":v": value, ":queued": attrS(string(idempotency.StateQueued))}
	cond := "attribute_exists(#pk) AND #st = :queued"
	if !t.layout.IDKeyed(key, jobID) { // a record under the job's id is that job's
		names["#id"], values[":id"] = idempotency.AttrJobID, attrS(jobID)
		cond += " AND #id = :id"
	}
	_, err := t.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: attrS(t.layout.ItemKey(kind, key, jobID))},
		UpdateExpression:          aws.String("SET " + ph + " = :v"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return err
	}
	return nil
}
