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

// maxResetRounds bounds ResetForRedrive's read-then-write rounds when the record keeps changing.
const maxResetRounds = 4

// ResetForRedrive prepares a job key's record for a redrive of its dead letter (pkg/dlq calls
// it before sending the message back to the job queue), so that the job runs again with a fresh
// attempt budget and is no longer listed as dead.
//
// The key may be the job's id (a job enqueued without a key): as Get, ResetForRedrive reads both
// places its record may be and acts on the more recently updated one. It acts on a live (not
// expired) record that is dead, retrying, or running with an expired
// lease (a worker crashed or timed out on it, which is how SQS's own redrive policy dead-letters
// a job): the record becomes retrying — claimable, and indexed as retrying instead of dead — its
// run count becomes 0 unless keepRuns is set (and with it the continuations and total run time
// of a continued job; its cursor stays, so that it goes on from its last checkpoint), and any
// stale claim (token, lease) is removed. Its
// dead-letter reason is removed (a retrying job has none: status and the console would show
// "retrying, exhausted"); its last error is kept, to show what happened before the redrive.
//
// Every other record is left alone and ResetForRedrive returns nil: no record or an expired one
// (the redriven job starts afresh anyway), a queued or scheduled one (nothing spent yet), a
// running one with a live lease (the job is running now), a succeeded one (the redriven copy is
// acknowledged without running) and a cancelled one (the copy is acknowledged too).
//
// The write is conditional on the record being unchanged since it was read, so that a claim or
// an outcome written at the same time is never overwritten; a few rounds are retried when it
// changed.
func (t *Table) ResetForRedrive(ctx context.Context, kind, key string, keepRuns bool) error {
	if err := validKindKey(kind, key); err != nil {
		return err
	}
	for range maxResetRounds {
		item, pk, err := t.currentItem(ctx, kind, key)
		if err != nil {
			return fmt.Errorf("status: reset %s/%s for redrive: %w", kind, key, err)
		}
		if item == nil {
			return nil
		}
		now := t.now()
		j, err := jobFromItem(item, now)
		if err != nil {
			return err
		}
		if j.Expired || !resettable(j, now) {
			return nil
		}
		if j.State == idempotency.StateRetrying && j.Token == "" && j.Reason == "" && (keepRuns || j.Runs == 0 && j.Continuations == 0 && j.RunTime == 0) {
			return nil // already reset
		}
		err = t.updateReset(ctx, item, pk, keepRuns)
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			if err != nil {
				return fmt.Errorf("status: reset %s/%s for redrive: %w", kind, key, err)
			}
			return nil
		}
		// The record changed between the read and the write: decide again.
	}
	return fmt.Errorf("status: reset %s/%s for redrive: the record kept changing (%d attempts)", kind, key, maxResetRounds)
}

// resettable reports whether a live record is one a redrive resets.
func resettable(j Job, now time.Time) bool {
	switch j.State {
	case idempotency.StateDead, idempotency.StateRetrying:
		return true
	case idempotency.StateRunning:
		return !j.LeaseUntil.After(now)
	}
	return false
}

// updateReset turns the record read as old into a retrying one, provided it has not changed
// since: same state, same update time, same claim token.
func (t *Table) updateReset(ctx context.Context, old map[string]types.AttributeValue, pk string, keepRuns bool) error {
	now := t.now()
	names := map[string]string{
		"#pk": idempotency.AttrPK, "#st": idempotency.AttrState, "#upd": idempotency.AttrUpdated,
		"#tok": idempotency.AttrToken, "#lease": idempotency.AttrLease,
		"#g1": idempotency.AttrGSI1PK, "#g2": idempotency.AttrGSI1SK, "#exp": idempotency.AttrExpires,
		"#reason": idempotency.AttrReason,
	}
	values := map[string]types.AttributeValue{
		":r":   attrS(string(idempotency.StateRetrying)),
		":at":  attrN(unixMs(now)),
		":g1":  attrS(idempotency.StatusPartition(idempotency.StateRetrying, pk, t.shards)),
		":old": old[idempotency.AttrState],
		":now": attrN(now.Unix()),
	}
	set := "#st = :r, #upd = :at, #g1 = :g1, #g2 = :at"
	remove := "#tok, #lease, #reason"
	if !keepRuns {
		names["#runs"] = idempotency.AttrRuns
		values[":zero"] = attrN(0)
		set += ", #runs = :zero"
		// A continued job's budgets go with its attempts (its cursor stays: it goes on from it).
		names["#conts"], names["#runms"] = idempotency.AttrContinuations, idempotency.AttrRunTime
		remove += ", #conts, #runms"
	}
	cond := "attribute_exists(#pk) AND #st = :old AND (attribute_not_exists(#exp) OR #exp > :now)"
	cond += unchangedSince(old, values)
	_, err := t.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)},
		UpdateExpression:          aws.String("SET " + set + " REMOVE " + remove),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return err
}

// unchangedSince returns the condition that the record still is old, the version read before an
// optimistic write: its update time and claim token unchanged (absent ones still absent). It adds
// the values it uses; the caller maps #upd and #tok.
func unchangedSince(old map[string]types.AttributeValue, values map[string]types.AttributeValue) string {
	var cond string
	if v, ok := old[idempotency.AttrUpdated]; ok {
		values[":oldupd"] = v
		cond += " AND #upd = :oldupd"
	} else {
		cond += " AND attribute_not_exists(#upd)"
	}
	if v, ok := old[idempotency.AttrToken]; ok {
		values[":oldtok"] = v
		cond += " AND #tok = :oldtok"
	} else {
		cond += " AND attribute_not_exists(#tok)"
	}
	return cond
}
