package batch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// Counter shards (Spec.CounterShards). A batch of one shard, the default, keeps its counters on
// its own item, which every child's finishing transaction updates: one item takes at most 1,000
// write units a second, 500 transactional updates, so that batch counts at most about 500
// children a second. A batch of N > 1 shards keeps its counters on N shard items
// (batch:<id>:s:<k>, and each shard's not-succeeded ids in batch:<id>:x:<k>); a child is counted
// on the shard its job id hashes to (shardOf; its envelope's meta names it, MetaBatchShard), and
// its finishing transaction updates that shard instead of the batch's item.
//
// Exactly one transaction completes a sharded batch. The batch's item counts the shards that have
// unfinished children (full), and every transaction that moves a shard's remaining between zero
// and more than zero updates full in the same transaction, conditioned on the shard being as it
// assumed:
//
//   - a count (Add, Track, AddThroughOutbox) that gives children to a shard at 0 adds one (the
//     shard conditioned rem = 0; a shard that had some, rem > 0), the batch conditioned open and
//     on its parts as read;
//   - a child that takes its shard from 1 to 0 takes one away, the batch conditioned open or
//     full > 1; when the batch is sealed and full = 1 the same transaction completes it instead
//     (st done, conditioned st = sealed AND full = 1) and puts the callback into the outbox;
//   - every other count (a shard that keeps unfinished children: rem > 1; a redriven child's
//     move between outcomes) writes the shard alone, never the batch's item.
//
// So full is, in every committed state, the number of shards with unfinished children. The seal
// reads it: above 0 it seals (conditioned full > 0), at 0 every child has finished and the seal
// completes the batch (conditioned st = open AND full = 0). Once sealed, no child can be added and
// a shard's remaining only falls; the one transaction that takes full from 1 to 0, or the seal
// that finds it at 0, is the only one whose condition holds. The callback is put into the outbox
// exactly once, and never before the seal. Its summary sums every shard as read before that
// transaction; a shard with no unfinished children changes only when a redriven dead child moves
// its count, so the transaction also checks that every shard counting dead children still counts
// as many (a ConditionCheck each), and a redrive in between makes it read again.

// MaxCounterShards is the most counter shards a batch may have (Spec.CounterShards): a count of
// a chunk writes the batch, its part, its fingerprint and every shard it touches in one
// transaction, and the completion reads every shard.
const MaxCounterShards = 32

// shardOf returns the counter shard of child job jobID in a batch of n shards.
func shardOf(jobID string, n int) int {
	if n <= 1 {
		return 0
	}
	return idempotency.Shard(jobID, n)
}

// shardsOf returns the counter shards of a batch item (1 when it has none of its own).
func shardsOf(item map[string]types.AttributeValue) int {
	if n := getN(item, attrShards); n > 1 {
		return int(n)
	}
	return 1
}

// errShardsMoved: a sharded batch's shards were not as its item said when they were read (an
// Add between the reads): read again.
var errShardsMoved = errors.New("batch: the shards moved while they were read")

// shardItems returns the items that create the n counter shards of batch id, each counting the
// children of who that hash to it, and how many of them have children (the batch's full).
func (c *Client) shardItems(id string, n int, who []Child, exp types.AttributeValue) ([]types.TransactWriteItem, int64) {
	per := make([]int64, n)
	for _, ch := range who {
		per[shardOf(ch.ID, n)]++
	}
	var full int64
	items := make([]types.TransactWriteItem, n)
	for k := range n {
		if per[k] > 0 {
			full++
		}
		items[k] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: map[string]types.AttributeValue{
			idempotency.AttrPK: avS(shardKey(id, k)), attrVersion: avN(1),
			attrTotal: avN(per[k]), attrRemaining: avN(per[k]), attrSucceeded: avN(0), attrDead: avN(0), attrCancelled: avN(0),
			idempotency.AttrExpires: exp,
		}}}
	}
	return items, full
}

// shardCounts returns the writes that count the children who into the shards of a batch of n
// (each touched shard's tot and rem, conditioned on it being at 0 or above as read), and how many
// of them were at 0 (the batch's full grows by that much, in the same transaction).
func (c *Client) shardCounts(ctx context.Context, id string, n int, who []Child, now time.Time) ([]types.TransactWriteItem, int64, error) {
	per := map[int]int64{}
	for _, ch := range who {
		per[shardOf(ch.ID, n)]++
	}
	ks := make([]int, 0, len(per))
	pks := make([]string, 0, len(per))
	for k := range per {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	for _, k := range ks {
		pks = append(pks, shardKey(id, k))
	}
	read, err := c.batchGet(ctx, pks)
	if err != nil {
		return nil, 0, err
	}
	var emptied int64
	items := make([]types.TransactWriteItem, 0, len(ks))
	for _, k := range ks {
		sh, ok := read[shardKey(id, k)]
		if !ok {
			return nil, 0, fmt.Errorf("batch: %s: its counter shard %d is missing", id, k)
		}
		cond := "#rem > :zero"
		if getN(sh, attrRemaining) == 0 {
			cond = "#rem = :zero"
			emptied++
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(c.cfg.Table), Key: avKey(shardKey(id, k)),
			UpdateExpression:          aws.String("SET #tot = #tot + :n, #rem = #rem + :n, #last = :now"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  map[string]string{"#tot": attrTotal, "#rem": attrRemaining, "#last": attrLast},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": avN(per[k]), ":now": avN(now.UnixMilli()), ":zero": avN(0)},
		}})
	}
	return items, emptied, nil
}

// shards is what readShards returns: each shard's counters and its not-succeeded ids.
type shards struct {
	counters []snapshot
	ids      [][]string
}

// readShards reads the n counter shards of batch id and their not-succeeded sets (strongly
// consistent, one BatchGetItem of 2n keys). A missing item reads as zeros.
func (c *Client) readShards(ctx context.Context, id string, n int, withIDs bool) (shards, error) {
	pks := make([]string, 0, 2*n)
	for k := range n {
		pks = append(pks, shardKey(id, k))
		if withIDs {
			pks = append(pks, shardNotSucceededKey(id, k))
		}
	}
	read, err := c.batchGet(ctx, pks)
	if err != nil {
		return shards{}, err
	}
	s := shards{counters: make([]snapshot, n), ids: make([][]string, n)}
	for k := range n {
		s.counters[k] = snapshotOf(read[shardKey(id, k)])
		s.ids[k] = getSS(read[shardNotSucceededKey(id, k)], attrIDs)
	}
	return s, nil
}

// sum adds up the shards' counters.
func (s shards) sum() snapshot {
	var t snapshot
	for _, c := range s.counters {
		t.total += c.total
		t.remaining += c.remaining
		t.succeeded += c.succeeded
		t.dead += c.dead
		t.cancelled += c.cancelled
	}
	return t
}

// notSucceeded returns the shards' not-succeeded ids, sorted, at most MaxNotSucceeded.
func (s shards) notSucceeded() []string {
	var ids []string
	for _, x := range s.ids {
		ids = append(ids, x...)
	}
	sort.Strings(ids)
	if len(ids) > MaxNotSucceeded {
		ids = ids[:MaxNotSucceeded]
	}
	return ids
}

// settleShard counts a child of sharded batch id on its shard k as o. The first attempt assumes
// the common case (its shard keeps unfinished children: the shard alone); a refusal reads the
// child's record, the batch and the shard, and the next attempt is exact: the shard's last child
// also takes the shard out of the batch's full count, and completes the batch when it is sealed
// and this was its last busy shard.
func (c *Client) settleShard(ctx context.Context, id string, k int, o string, w childWriter) error {
	prev := ""
	var sh, bt *snapshot // the shard and the batch, nil until a refusal made us read them
	xFull := false
	for range 8 {
		d, change := deltaFor(prev, o, w.jobID())
		if !change {
			return errNoChange
		}
		now := c.cfg.Now()
		last := sh != nil && d.remaining == -1 && sh.remaining == 1
		completing := last && bt.state == StateSealed && bt.full == 1
		var items []types.TransactWriteItem
		switch {
		case completing:
			var err error
			items, err = c.shardedCompletion(ctx, id, *bt, &lastChild{k: k, shard: *sh, d: d, o: o}, now)
			if errors.Is(err, errShardsMoved) {
				if sh, bt, xFull, err = c.readShard(ctx, id, k, d); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
		case last:
			items = c.shardEmptying(id, k, o, d, xFull, now)
		default:
			items = c.shardUpdate(id, k, prev, o, d, xFull, now)
		}
		child, err := w.action(countedExtra(prev, o))
		if err != nil {
			return err
		}
		err = c.transact(ctx, append([]types.TransactWriteItem{child}, items...))
		if err == nil {
			if completing && bt.callback != "" {
				c.outboxed()
			}
			return nil
		}
		var te *txError
		if !errors.As(err, &te) {
			return err
		}
		// Refused: by the child's record (a lost claim, or counted already), by the shard (its
		// last child, gone, not counting this one), by the batch (sealed meanwhile) or by a full
		// not-succeeded set.
		if te.failed(0) {
			if prev, err = w.refused(ctx); err != nil {
				return err
			}
		}
		d, _ = deltaFor(prev, o, w.jobID())
		if sh, bt, xFull, err = c.readShard(ctx, id, k, d); err != nil {
			return err
		}
		if !sh.found || prev == "" && sh.remaining == 0 {
			return errNotCounted
		}
	}
	return fmt.Errorf("batch: count a child of %s on counter shard %d: the batch kept changing", id, k)
}

// readShard reads sharded batch id's item, its shard k and that shard's not-succeeded set (one
// BatchGetItem): the batch and the shard as snapshots, and whether the set is full (for a child
// whose count would add to it, d.xAdd).
func (c *Client) readShard(ctx context.Context, id string, k int, d delta) (sh, bt *snapshot, xFull bool, err error) {
	read, err := c.batchGet(ctx, []string{batchKey(id), shardKey(id, k), shardNotSucceededKey(id, k)})
	if err != nil {
		return nil, nil, false, err
	}
	b, ok := read[batchKey(id)]
	if !ok {
		return nil, nil, false, errNoGroup
	}
	bs, ss := snapshotOf(b), snapshotOf(read[shardKey(id, k)])
	if k >= bs.shards {
		ss = snapshot{} // not a shard of this batch: nothing to count against
	}
	xFull = d.xAdd != "" && len(getSS(read[shardNotSucceededKey(id, k)], attrIDs)) >= MaxNotSucceeded
	return &ss, &bs, xFull, nil
}

// shardUpdate returns the writes of a count that leaves shard k with unfinished children (rem >
// 1 before it) or moves a redriven child's count between outcomes: the shard's counters and its
// not-succeeded set. The batch's item is not written.
func (c *Client) shardUpdate(id string, k int, prev, o string, d delta, xFull bool, now time.Time) []types.TransactWriteItem {
	names := map[string]string{"#pk": idempotency.AttrPK, "#o": counterAttr(o), "#last": attrLast}
	values := map[string]types.AttributeValue{":one": avN(1), ":now": avN(now.UnixMilli())}
	set := "#o = #o + :one, #last = :now"
	var cond string
	if prev == "" {
		names["#rem"] = attrRemaining
		set += ", #rem = #rem - :one"
		cond = "attribute_exists(#pk) AND #rem > :one"
	} else {
		names["#prv"] = counterAttr(prev)
		values[":zero"] = avN(0)
		set += ", #prv = #prv - :one"
		cond = "attribute_exists(#pk) AND #prv > :zero"
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(c.cfg.Table), Key: avKey(shardKey(id, k)),
		UpdateExpression: aws.String("SET " + set), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}}}
	return append(items, c.notSucceededWrites(shardNotSucceededKey(id, k), d, xFull, now)...)
}

// shardEmptying returns the writes of the count of shard k's last unfinished child when it does
// not complete the batch: the shard to 0, and the batch's full count one less, conditioned on the
// batch being open or having other busy shards (a sealed batch with this one alone left is
// completed instead: shardedCompletion).
func (c *Client) shardEmptying(id string, k int, o string, d delta, xFull bool, now time.Time) []types.TransactWriteItem {
	items := []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(c.cfg.Table), Key: avKey(shardKey(id, k)),
			UpdateExpression:          aws.String("SET #o = #o + :one, #rem = :zero, #last = :now"),
			ConditionExpression:       aws.String("#rem = :one"),
			ExpressionAttributeNames:  map[string]string{"#o": counterAttr(o), "#rem": attrRemaining, "#last": attrLast},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1), ":zero": avN(0), ":now": avN(now.UnixMilli())},
		}},
		{Update: &types.Update{
			TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
			UpdateExpression:          aws.String("SET #full = #full - :one, #last = :now"),
			ConditionExpression:       aws.String("#st = :open OR #full > :one"),
			ExpressionAttributeNames:  map[string]string{"#full": attrFull, "#last": attrLast, "#st": idempotency.AttrState},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1), ":now": avN(now.UnixMilli()), ":open": avS(StateOpen)},
		}},
	}
	return append(items, c.notSucceededWrites(shardNotSucceededKey(id, k), d, xFull, now)...)
}

// notSucceededWrites returns the write of a not-succeeded set (key) for a count d: its id added
// (while the set has room: conditioned on its size) or removed.
func (c *Client) notSucceededWrites(key string, d delta, xFull bool, now time.Time) []types.TransactWriteItem {
	switch {
	case d.xAdd != "" && !xFull:
		return []types.TransactWriteItem{c.notSucceededAdd(key, d.xAdd, true, now)}
	case d.xDel != "":
		return []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(c.cfg.Table), Key: avKey(key),
			UpdateExpression:          aws.String("DELETE #ids :id"),
			ExpressionAttributeNames:  map[string]string{"#ids": attrIDs},
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberSS{Value: []string{d.xDel}}},
		}}}
	}
	return nil
}

// notSucceededAdd returns the write that adds id to the not-succeeded set key (conditioned on its
// room when bounded), giving the set, when this creates it, an expiry Config.TTL from now (after
// the batch's own).
func (c *Client) notSucceededAdd(key, id string, bounded bool, now time.Time) types.TransactWriteItem {
	u := &types.Update{
		TableName: aws.String(c.cfg.Table), Key: avKey(key),
		UpdateExpression:         aws.String("ADD #ids :id SET #exp = if_not_exists(#exp, :exp)"),
		ExpressionAttributeNames: map[string]string{"#ids": attrIDs, "#exp": idempotency.AttrExpires},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberSS{Value: []string{id}},
			":exp": avN(expSeconds(now.Add(c.cfg.TTL)))},
	}
	if bounded {
		u.ConditionExpression = aws.String("attribute_not_exists(#ids) OR size(#ids) < :max")
		u.ExpressionAttributeValues[":max"] = avN(MaxNotSucceeded)
	}
	return types.TransactWriteItem{Update: u}
}

// lastChild is the count that completes a sealed sharded batch: its shard k (read as shard, at
// remaining 1) counts it as o (the change d).
type lastChild struct {
	k     int
	shard snapshot
	o     string
	d     delta
}

// shardedCompletion returns the writes that finish sharded batch id, read as bt, and put its
// callback into the outbox with the summary of every shard: by its last child (last: its shard's
// counters set to their final values, conditioned on the shard being exactly as read; the batch
// conditioned sealed with this shard its only busy one), or by the seal (last nil: the batch
// conditioned open with no busy shard). The other shards are read: they have no unfinished
// children (errShardsMoved when one has: read again) and change only when a redriven dead child
// moves its count: each one that counts dead children is checked in the same transaction
// (ConditionCheck: still as many dead), so the summary is never older than the batch's counts.
func (c *Client) shardedCompletion(ctx context.Context, id string, bt snapshot, last *lastChild, now time.Time) ([]types.TransactWriteItem, error) {
	all, err := c.readShards(ctx, id, bt.shards, true)
	if err != nil {
		return nil, err
	}
	var items []types.TransactWriteItem
	for k, s := range all.counters {
		if last != nil && k == last.k {
			continue
		}
		if s.remaining != 0 {
			return nil, fmt.Errorf("%w: shard %d of %s has %d unfinished children", errShardsMoved, k, id, s.remaining)
		}
		if s.dead == 0 {
			continue
		}
		// A shard whose children have all finished changes only when a dead one is redriven
		// and moves its count (and leaves the not-succeeded set). The summary is made of what
		// was read: the transaction holds only while the shard still counts as many dead.
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(c.cfg.Table), Key: avKey(shardKey(id, k)),
			ConditionExpression:       aws.String("#rem = :zero AND #dead = :dead"),
			ExpressionAttributeNames:  map[string]string{"#rem": attrRemaining, "#dead": attrDead},
			ExpressionAttributeValues: map[string]types.AttributeValue{":zero": avN(0), ":dead": avN(s.dead)},
		}})
	}
	if last != nil {
		s, d := last.shard, last.d
		final := snapshot{total: s.total, remaining: s.remaining + d.remaining, succeeded: s.succeeded + d.succeeded,
			dead: s.dead + d.dead, cancelled: s.cancelled + d.cancelled}
		all.counters[last.k] = final
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(c.cfg.Table), Key: avKey(shardKey(id, last.k)),
			UpdateExpression:    aws.String("SET #rem = :rem1, #ok = :ok1, #dead = :dead1, #cxl = :cxl1, #last = :now"),
			ConditionExpression: aws.String("#rem = :rem0 AND #ok = :ok0 AND #dead = :dead0 AND #cxl = :cxl0"),
			ExpressionAttributeNames: map[string]string{"#rem": attrRemaining, "#ok": attrSucceeded, "#dead": attrDead,
				"#cxl": attrCancelled, "#last": attrLast},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": avN(now.UnixMilli()),
				":rem1": avN(final.remaining), ":ok1": avN(final.succeeded), ":dead1": avN(final.dead), ":cxl1": avN(final.cancelled),
				":rem0": avN(s.remaining), ":ok0": avN(s.succeeded), ":dead0": avN(s.dead), ":cxl0": avN(s.cancelled),
			},
		}})
		if d.xAdd != "" && len(all.ids[last.k]) < MaxNotSucceeded {
			all.ids[last.k] = append(all.ids[last.k], d.xAdd)
			items = append(items, c.notSucceededAdd(shardNotSucceededKey(id, last.k), d.xAdd, false, now))
		}
	}
	// The batch's item takes the summed counts as they are at completion (what the callback's
	// summary says, and what the job table's stream shows a completion event: pkg/jobevents);
	// later moves of a redriven child are on its shard only, which Get and List read.
	t := all.sum()
	set := "#st = :done, #dat = :now, #last = :now, #full = :zero, #tot = :tot, #ok = :okT, #dead = :deadT, #cxl = :cxlT"
	cond := "#st = :sealed AND #full = :one"
	names := map[string]string{"#st": idempotency.AttrState, "#dat": attrDone, "#last": attrLast, "#full": attrFull,
		"#tot": attrTotal, "#ok": attrSucceeded, "#dead": attrDead, "#cxl": attrCancelled}
	values := map[string]types.AttributeValue{":done": avS(StateDone), ":now": avN(now.UnixMilli()), ":zero": avN(0),
		":tot": avN(t.total), ":okT": avN(t.succeeded), ":deadT": avN(t.dead), ":cxlT": avN(t.cancelled)}
	if last == nil {
		set += ", #sat = :now"
		cond = "#st = :open AND #full = :zero"
		names["#sat"] = attrSealed
		values[":open"] = avS(StateOpen)
	} else {
		values[":sealed"], values[":one"] = avS(StateSealed), avN(1)
	}
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
		UpdateExpression: aws.String("SET " + set), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}})
	if bt.callback == "" {
		return items, nil
	}
	ids := all.notSucceeded()
	sum := Summary{
		Batch: id, Total: int(t.total), Succeeded: int(t.succeeded), Dead: int(t.dead), Cancelled: int(t.cancelled),
		NotSucceeded: ids, More: int(t.dead+t.cancelled) - len(ids), BatchCancelled: !bt.cancelledAt.IsZero(),
		CompletedAt: now.UTC(),
	}
	cb, err := c.storedCallback(ctx, id, bt.callback, sum)
	if err != nil {
		return nil, err
	}
	return append(items, cb...), nil
}
