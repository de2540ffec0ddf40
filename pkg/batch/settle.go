package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Settling a child: its record's final write and its group's (batch's or chain's) update, in one
// transaction, conditioned on what the record was counted as before (attrCounted). The first
// attempt assumes the common case (not counted yet; for a batch, not its last child) without
// reading anything; a refusal is explained by reading the child's record and the group, and the
// next attempt is exact.

// What a child was counted as (attrCounted).
const (
	countedSucceeded = "succeeded"
	countedDead      = "dead"
	countedCancelled = "cancelled"
)

// outcomeOf returns what a record in state s counts as in its batch or chain ("" for a state that
// is not final: the child will run again).
func outcomeOf(s idempotency.State) string {
	switch s {
	case idempotency.StateSucceeded:
		return countedSucceeded
	case idempotency.StateDead:
		return countedDead
	case idempotency.StateCancelled:
		return countedCancelled
	}
	return ""
}

// Results of a settlement other than done.
var (
	// errNoChange: the child is counted as this outcome already, or its group takes no change
	// (a chain that stopped, a step that is not the current one): write the record alone.
	errNoChange = errors.New("batch: no change to the group")
	// errNoGroup: the batch or chain does not exist (never, or expired).
	errNoGroup = errors.New("batch: the batch or chain does not exist")
	// errNotCounted: the batch has no unfinished child to count this one against (it was never
	// added: a message that carries the batch's meta without Add).
	errNotCounted = errors.New("batch: the child was not counted in its batch")
	// errAlreadyDone: the child's write is found done (an earlier attempt whose answer was lost).
	errAlreadyDone = errors.New("batch: already settled")
	// errSkip: the child's record no longer takes this write (it moved on): nothing to do.
	errSkip = errors.New("batch: the record moved on")
	// errExpired: the child's record has expired: the store's own write replaces it.
	errExpired = errors.New("batch: the record has expired")
)

// childWriter is the write of one child's record that a settlement commits with its group's.
type childWriter interface {
	// jobID returns the child's job id.
	jobID() string
	// action returns the write with x (the counted condition and assignment) added.
	action(x idempotency.Extra) (types.TransactWriteItem, error)
	// refused reads the record after a refused transaction: what it is counted as, when the
	// write can still be made; otherwise an error that ends the settlement (ErrLeaseLost,
	// errAlreadyDone, errSkip, errExpired).
	refused(ctx context.Context) (counted string, err error)
}

// countedExtra is the condition and assignment that count a child as o, once: its record must be
// counted as prev ("" for never).
func countedExtra(prev, o string) idempotency.Extra {
	x := idempotency.Extra{
		Set:    []string{"#x_cnt = :x_cnt"},
		Names:  map[string]string{"#x_cnt": attrCounted},
		Values: map[string]types.AttributeValue{":x_cnt": avS(o)},
	}
	if prev == "" {
		x.Condition = "attribute_not_exists(#x_cnt)"
	} else {
		x.Condition = "#x_cnt = :x_prv"
		x.Values[":x_prv"] = avS(prev)
	}
	return x
}

// snapshot is a batch item, or a counter shard's, as read.
type snapshot struct {
	found                                        bool // the item exists
	state                                        string
	total, remaining, succeeded, dead, cancelled int64
	callback                                     string
	cancelledAt                                  time.Time
	shards                                       int   // counter shards (1: the counters are the batch's)
	full                                         int64 // a sharded batch's shards with unfinished children
}

func snapshotOf(item map[string]types.AttributeValue) snapshot {
	return snapshot{
		found: item != nil, state: getS(item, idempotency.AttrState), total: getN(item, attrTotal), remaining: getN(item, attrRemaining),
		succeeded: getN(item, attrSucceeded), dead: getN(item, attrDead), cancelled: getN(item, attrCancelled),
		callback: getS(item, attrCallback), cancelledAt: getMs(item, attrCancelAt),
		shards: shardsOf(item), full: getN(item, attrFull),
	}
}

// delta is what counting one child changes in its batch.
type delta struct {
	remaining, succeeded, dead, cancelled int64
	xAdd, xDel                            string // a not-succeeded id to add to, or remove from, the set
}

// counterAttr returns the counter attribute of an outcome.
func counterAttr(o string) string {
	switch o {
	case countedSucceeded:
		return attrSucceeded
	case countedDead:
		return attrDead
	}
	return attrCancelled
}

// deltaFor returns the change of counting child id as o where it was counted as prev, or false
// when there is none.
func deltaFor(prev, o, id string) (delta, bool) {
	var d delta
	add := func(outcome string, n int64) {
		switch outcome {
		case countedSucceeded:
			d.succeeded += n
		case countedDead:
			d.dead += n
		case countedCancelled:
			d.cancelled += n
		}
	}
	switch {
	case prev == o, prev == countedSucceeded, prev == countedCancelled:
		// Counted already, or in a state no run leaves (a succeeded or cancelled record is not
		// claimed again while it is kept).
		return d, false
	case prev == "":
		d.remaining = -1
		add(o, 1)
		if o != countedSucceeded {
			d.xAdd = id
		}
	default: // a dead child redriven: its count moves, the batch's remaining stays
		add(prev, -1)
		add(o, 1)
		if o == countedSucceeded {
			d.xDel = id
		}
	}
	return d, true
}

// settle counts a child's outcome o in its group with the child's write w, in one transaction.
// result and reason are the child's (a chain passes the result on and keeps the reason).
func (c *Client) settle(ctx context.Context, g group, o, result, reason string, w childWriter) error {
	switch {
	case g.batch != "" && g.sharded:
		return c.settleShard(ctx, g.batch, g.shard, o, w)
	case g.batch != "":
		return c.settleBatch(ctx, g.batch, o, w)
	}
	return c.settleChain(ctx, g, o, result, reason, w)
}

// settleChild counts a child of batch id, which has n counter shards, as o: on the shard its
// job id hashes to (as Add tagged it), or on the batch's item.
func (c *Client) settleChild(ctx context.Context, id string, n int, o string, w childWriter) error {
	if n > 1 {
		return c.settleShard(ctx, id, shardOf(w.jobID(), n), o, w)
	}
	return c.settleBatch(ctx, id, o, w)
}

// settleBatch counts a child of batch id as o.
func (c *Client) settleBatch(ctx context.Context, id, o string, w childWriter) error {
	prev := ""
	var snap *snapshot // nil until a refusal made us read the batch
	xFull := false
	for range 8 {
		d, change := deltaFor(prev, o, w.jobID())
		if !change {
			return errNoChange
		}
		now := c.cfg.Now()
		completing := snap != nil && d.remaining == -1 && snap.remaining == 1 && snap.state == StateSealed
		var items []types.TransactWriteItem
		if completing {
			var err error
			if items, err = c.completion(ctx, id, *snap, d, now, false); err != nil {
				return err
			}
		} else {
			items = c.counterUpdate(id, prev, o, d, xFull, now)
		}
		child, err := w.action(countedExtra(prev, o))
		if err != nil {
			return err
		}
		err = c.transact(ctx, append([]types.TransactWriteItem{child}, items...))
		if err == nil {
			if completing && snap.callback != "" {
				c.outboxed()
			}
			return nil
		}
		var te *txError
		if !errors.As(err, &te) {
			return err
		}
		// Refused: by the child's record (a lost claim, or counted already), by the batch (its
		// last child, gone, not counting this one), or by a full not-succeeded set.
		if te.failed(0) {
			if prev, err = w.refused(ctx); err != nil {
				return err
			}
		}
		item, err := c.get(ctx, batchKey(id))
		if err != nil {
			return err
		}
		if item == nil {
			return errNoGroup
		}
		s := snapshotOf(item)
		snap = &s
		if s.shards > 1 || prev == "" && s.remaining == 0 {
			return errNotCounted // counted on shards (a message without its shard), or never counted
		}
		if d.xAdd != "" && !completing {
			x, err := c.get(ctx, notSucceededKey(id))
			if err != nil {
				return err
			}
			xFull = len(getSS(x, attrIDs)) >= MaxNotSucceeded
		}
	}
	return fmt.Errorf("batch: count a child of %s: the batch kept changing", id)
}

// counterUpdate returns the batch's update for a child that is not its last (and the
// not-succeeded set's), conditioned on the batch taking it: not its last unfinished child while
// sealed, and not finished.
func (c *Client) counterUpdate(id, prev, o string, d delta, xFull bool, now time.Time) []types.TransactWriteItem {
	names := map[string]string{"#pk": idempotency.AttrPK, "#o": counterAttr(o), "#last": attrLast}
	values := map[string]types.AttributeValue{":one": avN(1), ":now": avN(now.UnixMilli())}
	set := "#o = #o + :one, #last = :now"
	var cond string
	if prev == "" {
		names["#rem"], names["#st"] = attrRemaining, idempotency.AttrState
		values[":open"] = avS(StateOpen)
		set += ", #rem = #rem - :one"
		cond = "attribute_exists(#pk) AND (#rem > :one OR (#rem = :one AND #st = :open))"
	} else {
		names["#prv"] = counterAttr(prev)
		values[":zero"] = avN(0)
		set += ", #prv = #prv - :one"
		cond = "attribute_exists(#pk) AND #prv > :zero"
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
		UpdateExpression: aws.String("SET " + set), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}}}
	return append(items, c.notSucceededWrites(notSucceededKey(id), d, xFull, now)...)
}

// completion returns the writes that finish batch id, read as snap, with the change d (a last
// child's; none for a seal): the batch's counters set to their final values and its state done,
// conditioned on the batch being exactly as read, and its callback put into the outbox with the
// summary. seal also seals it (the batch was open).
func (c *Client) completion(ctx context.Context, id string, snap snapshot, d delta, now time.Time, seal bool) ([]types.TransactWriteItem, error) {
	final := snapshot{
		total: snap.total, remaining: snap.remaining + d.remaining, succeeded: snap.succeeded + d.succeeded,
		dead: snap.dead + d.dead, cancelled: snap.cancelled + d.cancelled,
	}
	from := StateSealed
	set := "#st = :done, #dat = :now, #last = :now, #rem = :rem1, #ok = :ok1, #dead = :dead1, #cxl = :cxl1"
	if seal {
		from = StateOpen
		set += ", #sat = :now"
	}
	names := map[string]string{"#st": idempotency.AttrState, "#dat": attrDone, "#last": attrLast, "#rem": attrRemaining,
		"#ok": attrSucceeded, "#dead": attrDead, "#cxl": attrCancelled}
	if seal {
		names["#sat"] = attrSealed
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
		UpdateExpression:         aws.String("SET " + set),
		ConditionExpression:      aws.String("#st = :from AND #rem = :rem0 AND #ok = :ok0 AND #dead = :dead0 AND #cxl = :cxl0"),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":done": avS(StateDone), ":now": avN(now.UnixMilli()), ":from": avS(from),
			":rem1": avN(final.remaining), ":ok1": avN(final.succeeded), ":dead1": avN(final.dead), ":cxl1": avN(final.cancelled),
			":rem0": avN(snap.remaining), ":ok0": avN(snap.succeeded), ":dead0": avN(snap.dead), ":cxl0": avN(snap.cancelled),
		},
	}}}
	if snap.callback == "" && d.xAdd == "" {
		return items, nil
	}
	var ids []string
	if final.dead+final.cancelled > 0 {
		x, err := c.get(ctx, notSucceededKey(id))
		if err != nil {
			return nil, err
		}
		ids = getSS(x, attrIDs)
	}
	if d.xAdd != "" && len(ids) < MaxNotSucceeded {
		ids = append(ids, d.xAdd)
		items = append(items, c.notSucceededAdd(notSucceededKey(id), d.xAdd, false, now))
	}
	if snap.callback == "" {
		return items, nil
	}
	sort.Strings(ids)
	sum := Summary{
		Batch: id, Total: int(final.total), Succeeded: int(final.succeeded), Dead: int(final.dead), Cancelled: int(final.cancelled),
		NotSucceeded: ids, More: int(final.dead+final.cancelled) - len(ids), BatchCancelled: !snap.cancelledAt.IsZero(),
		CompletedAt: now.UTC(),
	}
	cb, err := c.storedCallback(ctx, id, snap.callback, sum)
	if err != nil {
		return nil, err
	}
	return append(items, cb...), nil
}

// storedCallback returns the outbox writes of batch id's stored callback (job cbID) carrying the
// summary sum.
func (c *Client) storedCallback(ctx context.Context, id, cbID string, sum Summary) ([]types.TransactWriteItem, error) {
	cbItem, err := c.get(ctx, callbackKey(id))
	if err != nil {
		return nil, err
	}
	if cbItem == nil {
		return nil, fmt.Errorf("batch: %s: its callback %s is missing from the table", id, cbID)
	}
	m, err := loadMessage(cbItem)
	if err != nil {
		return nil, err
	}
	return c.callbackJob(m, sum)
}

// callbackJob returns the outbox writes of a batch's callback carrying its summary.
func (c *Client) callbackJob(m producer.Message, sum Summary) ([]types.TransactWriteItem, error) {
	b, err := json.Marshal(sum)
	if err != nil {
		return nil, err
	}
	m, err = setMeta(m, MetaSummary, string(b))
	if err != nil {
		return nil, err
	}
	j, err := c.cfg.Outbox.PrepareMessage(m)
	if err != nil {
		return nil, fmt.Errorf("batch: %s's callback %s: %w", sum.Batch, m.ID, err)
	}
	return j.Items, nil
}

// Chain states.
const (
	ChainRunning   = "running"   // a step is queued or running
	ChainSucceeded = "succeeded" // every step succeeded
	ChainFailed    = "failed"    // a step was dead-lettered: the chain stopped there
	ChainCancelled = "cancelled" // cancelled (CancelChain), or a step was cancelled
)

// settleChain counts step g.step's outcome o in its chain: a success enqueues the next step (with
// result) through the outbox, or finishes the chain; a dead or cancelled step stops it.
func (c *Client) settleChain(ctx context.Context, g group, o, result, reason string, w childWriter) error {
	prev := ""
	for range 6 {
		if prev == o || prev == countedSucceeded || prev == countedCancelled {
			return errNoChange
		}
		item, err := c.get(ctx, chainKey(g.chain))
		if err != nil {
			return err
		}
		if item == nil {
			return errNoGroup
		}
		st, cur, n := getS(item, idempotency.AttrState), int(getN(item, attrCurrent)), int(getN(item, attrCount))
		if cur != g.step {
			return errNoChange
		}
		now := c.cfg.Now()
		names := map[string]string{"#st": idempotency.AttrState, "#cur": attrCurrent, "#last": attrLast}
		values := map[string]types.AttributeValue{":k": avN(int64(g.step)), ":now": avN(now.UnixMilli()), ":running": avS(ChainRunning)}
		var set, cond string
		var next []types.TransactWriteItem
		switch {
		case o == countedSucceeded && (st == ChainRunning || st == ChainFailed) && g.step < n:
			stepItem, err := c.get(ctx, stepKey(g.chain, g.step+1))
			if err != nil {
				return err
			}
			if stepItem == nil {
				return fmt.Errorf("batch: chain %s: step %d is missing from the table", g.chain, g.step+1)
			}
			m, err := loadMessage(stepItem)
			if err != nil {
				return err
			}
			if result != "" {
				if m, err = setMeta(m, MetaChainResult, result); err != nil {
					return err
				}
			}
			j, err := c.cfg.Outbox.PrepareMessage(m)
			if err != nil {
				return fmt.Errorf("batch: chain %s step %d: %w", g.chain, g.step+1, err)
			}
			next = j.Items
			names["#job"], names["#f"], names["#r"] = attrJob, attrFailed, idempotency.AttrReason
			values[":next"], values[":job"], values[":failed"] = avN(int64(g.step+1)), avS(m.ID), avS(ChainFailed)
			set = "SET #cur = :next, #st = :running, #job = :job, #last = :now REMOVE #f, #r"
			cond = "#cur = :k AND (#st = :running OR #st = :failed)"
		case o == countedSucceeded && (st == ChainRunning || st == ChainFailed):
			names["#dat"], names["#f"], names["#r"] = attrDone, attrFailed, idempotency.AttrReason
			values[":ok"], values[":failed"] = avS(ChainSucceeded), avS(ChainFailed)
			set = "SET #st = :ok, #dat = :now, #last = :now REMOVE #f, #r"
			cond = "#cur = :k AND (#st = :running OR #st = :failed)"
		case o != countedSucceeded && st == ChainRunning:
			to := ChainFailed
			if o == countedCancelled {
				to = ChainCancelled
			}
			if reason == "" {
				reason = o
			}
			names["#dat"], names["#f"], names["#r"] = attrDone, attrFailed, idempotency.AttrReason
			values[":to"], values[":f"], values[":r"] = avS(to), avN(int64(g.step)), avS(reason)
			set = "SET #st = :to, #f = :f, #r = :r, #dat = :now, #last = :now"
			cond = "#cur = :k AND #st = :running"
		default:
			return errNoChange // stopped, cancelled or succeeded already
		}
		items := []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(c.cfg.Table), Key: avKey(chainKey(g.chain)),
			UpdateExpression: aws.String(set), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		}}}
		items = append(items, next...)
		child, err := w.action(countedExtra(prev, o))
		if err != nil {
			return err
		}
		err = c.transact(ctx, append([]types.TransactWriteItem{child}, items...))
		if err == nil {
			if len(next) > 0 {
				c.outboxed()
			}
			return nil
		}
		var te *txError
		if !errors.As(err, &te) {
			return err
		}
		if te.failed(0) {
			if prev, err = w.refused(ctx); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("batch: count step %d of chain %s: the chain kept changing", g.step, g.chain)
}
