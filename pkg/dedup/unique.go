package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/queues"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Unique makes a job unique by its kind and key for a window: while the key is held, an
// enqueue of the same kind and key sends nothing and returns the holding job's id (Outcome
// Duplicate). The key is held from the enqueue that wins it for Window at most, and:
//
//   - with States empty, for the whole Window, whatever becomes of the job: at most one job of
//     the key per Window ("at most one export per user per hour");
//   - with States set, only while the job's record is in one of them: WhileActive ("not while
//     another is waiting or running") frees the key once the job has succeeded, been
//     dead-lettered or cancelled; Window then bounds how long a job can hold it.
type Unique struct {
	// Key is the unique key, scoped by kind: at most MaxKeyLength bytes of UTF-8. Empty: derived
	// from the args, all of them or the Fields listed ("args:" + a hash of their canonical
	// JSON), so that the same kind with the same args is one job.
	Key string
	// Fields, with Key empty, are the top-level args fields the derived key covers (["user_id"]:
	// one job per user). Defaults to all of the args.
	Fields []string
	// Window is the longest the key is held: from 1 s up to Config.RecordTTL (24 hours by
	// default) with States empty, up to MaxActiveWindow with States set. Required.
	Window time.Duration
	// States are the states of the holding job's record that keep the key held. Defaults to
	// none: every state, for the whole Window.
	States []idempotency.State
}

// WhileActive holds a unique key while its job waits or runs: queued, scheduled, running or
// retrying. Once the job has succeeded, been dead-lettered or cancelled, the next enqueue of the
// key is a new job.
var WhileActive = []idempotency.State{idempotency.StateQueued, idempotency.StateScheduled, idempotency.StateRunning, idempotency.StateRetrying}

// MaxActiveWindow bounds Unique.Window with States set: the time the worker keeps a running,
// retrying or dead job's record (idempotency's RecordTTL default, 14 days).
const MaxActiveWindow = 14 * 24 * time.Hour

// maxRounds bounds the write-judge rounds of a unique key whose item keeps changing.
const maxRounds = 4

// releaseTimeout bounds the write that releases a reservation after a failed send (it runs even
// when the caller's context is done).
const releaseTimeout = 10 * time.Second

func knownState(s idempotency.State) bool {
	switch s {
	case idempotency.StateQueued, idempotency.StateScheduled, idempotency.StateRunning, idempotency.StateSucceeded,
		idempotency.StateRetrying, idempotency.StateDead, idempotency.StateCancelled:
		return true
	}
	return false
}

// check validates the rule against the prepared job.
func (e *Enqueuer) checkUnique(u Unique, m producer.Message) error {
	switch {
	case u.Window <= 0:
		return invalid("Unique.Window %v: a unique key needs a window, the longest it is held (an hour, say)", u.Window)
	case u.Window < time.Second:
		return invalid("Unique.Window %v is below 1 s, the expiry's precision", u.Window)
	case len(u.States) == 0 && u.Window > e.recordTTL:
		return invalid("Unique.Window %v is longer than Config.RecordTTL %v, the shortest time the job table keeps a finished job's record: "+
			"past it the key's job could no longer be told from one never sent. Shorten the window, or raise the worker's SucceededTTL and Config.RecordTTL together", u.Window, e.recordTTL)
	case len(u.States) > 0 && u.Window > MaxActiveWindow:
		return invalid("Unique.Window %v is longer than %v, the time the worker keeps a waiting or running job's record", u.Window, MaxActiveWindow)
	case u.Key != "" && len(u.Fields) > 0:
		return invalid("Unique.Key and Unique.Fields are both set: give the key, or the args fields to derive it from")
	}
	seen := map[idempotency.State]bool{}
	for _, s := range u.States {
		if !knownState(s) {
			return invalid("Unique.States: %q is not a job state (want queued, scheduled, running, succeeded, retrying, dead or cancelled)", s)
		}
		if seen[s] {
			return invalid("Unique.States lists %q twice", s)
		}
		seen[s] = true
	}
	if err := checkKey("Unique", u.Key); err != nil {
		return err
	}
	if err := checkFields("Unique", u.Fields); err != nil {
		return err
	}
	return e.checkFIFO("Unique", m)
}

// fifo reports whether the job m goes to a FIFO queue: the queue the producer prepared it for (a
// producer of several queues may have FIFO and standard ones), else the producer's own.
func (e *Enqueuer) fifo(m producer.Message) bool {
	if m.QueueURL != "" {
		return queues.Queue{URL: m.QueueURL}.FIFO()
	}
	return e.prod.FIFO()
}

// checkFIFO refuses, on a FIFO queue, a job whose SQS deduplication id is not its own: SQS drops
// a message whose deduplication id it saw in the last 5 minutes and still answers the send as
// a success, so a unique key's next job (or a debounced key's next one) sent with the id of an
// earlier one would never arrive, while the key names it.
func (e *Enqueuer) checkFIFO(rule string, m producer.Message) error {
	if !e.fifo(m) {
		return nil
	}
	if m.Key != m.ID {
		return invalid("%s on FIFO queue: the job has a key of its own (producer.WithKey %q), and SQS deduplicates FIFO messages by kind and key for 5 minutes: "+
			"the next job of the %s key would be dropped by SQS while the key names it. Leave WithKey out (the rule deduplicates)", rule, m.Key, rule)
	}
	if m.DeduplicationID != producer.DeduplicationID(m.Kind, m.ID) {
		return invalid("%s on FIFO queue: the job has a deduplication id of its own (producer.WithDeduplicationID %q): SQS would drop the next job of the %s key "+
			"sent with it within 5 minutes while the key names it. Leave WithDeduplicationID out (the rule deduplicates)", rule, m.DeduplicationID, rule)
	}
	return nil
}

// lease is how long a reservation under u lasts: Config.ReserveLease, or the window when it is
// shorter, but at least minReserveLease, so that the send has a second (a reservation past its
// window's end is expired anyway).
func (e *Enqueuer) lease(u Unique) time.Duration {
	return max(min(e.reserveLease, u.Window), minReserveLease)
}

// uniqueItem is the reservation of the unique key pk by the job m at now.
func (e *Enqueuer) uniqueItem(pk string, m producer.Message, now time.Time, u Unique) map[string]types.AttributeValue {
	lease := e.lease(u)
	item := map[string]types.AttributeValue{
		attrPK:     avS(pk),
		attrUJob:   avS(m.ID),
		attrUAt:    avN(now.UnixMilli()),
		attrULease: avN(now.Add(lease).UnixMilli()),
		attrExp:    avN(expSeconds(now.Add(u.Window))),
	}
	if m.Key != m.ID {
		item[attrUKey] = avS(m.Key)
	}
	return item
}

// absentOrExpired is the condition of a write that takes a unique key nobody holds.
const absentOrExpired = "attribute_not_exists(#pk) OR #exp <= :now"

func (e *Enqueuer) unique(ctx context.Context, args jobs.Args, u Unique, opts []producer.Option) (Result, error) {
	res := Result{}
	m, env, err := e.prepare(ctx, args, opts)
	res.ID, res.Kind, res.Key = m.ID, m.Kind, m.Key
	if err == nil {
		err = e.checkUnique(u, m)
	}
	if err != nil {
		res.Err = err
		return res, err
	}
	key := u.Key
	if key == "" {
		if key, err = argsKey(m.Kind, env.Args, u.Fields); err != nil {
			res.Err = err
			return res, err
		}
	}
	res.RuleKey = key
	pk := itemPK(UniqueKeyPrefix, m.Kind, key)
	at, dup, err := e.reserve(ctx, pk, m, u)
	if err != nil {
		res.Err = fmt.Errorf("dedup: unique %s key %q: %w", m.Kind, key, err)
		return res, res.Err
	}
	if dup != nil {
		res.Outcome, res.ID, res.Key, res.State = Duplicate, dup.jobID, dup.jobKey, dup.state
		return res, nil
	}
	return e.sendReserved(ctx, res, pk, at, m, env, u)
}

// holder is the job that holds a unique key.
type holder struct {
	jobID, jobKey string
	state         idempotency.State // "" when its record was not read
}

func holderOf(item map[string]types.AttributeValue) holder {
	h := holder{jobID: getS(item, attrUJob), jobKey: getS(item, attrUKey)}
	if h.jobKey == "" {
		h.jobKey = h.jobID
	}
	return h
}

// reserve takes the unique key pk for the job m with one conditional write: returned with the
// reservation's time, or the job that holds the key (a duplicate). A refused write returns
// the item that refused it (ALL_OLD; a strongly consistent read on backends that do not return
// it), which is judged: a holder whose job is over (or was never sent) is taken over with a
// write conditioned on the item being unchanged.
func (e *Enqueuer) reserve(ctx context.Context, pk string, m producer.Message, u Unique) (time.Time, *holder, error) {
	now := e.now()
	cond := absentOrExpired
	values := map[string]types.AttributeValue{":now": avN(now.Unix())}
	names := map[string]string{"#pk": attrPK, "#exp": attrExp}
	for range maxRounds {
		item := e.uniqueItem(pk, m, now, u)
		old, refused, err := e.putItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(e.table),
			Item:                                item,
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err != nil {
			return now, nil, err
		}
		if !refused {
			return now, nil, nil
		}
		if len(old) == 0 { // the backend did not return the item (the embedded emulator)
			if old, err = e.getItem(ctx, pk); err != nil {
				return now, nil, fmt.Errorf("read the key's item: %w", err)
			}
		}
		now = e.now()
		if old == nil || getN(old, attrExp) <= now.Unix() {
			// Gone or expired since the write: take it as free.
			cond, names, values = absentOrExpired, map[string]string{"#pk": attrPK, "#exp": attrExp}, map[string]types.AttributeValue{":now": avN(now.Unix())}
			continue
		}
		h := holderOf(old)
		held, err := e.judge(ctx, m.Kind, old, &h, u, now)
		if err != nil {
			return now, nil, err
		}
		if held {
			return now, &h, nil
		}
		// Over: take the key over, provided nobody did meanwhile.
		cond = absentOrExpired + " OR (#j = :oldJob AND #at = :oldAt)"
		names = map[string]string{"#pk": attrPK, "#exp": attrExp, "#j": attrUJob, "#at": attrUAt}
		values = map[string]types.AttributeValue{":now": avN(now.Unix()), ":oldJob": old[attrUJob], ":oldAt": old[attrUAt]}
		if values[":oldJob"] == nil || values[":oldAt"] == nil {
			return now, nil, fmt.Errorf("the key's item %q lacks %s or %s: not written by this package", pk, attrUJob, attrUAt)
		}
	}
	return now, nil, fmt.Errorf("the key's item kept changing (%d attempts)", maxRounds)
}

// judge reports whether the job h still holds its key (the item old) at now, by its record: a
// rule for any state holds it for the whole window, provided the job was sent (it has a record,
// or its reservation's lease is not over); a rule with States while the record is in one of
// them. h.state is set when the record was read.
func (e *Enqueuer) judge(ctx context.Context, kind string, old map[string]types.AttributeValue, h *holder, u Unique, now time.Time) (bool, error) {
	inLease := now.UnixMilli() < getN(old, attrULease)
	if len(u.States) == 0 && inLease {
		return true, nil // being sent: no need to read its record
	}
	rec, err := e.jobs.GetJob(ctx, kind, h.jobKey, h.jobID)
	if errors.Is(err, status.ErrNotFound) {
		// No record: still being sent (in the lease), or never sent (the process stopped after
		// the reservation; past the lease).
		return inLease, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the record of job %s, which holds the key: %w", h.jobID, err)
	}
	h.state = rec.State
	if len(u.States) == 0 {
		return !rec.Lapsed(), nil // a job that expired while waiting never ran
	}
	if rec.Expired {
		return false, nil
	}
	for _, s := range u.States {
		if rec.State == s {
			return true, nil
		}
	}
	return false, nil
}

// sendReserved sends the job that reserved the key pk at `at`, under a deadline inside the
// reservation's lease, and makes sure it has a record; a failed send releases the key.
func (e *Enqueuer) sendReserved(ctx context.Context, res Result, pk string, at time.Time, m producer.Message, env jobs.Envelope, u Unique) (Result, error) {
	lease := e.lease(u)
	// A timeout, not a deadline from at: the lease is in Config.Now's time, the context in the
	// machine's (they differ under an injected clock); the reservation was written just now.
	sendCtx, cancel := context.WithTimeout(ctx, lease-time.Second)
	results, err := e.prod.Send(sendCtx, []producer.Message{m})
	cancel()
	if len(results) == 1 {
		res.Result = results[0]
		if err == nil {
			err = results[0].Err
		}
	} else if err == nil {
		err = fmt.Errorf("the producer returned %d results for one message", len(results))
	}
	if err != nil {
		res.ReleaseErr = e.release(ctx, pk, m.ID, at)
		res.Err = fmt.Errorf("dedup: unique %s key %q: %w", m.Kind, res.RuleKey, err)
		if res.ReleaseErr != nil {
			res.Err = fmt.Errorf("%w (the key stays reserved until %s, the end of its lease: %v)", res.Err, at.Add(lease).UTC().Format(time.RFC3339), res.ReleaseErr)
		}
		return res, res.Err
	}
	res.Outcome = Enqueued
	if !e.prod.RecordsStatus() || res.StatusErr != nil {
		// The key's job is judged by its record: write it when the producer did not.
		hash, herr := jobs.PayloadHash(m.Kind, env.Args)
		if herr == nil {
			if res.Schedule != "" {
				herr = e.jobs.RecordScheduledJob(ctx, m.Kind, m.Key, m.ID, hash, res.RunAt, e.now())
			} else {
				herr = e.jobs.RecordEnqueued(ctx, m.Kind, m.Key, m.ID, hash, e.now())
			}
		}
		res.StatusErr = nil
		if herr != nil {
			res.StatusErr = fmt.Errorf("dedup: record job %s: %w (after the reservation's lease the key may be taken by another job while this one waits)", m.ID, herr)
		}
	}
	return res, nil
}

// release frees a unique key whose job could not be sent: it expires the item (exp = now) when
// it is still that reservation's. One conditional UpdateItem, run even when ctx is done.
func (e *Enqueuer) release(ctx context.Context, pk, jobID string, at time.Time) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, _, _, err := e.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(e.table),
		Key:                       e.key(pk),
		UpdateExpression:          aws.String("SET #exp = :now"),
		ConditionExpression:       aws.String("#j = :job AND #at = :at"),
		ExpressionAttributeNames:  map[string]string{"#exp": attrExp, "#j": attrUJob, "#at": attrUAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": avN(e.now().Unix()), ":job": avS(jobID), ":at": avN(at.UnixMilli())},
	})
	return err
}
