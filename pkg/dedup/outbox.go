package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// ErrDuplicate is wrapped by the *DuplicateError of UniqueWrite: another job holds the key.
var ErrDuplicate = errors.New("duplicate: another job holds the unique key")

// DuplicateError says which job holds a unique key (UniqueWrite).
type DuplicateError struct {
	Kind, RuleKey string
	// JobID and Key are the holding job's id and key.
	JobID, Key string
	// State is its record's state, when it was read ("" otherwise).
	State idempotency.State
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("dedup: %s unique key %q is held by job %s: %v", e.Kind, e.RuleKey, e.JobID, ErrDuplicate)
}

// Is makes the error match ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// UniqueWrite returns the write that reserves the unique key for the prepared job m as an
// action of the caller's own DynamoDB transaction: with the transactional outbox
// (pkg/outbox/dynamooutbox), the reservation, the business data and the job commit together or
// not at all, so there is no moment where the key is held by a job that was never enqueued.
//
//	job, err := ob.Prepare(ctx, prod, ExportArgs{User: 7})
//	w, err := enq.UniqueWrite(ctx, job.Entry.Message, dedup.Unique{Fields: []string{"user"}, Window: time.Hour})
//	if errors.Is(err, dedup.ErrDuplicate) { … } // nothing to write: the export is already queued
//	_, err = ob.Transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{putExport, w}}, job)
//
// A transaction cannot decide whether the job holding a key is over, so UniqueWrite reads the
// key's item first (one strongly consistent read; with States, one more of the holding job's
// record) and returns a *DuplicateError (ErrDuplicate) when the key is held. Otherwise the write
// is a Put conditioned on what it read: the key free, or still held by the job that is over.
// When another transaction took the key in between, the condition fails and DynamoDB cancels
// the whole transaction (dynamooutbox.TransactionError.ConditionFailed names the action): call
// UniqueWrite again to learn the new holder. In a transaction the write costs 2 write units.
//
// The key's job is judged by its record: give the outbox Config.Status (the job's queued
// record in the same transaction), else a key whose job still waits for the relay could be
// taken over once Config.ReserveLease is over.
func (e *Enqueuer) UniqueWrite(ctx context.Context, m producer.Message, u Unique) (types.TransactWriteItem, error) {
	if err := e.checkUnique(u, m); err != nil {
		return types.TransactWriteItem{}, err
	}
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("%w: the message's envelope: %v", ErrInvalid, err)
	}
	key := u.Key
	if key == "" {
		if key, err = argsKey(m.Kind, env.Args, u.Fields); err != nil {
			return types.TransactWriteItem{}, err
		}
	}
	pk := itemPK(UniqueKeyPrefix, m.Kind, key)
	old, err := e.getItem(ctx, pk)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("dedup: unique %s key %q: read the key's item: %w", m.Kind, key, err)
	}
	now := e.now()
	put := &types.Put{
		TableName:                           aws.String(e.table),
		Item:                                e.uniqueItem(pk, m, now, u),
		ConditionExpression:                 aws.String(absentOrExpired),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK, "#exp": attrExp},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": avN(now.Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if old != nil && getN(old, attrExp) > now.Unix() {
		h := holderOf(old)
		held, err := e.judge(ctx, m.Kind, old, &h, u, now)
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("dedup: unique %s key %q: %w", m.Kind, key, err)
		}
		if held {
			return types.TransactWriteItem{}, &DuplicateError{Kind: m.Kind, RuleKey: key, JobID: h.jobID, Key: h.jobKey, State: h.state}
		}
		if old[attrUJob] == nil || old[attrUAt] == nil {
			return types.TransactWriteItem{}, fmt.Errorf("dedup: unique %s key %q: its item lacks %s or %s: not written by this package", m.Kind, key, attrUJob, attrUAt)
		}
		put.ConditionExpression = aws.String(absentOrExpired + " OR (#j = :oldJob AND #at = :oldAt)")
		put.ExpressionAttributeNames["#j"], put.ExpressionAttributeNames["#at"] = attrUJob, attrUAt
		put.ExpressionAttributeValues[":oldJob"], put.ExpressionAttributeValues[":oldAt"] = old[attrUJob], old[attrUAt]
	}
	return types.TransactWriteItem{Put: put}, nil
}
