package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// QueuedJob is the producer's optional record of a job it enqueued.
type QueuedJob struct {
	// Kind, Key and JobID identify the job, as in its envelope (Key defaults to the job id
	// there; here it is required). Required.
	Kind, Key, JobID string
	// PayloadHash is jobs.PayloadHash of the job's kind and args; the worker refuses a later
	// delivery of the key with another hash. Empty: not recorded.
	PayloadHash string
	// RequestHash is the hash of the whole request that enqueued the job, for a caller that
	// answers repeated requests (ReserveQueued; functions/api hashes the kind, args, delay and
	// group): the worker ignores it. Empty: not recorded. RecordQueued does not write it.
	RequestHash string
	// At is the time of the write. Defaults to Config.Now().
	At time.Time
	// ExpiresAt is when the record stops counting; set it past the queue's message retention.
	// Zero: never (not recommended: a job whose message is lost stays queued).
	ExpiresAt time.Time
}

// RecordEnqueued records a job the producer enqueued as queued (see RecordQueued), keeping the
// record for CancelTTL. It implements producer.StatusRecorder.
func (t *Table) RecordEnqueued(ctx context.Context, kind, key, jobID, payloadHash string, at time.Time) error {
	return t.RecordQueued(ctx, QueuedJob{Kind: kind, Key: key, JobID: jobID, PayloadHash: payloadHash, At: at, ExpiresAt: at.Add(t.cancelTTL)})
}

// RecordScheduledJob records a job delayed through the scheduler as scheduled (see
// RecordScheduled), keeping the record until CancelTTL after runAt. It implements part of
// producer.StatusRecorder.
func (t *Table) RecordScheduledJob(ctx context.Context, kind, key, jobID, payloadHash string, runAt, at time.Time) error {
	return t.RecordScheduled(ctx, ScheduledJob{Kind: kind, Key: key, JobID: jobID, PayloadHash: payloadHash, At: at,
		RunAt: runAt, ExpiresAt: runAt.Add(t.cancelTTL)})
}

// ScheduledJob is the record of a job waiting in the scheduler.
type ScheduledJob struct {
	// Kind, Key and JobID identify the job, as in its envelope. Required.
	Kind, Key, JobID string
	// PayloadHash is jobs.PayloadHash of the job's kind and args. Empty: not recorded.
	PayloadHash string
	// At is the time of the write. Defaults to Config.Now().
	At time.Time
	// RunAt is when the job is due; shown by Get and List. Zero: not recorded.
	RunAt time.Time
	// ExpiresAt is when the record stops counting; set it past RunAt plus the queue's message
	// retention. Zero: never.
	ExpiresAt time.Time
}

// RecordQueued writes a queued record for a job the producer enqueued, unless the key already has
// a record that has not expired: then that record is the same job, further along (claimed,
// running, succeeded…), and RecordQueued leaves it alone and returns nil. One conditional
// PutItem.
func (t *Table) RecordQueued(ctx context.Context, j QueuedJob) error {
	at, err := t.checkJob("QueuedJob", j.Kind, j.Key, j.JobID, j.At, j.ExpiresAt)
	if err != nil {
		return err
	}
	item := t.jobItem(j.Kind, j.Key, j.JobID, j.PayloadHash, idempotency.StateQueued, at, j.ExpiresAt)
	return t.putIfAbsent(ctx, item, j.Kind, j.Key)
}

// RecordScheduled writes a scheduled record for a job waiting in the scheduler (indexed, so List
// shows it), unless the key already has a record that has not expired: then RecordScheduled
// leaves it alone and returns nil. One conditional PutItem.
func (t *Table) RecordScheduled(ctx context.Context, j ScheduledJob) error {
	at, err := t.checkJob("ScheduledJob", j.Kind, j.Key, j.JobID, j.At, j.ExpiresAt)
	if err != nil {
		return err
	}
	item := t.jobItem(j.Kind, j.Key, j.JobID, j.PayloadHash, idempotency.StateScheduled, at, j.ExpiresAt)
	if !j.RunAt.IsZero() {
		item[attrRunAt] = attrN(unixMs(j.RunAt))
	}
	return t.putIfAbsent(ctx, item, j.Kind, j.Key)
}

// checkJob validates the fields RecordQueued and RecordScheduled share and returns the write
// time (at defaulted).
func (t *Table) checkJob(typ, kind, key, jobID string, at, expiresAt time.Time) (time.Time, error) {
	if err := jobs.ValidateKind(kind); err != nil {
		return time.Time{}, fmt.Errorf("%w: %s.Kind: %v", ErrInvalid, typ, err)
	}
	switch {
	case key == "":
		return time.Time{}, fmt.Errorf("%w: %s.Key is empty", ErrInvalid, typ)
	case jobID == "":
		return time.Time{}, fmt.Errorf("%w: %s.JobID is empty", ErrInvalid, typ)
	}
	if at.IsZero() {
		at = t.now()
	}
	if !expiresAt.IsZero() && !expiresAt.After(at) {
		return time.Time{}, fmt.Errorf("%w: %s.ExpiresAt %s is not after At %s", ErrInvalid, typ,
			expiresAt.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	return at, nil
}

// jobItem returns the item of a record written here (no runs yet) for the job (kind, key, jobID),
// in the table's layout: under its id when the key is its id (idempotency.LayoutByID), otherwise
// under kind and key with the job id (the by_id index); with the payload hash when given, and the
// by_status keys when state is indexed. Every writer of such a record must build it this way, so
// that the worker's claim finds it.
func (t *Table) jobItem(kind, key, jobID, payloadHash string, state idempotency.State, at, expiresAt time.Time) map[string]types.AttributeValue {
	return t.layout.Item(idempotency.Record{Kind: kind, Key: key, JobID: jobID, State: state, PayloadHash: payloadHash,
		UpdatedAt: at, ExpiresAt: expiresAt}, t.shards)
}

// absentOrExpired is the condition of a write that must not replace a live record.
const absentOrExpired = "attribute_not_exists(#pk) OR #exp <= :now"

func (t *Table) putIfAbsent(ctx context.Context, item map[string]types.AttributeValue, kind, key string) error {
	_, err := t.putItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(t.table),
		Item:                      item,
		ConditionExpression:       aws.String(absentOrExpired),
		ExpressionAttributeNames:  map[string]string{"#pk": idempotency.AttrPK, "#exp": idempotency.AttrExpires},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": attrN(t.now().Unix())},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // the key has a live record: the same job, further along
	}
	if err != nil {
		st, _ := getS(item, idempotency.AttrState)
		return fmt.Errorf("status: record %s %s/%s: %w", st, kind, key, err)
	}
	return nil
}

// maxCancelRounds bounds Cancel's read-then-write rounds when the record keeps changing.
const maxCancelRounds = 4

// Cancel marks a job key cancelled: later deliveries of the job are acknowledged without running.
// A job running now under a live claim is asked to stop instead (a cancellation request on its
// record, see CancelResult.Requested): its worker cancels the job's context within about
// MiddlewareConfig.CancelCheck and records it as cancelled when it returns, or, when it finishes
// anyway, as what happened. A running record whose lease has ended (its worker is gone) is
// cancelled at once.
//
// The key may be the job's id (a job enqueued without a key, whose record the default layout
// keeps under its id): Cancel reads both places a record of the key may be (two reads at once) and
// acts on the more recently updated one. When there is no record (or only expired ones), Cancel
// writes a new cancelled record, so that a delivery still on its way is acknowledged: under the
// key and, with idempotency.LayoutByID, also under the id the key would be (two conditional
// writes), since it cannot tell a key from an id. A record already cancelled, or a running one
// already asked to cancel, is left as it is. A succeeded record is refused with an error wrapping
// ErrSucceeded. The record's expiry becomes at least at + Config.CancelTTL. at defaults to
// Config.Now(); reason is shown by Get and List and may be empty. For an operator's cancel of a
// job that must exist, use CancelJob, which says what it did and refuses unknown and finished
// jobs.
//
// Cancel reads the record (strongly consistent) and writes it with a condition that it has not
// changed since, retrying a few times if it has.
func (t *Table) Cancel(ctx context.Context, kind, key string, at time.Time, reason string) error {
	if err := validKindKey(kind, key); err != nil {
		return err
	}
	_, err := t.cancel(ctx, kind, key, at, reason, false)
	return err
}

// putCancelled writes a new cancelled record where there is none, or only an expired one: under
// the key, and with idempotency.LayoutByID under the id the key would be too.
func (t *Table) putCancelled(ctx context.Context, kind, key string, at time.Time, reason string, exp int64) error {
	jobIDs := []string{""}
	if t.layout == idempotency.LayoutByID {
		jobIDs = append(jobIDs, key)
	}
	for _, jobID := range jobIDs {
		if _, err := t.putItem(ctx, t.cancelledPut(kind, key, jobID, at, reason, exp)); err != nil {
			return err
		}
	}
	return nil
}

// cancelledPut is the conditional PutItem of a new cancelled record of the job (kind, key, jobID)
// where the key has none, or only an expired one.
func (t *Table) cancelledPut(kind, key, jobID string, at time.Time, reason string, exp int64) *dynamodb.PutItemInput {
	item := t.jobItem(kind, key, jobID, "", idempotency.StateCancelled, at, time.Time{})
	item[idempotency.AttrExpires] = attrN(exp)
	if reason != "" {
		item[idempotency.AttrReason] = attrS(reason)
	}
	return &dynamodb.PutItemInput{
		TableName:                 aws.String(t.table),
		Item:                      item,
		ConditionExpression:       aws.String(absentOrExpired),
		ExpressionAttributeNames:  map[string]string{"#pk": idempotency.AttrPK, "#exp": idempotency.AttrExpires},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": attrN(t.now().Unix())},
	}
}

// updateCancelled turns the record read as old (live, neither succeeded nor cancelled) into a
// cancelled one, provided it has not changed since: same state, same update time, same claim
// token.
func (t *Table) updateCancelled(ctx context.Context, old map[string]types.AttributeValue, pk string, at time.Time, reason string, exp int64) (map[string]types.AttributeValue, error) {
	in := t.cancelledUpdate(old, pk, at, reason, exp)
	in.ReturnValues = types.ReturnValueAllNew
	out, err := t.updateItem(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// cancelledUpdate is updateCancelled's UpdateItem.
func (t *Table) cancelledUpdate(old map[string]types.AttributeValue, pk string, at time.Time, reason string, exp int64) *dynamodb.UpdateItemInput {
	names := map[string]string{
		"#pk": idempotency.AttrPK, "#st": idempotency.AttrState, "#upd": idempotency.AttrUpdated,
		"#tok": idempotency.AttrToken, "#lease": idempotency.AttrLease, "#r": idempotency.AttrReason,
		"#g1": idempotency.AttrGSI1PK, "#g2": idempotency.AttrGSI1SK,
	}
	values := map[string]types.AttributeValue{
		":c":   attrS(string(idempotency.StateCancelled)),
		":at":  attrN(unixMs(at)),
		":g1":  attrS(idempotency.StatusPartition(idempotency.StateCancelled, pk, t.shards)),
		":old": old[idempotency.AttrState],
	}
	set := "#st = :c, #upd = :at, #g1 = :g1, #g2 = :at"
	remove := "#tok, #lease"
	if reason != "" {
		values[":r"] = attrS(reason)
		set += ", #r = :r"
	} else {
		remove += ", #r" // a dead record's reason would read as the cancellation's
	}
	// Keep the longer expiry: a record without one never expires.
	if oldExp, ok, _ := getN(old, idempotency.AttrExpires); ok && oldExp < exp {
		names["#exp"] = idempotency.AttrExpires
		values[":exp"] = attrN(exp)
		set += ", #exp = :exp"
	}
	cond := "attribute_exists(#pk) AND #st = :old"
	cond += unchangedSince(old, values)
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: attrS(pk)},
		UpdateExpression:          aws.String("SET " + set + " REMOVE " + remove),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
}

// CancelAction returns the write Cancel makes for one job's record as an action of a DynamoDB
// transaction, with x added to it, for a caller that must commit other writes with the
// cancellation (pkg/batch counts a cancelled child in its batch). current is the job's record as
// the caller read it with a strongly consistent read (the raw item under
// Layout.ItemKey(kind, key, jobID)), or nil when there is none or only an expired one. Nothing is
// written.
//
// Where there is a record, the action is Cancel's update, conditioned on the record being
// unchanged since it was read. Where there is none, it is the Put of a new cancelled record under
// the job's key only (Cancel, which cannot tell a key from an id, writes two; a caller that knows
// the job id needs one); x's assignments must then be of the form "#x_name = :x_value", and become
// attributes of the new record. A succeeded record returns an error wrapping ErrSucceeded, a
// cancelled one an error wrapping ErrCancelled: there is nothing to write.
func (t *Table) CancelAction(kind, key, jobID string, current map[string]types.AttributeValue, at time.Time, reason string, x idempotency.Extra) (types.TransactWriteItem, error) {
	if err := validKindKey(kind, key); err != nil {
		return types.TransactWriteItem{}, err
	}
	if jobID == "" {
		return types.TransactWriteItem{}, fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	if at.IsZero() {
		at = t.now()
	}
	exp := expSeconds(at.Add(t.cancelTTL))
	pk := t.layout.ItemKey(kind, key, jobID)
	if current == nil {
		in := t.cancelledPut(kind, key, jobID, at, reason, exp)
		for _, a := range x.Set {
			n, v, ok := strings.Cut(a, "=")
			n, v = strings.TrimSpace(n), strings.TrimSpace(v)
			name, nok := x.Names[n]
			value, vok := x.Values[v]
			if !ok || !nok || !vok {
				return types.TransactWriteItem{}, fmt.Errorf("%w: CancelAction of a new record: assignment %q is not \"#x_name = :x_value\"", ErrInvalid, a)
			}
			in.Item[name] = value
		}
		cond, err := extend(*in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, x)
		if err != nil {
			return types.TransactWriteItem{}, err
		}
		return types.TransactWriteItem{Put: &types.Put{TableName: in.TableName, Item: in.Item, ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}, nil
	}
	cur, err := jobFromItem(current, t.now())
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	switch cur.State {
	case idempotency.StateSucceeded:
		return types.TransactWriteItem{}, fmt.Errorf("%w: %s/%s, so it cannot be cancelled", ErrSucceeded, kind, key)
	case idempotency.StateCancelled:
		return types.TransactWriteItem{}, fmt.Errorf("%w: %s/%s", ErrCancelled, kind, key)
	}
	in := t.cancelledUpdate(current, pk, at, reason, exp)
	cond, err := extend(*in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, x)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	upd := *in.UpdateExpression
	if len(x.Set) > 0 {
		set, remove, _ := strings.Cut(upd, " REMOVE ")
		upd = set + ", " + strings.Join(x.Set, ", ") + " REMOVE " + remove
	}
	return types.TransactWriteItem{Update: &types.Update{TableName: in.TableName, Key: in.Key, UpdateExpression: aws.String(upd),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}, nil
}

// extend adds x's placeholders to names and values and returns cond ANDed with x's condition.
// x's placeholders must start with "#x_" and ":x_" (none of this package's do).
func extend(cond string, names map[string]string, values map[string]types.AttributeValue, x idempotency.Extra) (string, error) {
	for n, v := range x.Names {
		if !strings.HasPrefix(n, "#x_") {
			return "", fmt.Errorf("%w: %w: name placeholder %q", ErrInvalid, idempotency.ErrExtra, n)
		}
		names[n] = v
	}
	for n, v := range x.Values {
		if !strings.HasPrefix(n, ":x_") {
			return "", fmt.Errorf("%w: %w: value placeholder %q", ErrInvalid, idempotency.ErrExtra, n)
		}
		values[n] = v
	}
	if x.Condition != "" {
		cond = "(" + cond + ") AND (" + x.Condition + ")"
	}
	return cond, nil
}
