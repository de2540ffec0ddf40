package dedup

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Throttle drops the enqueues of a key beyond Limit per Period, for producers that must not
// flood a queue: the dropped enqueue sends nothing and returns a *ThrottledError (ErrThrottled)
// that says when the period ends. Periods are fixed windows aligned to the Unix epoch (a
// Period of a minute counts from each whole minute), each counted by one item: one conditional
// write per enqueue, no read. A fixed window lets up to 2 × Limit through in one Period that
// straddles a boundary (Limit at the end of one window, Limit at the start of the next).
type Throttle struct {
	// Key is the throttled key, scoped by kind: at most MaxKeyLength bytes of UTF-8. Empty:
	// derived from the Fields listed, or, without Fields, the kind alone.
	Key string
	// Fields, with Key empty, are the top-level args fields the derived key covers
	// (["tenant"]: a limit per tenant).
	Fields []string
	// Limit is how many enqueues of the key a period takes, 1 to MaxThrottleLimit. Required.
	Limit int
	// Period is the window's length, 1 s to MaxThrottlePeriod, whole milliseconds. Required.
	Period time.Duration
}

// Bounds of a Throttle.
const (
	MaxThrottleLimit  = 1_000_000
	MaxThrottlePeriod = 31 * 24 * time.Hour
)

func (e *Enqueuer) checkThrottle(t Throttle) error {
	switch {
	case t.Limit < 1 || t.Limit > MaxThrottleLimit:
		return invalid("Throttle.Limit %d is not between 1 and %d", t.Limit, MaxThrottleLimit)
	case t.Period < time.Second || t.Period > MaxThrottlePeriod:
		return invalid("Throttle.Period %v is not between 1s and %v", t.Period, MaxThrottlePeriod)
	case t.Period%time.Millisecond != 0:
		return invalid("Throttle.Period %v is not whole milliseconds", t.Period)
	case t.Key != "" && len(t.Fields) > 0:
		return invalid("Throttle.Key and Throttle.Fields are both set: give the key, or the args fields to derive it from")
	}
	if err := checkKey("Throttle", t.Key); err != nil {
		return err
	}
	return checkFields("Throttle", t.Fields)
}

func (e *Enqueuer) throttle(ctx context.Context, args jobs.Args, t Throttle, opts []producer.Option) (Result, error) {
	res := Result{Limit: t.Limit}
	m, env, err := e.prepare(ctx, args, opts)
	res.ID, res.Kind, res.Key = m.ID, m.Kind, m.Key
	if err == nil {
		err = e.checkThrottle(t)
	}
	key := t.Key
	if err == nil && key == "" && len(t.Fields) > 0 {
		key, err = argsKey(m.Kind, env.Args, t.Fields)
	}
	if err != nil {
		res.Err = err
		return res, err
	}
	res.RuleKey = key
	now := e.now()
	period := t.Period.Milliseconds()
	start := now.UnixMilli() / period * period
	end := time.UnixMilli(start + period).UTC()
	pk := itemPK(ThrottleKeyPrefix, m.Kind, key+"@"+strconv.FormatInt(start, 10))
	out, _, refused, err := e.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(e.table),
		Key:                       e.key(pk),
		UpdateExpression:          aws.String("SET #exp = if_not_exists(#exp, :exp) ADD #n :one"),
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #n < :limit"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#exp": attrExp, "#n": attrTCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exp": avN(expSeconds(end)), ":one": avN(1), ":limit": avN(int64(t.Limit))},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		res.Err = fmt.Errorf("dedup: throttle %s key %q: count the enqueue: %w", m.Kind, key, err)
		return res, res.Err
	}
	res.RetryAt = end
	if refused {
		res.Outcome, res.Count, res.ID, res.Key = Throttled, t.Limit, "", ""
		res.Err = &ThrottledError{Kind: m.Kind, Key: key, Limit: t.Limit, Period: t.Period, RetryAt: end}
		return res, res.Err
	}
	res.Count = int(getN(out.Attributes, attrTCount))
	results, err := e.prod.Send(ctx, []producer.Message{m})
	if len(results) == 1 {
		res.Result = results[0]
		if err == nil {
			err = results[0].Err
		}
	}
	if err != nil {
		// Give the enqueue back, so that a failed send does not use up the period.
		if _, _, _, gerr := e.updateItem(context.WithoutCancel(ctx), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(e.table),
			Key:                       e.key(pk),
			UpdateExpression:          aws.String("ADD #n :minus"),
			ConditionExpression:       aws.String("#n > :zero"),
			ExpressionAttributeNames:  map[string]string{"#n": attrTCount},
			ExpressionAttributeValues: map[string]types.AttributeValue{":minus": avN(-1), ":zero": avN(0)},
		}); gerr != nil {
			res.ReleaseErr = gerr
		}
		res.Err = fmt.Errorf("dedup: throttle %s key %q: %w", m.Kind, key, err)
		return res, res.Err
	}
	res.Outcome = Enqueued
	return res, nil
}
