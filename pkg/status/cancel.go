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

// ErrFinished is wrapped by CancelJob's error for a job that has finished: it succeeded (the
// error wraps ErrSucceeded too), is dead, or was already cancelled. Nothing runs such a job
// again (a dead one only if it is redriven), so there is nothing to cancel.
var ErrFinished = errors.New("status: the job has finished")

// CancelResult says what a cancellation did.
type CancelResult struct {
	// Job is the job's record after the cancellation's write (as read, when nothing was
	// written).
	Job Job
	// Requested reports that the job was running under a live claim: instead of taking the
	// claim away, a cancellation request was written on its record (Record.CancelRequestedAt).
	// Its worker notices it within MiddlewareConfig.CancelCheck (10 seconds by default) plus a
	// second, cancels the job's context, and records the job as cancelled when it returns (a job
	// that ignores its context finishes, and its outcome is recorded as what happened). False:
	// the job was waiting (queued, scheduled, retrying, or running with an expired lease) and is
	// cancelled now.
	Requested bool
	// AlreadyRequested reports that a cancellation of the running job had been requested
	// before: nothing was written.
	AlreadyRequested bool
	// Was is the job's state before the cancellation ("" when Cancel wrote a new record).
	Was idempotency.State
}

// CancelJob cancels the job of a key that exists, for an operator (`sqsworker cancel`, the
// console): a waiting job (queued, scheduled, retrying, or running with an expired lease) becomes
// cancelled now; a running job gets a cancellation request (CancelResult.Requested). Unlike
// Cancel, it writes no record for a job it does not find (an error wrapping ErrNotFound: no
// record, an expired one, or one that lapsed while queued), and it refuses a finished job with
// an error wrapping ErrFinished (succeeded: also ErrSucceeded; dead; already cancelled). reason
// is kept on the record (at most idempotency.MaxCancelReasonBytes of it) and may be empty. A
// scheduled job's schedule is not deleted here (producer.Cancel does both): its firing is
// acknowledged without running.
//
// Cost: two strongly consistent reads (the key, and the id it may be) and one conditional write
// (see Cancel).
func (t *Table) CancelJob(ctx context.Context, kind, key, reason string) (CancelResult, error) {
	if err := validKindKey(kind, key); err != nil {
		return CancelResult{}, err
	}
	return t.cancel(ctx, kind, key, time.Time{}, reason, true)
}

// CancelByID is CancelJob for a job named by its id (found as GetByID finds it).
func (t *Table) CancelByID(ctx context.Context, jobID, reason string) (CancelResult, error) {
	j, err := t.GetByID(ctx, jobID)
	if err != nil {
		return CancelResult{}, err
	}
	if j.Kind == "" {
		// The dead record of a message that named no valid kind: nothing runs it.
		return CancelResult{Job: j}, fmt.Errorf("%w: job %s is %s and names no kind", ErrFinished, jobID, j.State)
	}
	return t.cancel(ctx, j.Kind, j.Key, time.Time{}, reason, true)
}

// cancel is Cancel (strict false) and CancelJob (strict true).
func (t *Table) cancel(ctx context.Context, kind, key string, at time.Time, reason string, strict bool) (CancelResult, error) {
	if at.IsZero() {
		at = t.now()
	}
	reason = idempotency.TruncateText(reason, idempotency.MaxCancelReasonBytes)
	exp := expSeconds(at.Add(t.cancelTTL))
	for range maxCancelRounds {
		item, pk, err := t.currentItem(ctx, kind, key)
		if err != nil {
			return CancelResult{}, fmt.Errorf("status: cancel %s/%s: %w", kind, key, err)
		}
		var cur *Job
		if item != nil {
			j, err := jobFromItem(item, t.now())
			if err != nil {
				return CancelResult{}, err
			}
			if !j.Expired {
				cur = &j
			} else if strict {
				what := "its record expired"
				if j.Lapsed() {
					what = "it expired while " + string(j.State) + ", never run"
				}
				return CancelResult{Job: j}, fmt.Errorf("%w: %s/%s: %s", ErrNotFound, kind, key, what)
			}
		}
		var res CancelResult
		if cur != nil {
			res.Was = cur.State
		}
		switch {
		case cur == nil && strict:
			return CancelResult{}, fmt.Errorf("%w: kind %q, key %q", ErrNotFound, kind, key)
		case cur == nil:
			err = t.putCancelled(ctx, kind, key, at, reason, exp)
		case cur.State == idempotency.StateSucceeded:
			err := fmt.Errorf("%w: %s/%s (at %s), so it cannot be cancelled", ErrSucceeded, kind, key,
				cur.UpdatedAt.Format(time.RFC3339Nano))
			if strict {
				err = fmt.Errorf("%w (%w)", err, ErrFinished)
			}
			return CancelResult{Job: *cur}, err
		case cur.State == idempotency.StateCancelled && strict:
			return CancelResult{Job: *cur}, fmt.Errorf("%w: %s/%s was already cancelled at %s", ErrFinished, kind, key,
				cur.UpdatedAt.Format(time.RFC3339Nano))
		case cur.State == idempotency.StateCancelled:
			return CancelResult{Job: *cur}, nil
		case cur.State == idempotency.StateDead && strict:
			return CancelResult{Job: *cur}, fmt.Errorf("%w: %s/%s is dead (reason %s): nothing runs it again unless it is redriven", ErrFinished,
				kind, key, orNone(cur.Reason))
		case cur.State == idempotency.StateRunning && !cur.CancelRequestedAt.IsZero():
			return CancelResult{Job: *cur, Requested: true, AlreadyRequested: true, Was: cur.State}, nil
		case cur.State == idempotency.StateRunning && cur.LeaseUntil.After(t.now()):
			res.Requested = true
			res.Job, err = t.requestCancel(ctx, item, pk, at, reason)
		default:
			var after map[string]types.AttributeValue
			if after, err = t.updateCancelled(ctx, item, pk, at, reason, exp); err == nil {
				res.Job, err = jobFromItem(after, t.now())
			}
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			continue // the record changed between the read and the write: decide again
		}
		if err != nil {
			return CancelResult{}, fmt.Errorf("status: cancel %s/%s: %w", kind, key, err)
		}
		return res, nil
	}
	return CancelResult{}, fmt.Errorf("status: cancel %s/%s: the record kept changing (%d attempts)", kind, key, maxCancelRounds)
}

// requestCancel writes a cancellation request on old, the record of a job running under a live
// claim, provided it still is (the same state, claim token and update time, the lease not over,
// no request yet), and returns the record after the write. It leaves the state, the claim and
// the update time alone: the worker holding the claim records the cancellation.
func (t *Table) requestCancel(ctx context.Context, old map[string]types.AttributeValue, pk string, at time.Time, reason string) (Job, error) {
	names := map[string]string{
		"#pk": idempotency.AttrPK, "#st": idempotency.AttrState, "#upd": idempotency.AttrUpdated,
		"#tok": idempotency.AttrToken, "#lease": idempotency.AttrLease, "#cxl": idempotency.AttrCancelAt,
	}
	values := map[string]types.AttributeValue{
		":running": attrS(string(idempotency.StateRunning)),
		":at":      attrN(unixMs(at)),
		":nowms":   attrN(unixMs(t.now())),
	}
	set := "#cxl = :at"
	if reason != "" {
		names["#why"] = idempotency.AttrCancelWhy
		values[":why"] = attrS(reason)
		set += ", #why = :why"
	}
	cond := "attribute_exists(#pk) AND #st = :running AND #lease > :nowms AND attribute_not_exists(#cxl)" + unchangedSince(old, values)
	out, err := t.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)},
		UpdateExpression:          aws.String("SET " + set),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return Job{}, err
	}
	return jobFromItem(out.Attributes, t.now())
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
