package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Batch states.
const (
	StateOpen   = "open"   // takes children; its callback cannot fire
	StateSealed = "sealed" // takes no more children; waits for them to finish
	StateDone   = "done"   // every child finished; the callback is in the outbox
)

// Spec describes a new batch.
type Spec struct {
	// ID names the batch: 1 to MaxIDLength characters of [A-Za-z0-9._-]. Empty: a new ULID.
	// An id in use is refused with ErrExists.
	ID string
	// Callback, when set, is the job enqueued once every child has finished: a message prepared
	// with the producer of its queue (producer.Prepare, PrepareRaw). It receives the batch's
	// Summary (SummaryFrom). Nil: a batch without a callback (its progress is still kept).
	Callback *producer.Message
	// Description is shown by listings (at most 256 bytes).
	Description string
	// CounterShards is how many items count the batch's children, 1 to MaxCounterShards. With 1
	// the batch's own item takes every child's count: about 500 children a second at most, fewer
	// with conflicts (docs/BATCHES.md, "Limits"). With N > 1 each child is counted on one of N
	// shard items (by a hash of its job id), so the batch counts up to N times as fast; its seal
	// and completion, listings and Get read the N shards. Set one shard per 100 children finishing
	// a second; it costs about 8 write units per shard per batch, nothing per child
	// (docs/BATCHES.md, "Counter shards"). Defaults to 1.
	CounterShards int
}

// Batch is a handle on a batch that takes children: from Start, or Client.Batch for one that
// exists. Its methods may be called from several goroutines.
type Batch struct {
	c      *Client
	id     string
	shards atomic.Int64 // the batch's counter shards; 0 until read
}

// ID returns the batch's id.
func (b *Batch) ID() string { return b.id }

// Batch returns a handle on the existing batch id (to add children from another process, or to
// seal it). Nothing is read until a method needs it.
func (c *Client) Batch(id string) (*Batch, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	return &Batch{c: c, id: id}, nil
}

// newBatch returns a handle on batch id, which has n counter shards.
func (c *Client) newBatch(id string, n int) *Batch {
	b := &Batch{c: c, id: id}
	b.shards.Store(int64(n))
	return b
}

// counterShards returns the batch's counter shards, read from its item the first time.
func (b *Batch) counterShards(ctx context.Context) (int, error) {
	if n := b.shards.Load(); n > 0 {
		return int(n), nil
	}
	item, err := b.c.get(ctx, batchKey(b.id))
	if err != nil {
		return 0, err
	}
	if item == nil {
		return 0, fmt.Errorf("%w: batch %s", ErrNotFound, b.id)
	}
	n := shardsOf(item)
	b.shards.Store(int64(n))
	return n, nil
}

// checkSpec validates spec (an empty ID becomes a new ULID) and returns its callback, tagged as
// nothing (a callback may itself be a child of another batch: Track).
func (c *Client) checkSpec(spec *Spec) error {
	if spec.ID == "" {
		spec.ID = jobs.NewID()
	}
	if err := ValidateID(spec.ID); err != nil {
		return err
	}
	if len(spec.Description) > 256 {
		return fmt.Errorf("%w: Spec.Description is %d bytes, at most 256", ErrInvalid, len(spec.Description))
	}
	if spec.CounterShards == 0 {
		spec.CounterShards = 1
	}
	if spec.CounterShards < 1 || spec.CounterShards > MaxCounterShards {
		return fmt.Errorf("%w: Spec.CounterShards %d: want 1-%d", ErrInvalid, spec.CounterShards, MaxCounterShards)
	}
	if spec.Callback == nil {
		return nil
	}
	cb := spec.Callback
	env, err := jobs.ParseEnvelope(cb.Body)
	if err != nil {
		return fmt.Errorf("%w: Spec.Callback: %v", ErrInvalid, err)
	}
	if cb.ID != env.ID || cb.Kind != env.Kind {
		return fmt.Errorf("%w: Spec.Callback: the message's id or kind is not its envelope's (prepare it with producer.Prepare)", ErrInvalid)
	}
	if cb.QueueURL == "" {
		return fmt.Errorf("%w: Spec.Callback has no queue URL (prepare it with the producer of its queue)", ErrInvalid)
	}
	if env.Meta[MetaBatch] == spec.ID {
		return fmt.Errorf("%w: Spec.Callback is a child of its own batch %s", ErrInvalid, spec.ID)
	}
	if _, ok := env.Meta[MetaSummary]; ok {
		return fmt.Errorf("%w: Spec.Callback's meta already has a %s", ErrInvalid, MetaSummary)
	}
	return c.checkKind("callback", env.Kind)
}

// newBatchItems returns the items that create a batch: the batch (state st, with the children
// who in one part), its counter shards when it has several, and its callback's item.
func (c *Client) newBatchItems(spec *Spec, st string, who []Child, now time.Time) ([]types.TransactWriteItem, error) {
	pk := batchKey(spec.ID)
	exp := avN(expSeconds(now.Add(c.cfg.TTL)))
	n := len(who)
	item := map[string]types.AttributeValue{
		idempotency.AttrPK:      avS(pk),
		attrVersion:             avN(1),
		idempotency.AttrState:   avS(st),
		attrTotal:               avN(int64(n)),
		attrParts:               avN(0),
		attrCreated:             avN(now.UnixMilli()),
		idempotency.AttrGSI1PK:  avS(listPartition(batchPrefix, pk)),
		idempotency.AttrGSI1SK:  avN(now.UnixMilli()),
		idempotency.AttrExpires: exp,
	}
	var shardItems []types.TransactWriteItem
	if spec.CounterShards > 1 {
		var full int64
		shardItems, full = c.shardItems(spec.ID, spec.CounterShards, who, exp)
		item[attrShards], item[attrFull] = avN(int64(spec.CounterShards)), avN(full)
	} else {
		item[attrRemaining], item[attrSucceeded], item[attrDead], item[attrCancelled] = avN(int64(n)), avN(0), avN(0), avN(0)
	}
	if n > 0 {
		item[attrParts] = avN(1)
	}
	if st != StateOpen {
		item[attrSealed] = avN(now.UnixMilli())
	}
	if spec.Description != "" {
		item[attrDesc] = avS(spec.Description)
	}
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(c.cfg.Table), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": idempotency.AttrPK},
	}}}
	if cb := spec.Callback; cb != nil {
		item[attrCallback], item[attrCBKind] = avS(cb.ID), avS(cb.Kind)
		cbItem := map[string]types.AttributeValue{idempotency.AttrPK: avS(callbackKey(spec.ID)), idempotency.AttrExpires: exp}
		if err := storedMessage(cb, cbItem); err != nil {
			return nil, err
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: cbItem}})
	}
	return append(items, shardItems...), nil
}

// Start creates an open batch: one transaction writes the batch, its callback and its counter
// shards (Spec.CounterShards). Add children
// (Add, AddThroughOutbox, Track) and Seal it; the callback cannot fire before the seal. A callback
// of a kind Config.Registry does not know is refused with ErrUnknownKind, an id in use with
// ErrExists, before anything is written.
func (c *Client) Start(ctx context.Context, spec Spec) (*Batch, error) {
	if err := c.checkSpec(&spec); err != nil {
		return nil, err
	}
	items, err := c.newBatchItems(&spec, StateOpen, nil, c.cfg.Now())
	if err != nil {
		return nil, err
	}
	if err := c.transact(ctx, items); err != nil {
		var te *txError
		if errors.As(err, &te) && te.failed(0) {
			return nil, c.existsError(ctx, batchKey(spec.ID), "batch", spec.ID)
		}
		return nil, err
	}
	return c.newBatch(spec.ID, spec.CounterShards), nil
}

// existsError explains a refused create: the item that holds the id.
func (c *Client) existsError(ctx context.Context, pk, what, id string) error {
	item, err := c.get(ctx, pk)
	if err != nil || item == nil {
		return fmt.Errorf("%w: %s %s (the create was refused)", ErrExists, what, id)
	}
	return fmt.Errorf("%w: %s %s exists (state %s, created %s); use another id", ErrExists, what, id,
		getS(item, idempotency.AttrState), getMs(item, attrCreated).Format(time.RFC3339))
}

// Enqueue is Start, Add and Seal: the batch's children are counted and sent, and the batch sealed,
// so its callback fires once they have all finished. An empty batch fires its callback at once,
// with a Summary of 0 children. On an error the batch may exist: the returned Batch (nil when
// Start failed) lets the caller Add the same children again (nothing is counted twice) and Seal.
func (c *Client) Enqueue(ctx context.Context, p *producer.Producer, spec Spec, children ...producer.Message) (*Batch, error) {
	b, err := c.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := b.Add(ctx, p, children...); err != nil {
		return b, err
	}
	return b, b.Seal(ctx)
}

// tag returns the children with the batch's meta (and their counter shard when the batch has n >
// 1), and who they are. A message in another batch or a chain, or twice in one call, is refused.
func (b *Batch) tag(children []producer.Message, n int) ([]producer.Message, []Child, error) {
	out := make([]producer.Message, len(children))
	who := make([]Child, len(children))
	seen := make(map[string]bool, len(children))
	for i, m := range children {
		t, err := withMeta(m, MetaBatch, b.id)
		if err != nil {
			return nil, nil, fmt.Errorf("child %d: %w", i, err)
		}
		if seen[t.ID] {
			return nil, nil, fmt.Errorf("%w: child %d: job %s is in the call twice", ErrInvalid, i, t.ID)
		}
		if n > 1 {
			if t, err = setMeta(t, MetaBatchShard, strconv.Itoa(shardOf(t.ID, n))); err != nil {
				return nil, nil, fmt.Errorf("child %d: %w", i, err)
			}
		}
		seen[t.ID] = true
		if strings.ContainsAny(t.ID+t.Kind+t.Key, "\t\n") {
			return nil, nil, fmt.Errorf("%w: child %d: job %s: a tab or newline in its id or key", ErrInvalid, i, t.ID)
		}
		out[i], who[i] = t, Child{ID: t.ID, Kind: t.Kind, Key: t.Key}
	}
	return out, who, nil
}

// chunks splits n children into chunks of at most max, each part within maxPartBytes.
func chunks(who []Child, max int) [][2]int {
	var out [][2]int
	for start := 0; start < len(who); {
		end, bytes := start, 0
		for end < len(who) && end-start < max {
			size := len(who[end].ID) + len(who[end].Kind) + len(who[end].Key) + 3
			if end > start && bytes+size > maxPartBytes {
				break
			}
			bytes += size
			end++
		}
		out = append(out, [2]int{start, end})
		start = end
	}
	return out
}

// count counts one chunk of children into the batch with one transaction: the batch's counters,
// the part that lists them and the chunk's fingerprint, plus extra (the children's outbox items).
// A chunk counted before (its fingerprint exists: an Add repeated after a crash or a failed send)
// is not counted again: already reports it.
func (b *Batch) count(ctx context.Context, who []Child, extra []types.TransactWriteItem) (already bool, err error) {
	c := b.c
	fp := fingerprint(who)
	for range 6 {
		item, err := c.get(ctx, batchKey(b.id))
		if err != nil {
			return false, err
		}
		if item == nil {
			return false, fmt.Errorf("%w: batch %s", ErrNotFound, b.id)
		}
		if st := getS(item, idempotency.AttrState); st != StateOpen {
			if f, err := c.get(ctx, fingerprintKey(b.id, fp)); err == nil && f != nil {
				return true, nil
			}
			return false, fmt.Errorf("%w: batch %s is %s", ErrSealed, b.id, st)
		}
		parts := getN(item, attrParts)
		now := c.cfg.Now()
		exp := item[idempotency.AttrExpires]
		n := avN(int64(len(who)))
		set := "SET #tot = #tot + :n, #rem = #rem + :n, #parts = :next, #last = :now"
		names := map[string]string{"#tot": attrTotal, "#rem": attrRemaining, "#parts": attrParts, "#last": attrLast, "#st": idempotency.AttrState}
		values := map[string]types.AttributeValue{":n": n, ":next": avN(parts + 1), ":now": avN(now.UnixMilli()), ":open": avS(StateOpen), ":parts": avN(parts)}
		var shardWrites []types.TransactWriteItem
		if shards := shardsOf(item); shards != int(b.shards.Load()) {
			return false, fmt.Errorf("batch: %s has %d counter shards, the handle %d", b.id, shards, b.shards.Load())
		} else if shards > 1 {
			// The shards count the children; the batch counts the shards that were at 0.
			var emptied int64
			if shardWrites, emptied, err = c.shardCounts(ctx, b.id, shards, who, now); err != nil {
				return false, err
			}
			set = "SET #tot = #tot + :n, #full = #full + :z, #parts = :next, #last = :now"
			delete(names, "#rem")
			names["#full"], values[":z"] = attrFull, avN(emptied)
		}
		items := []types.TransactWriteItem{
			{Update: &types.Update{
				TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(b.id)),
				UpdateExpression:          aws.String(set),
				ConditionExpression:       aws.String("#st = :open AND #parts = :parts"),
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: values,
			}},
			{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: map[string]types.AttributeValue{
				idempotency.AttrPK: avS(partKey(b.id, int(parts+1))), attrChildren: &types.AttributeValueMemberB{Value: encodeChildren(who)},
				attrCount: n, idempotency.AttrExpires: exp,
			}, ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": idempotency.AttrPK}}},
			{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: map[string]types.AttributeValue{
				idempotency.AttrPK: avS(fingerprintKey(b.id, fp)), attrPart: avN(parts + 1), idempotency.AttrExpires: exp,
			}, ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": idempotency.AttrPK}}},
		}
		items = append(items, shardWrites...)
		err = c.transact(ctx, append(items, extra...))
		var te *txError
		if !errors.As(err, &te) {
			return false, err
		}
		if f, ferr := c.get(ctx, fingerprintKey(b.id, fp)); ferr == nil && f != nil {
			return true, nil
		}
		// The batch changed (another Add, a seal) between the read and the write: read it again.
	}
	return false, fmt.Errorf("batch: add to %s: the batch kept changing", b.id)
}

// AddError is the error of an Add whose children were all counted but not all sent. Call Add
// again with the same children (in the same order): nothing is counted twice, and the ones
// already sent are sent again, which the worker's idempotency makes harmless. Or cancel the batch.
type AddError struct {
	// NotSent are the results of the children SQS did not accept (each with its Err).
	NotSent []producer.Result
}

func (e *AddError) Error() string {
	first := ""
	if len(e.NotSent) > 0 {
		first = ": " + e.NotSent[0].Err.Error()
	}
	return fmt.Sprintf("batch: %d children counted but not sent%s; add them again", len(e.NotSent), first)
}

// Unwrap returns ErrNotSent.
func (e *AddError) Unwrap() error { return ErrNotSent }

// Add counts children into the open batch and sends them with p (producer.Send): each chunk of up
// to 1,000 children is counted with one transaction (the batch's counters, a part that lists the
// chunk, the chunk's fingerprint) before it is sent, so a child can never finish before it is
// counted. The children get the batch's id in their envelope's meta (MetaBatch); messages in
// another batch or a chain are refused.
//
// Add is idempotent for the same children in the same order: a chunk whose fingerprint is written
// is not counted again, only sent. So after a crash between a count and its send, or an *AddError
// (counted, not all sent), call Add again with the same messages. A batch that is sealed refuses
// new children with ErrSealed.
func (b *Batch) Add(ctx context.Context, p *producer.Producer, children ...producer.Message) error {
	if p == nil {
		return fmt.Errorf("%w: Add needs a producer (or use Track and send the children yourself)", ErrInvalid)
	}
	shards, err := b.counterShards(ctx)
	if err != nil {
		return err
	}
	msgs, who, err := b.tag(children, shards)
	if err != nil {
		return err
	}
	var notSent []producer.Result
	for _, ch := range chunks(who, maxPartChildren) {
		if _, err := b.count(ctx, who[ch[0]:ch[1]], nil); err != nil {
			return err
		}
		results, err := p.Send(ctx, msgs[ch[0]:ch[1]])
		for _, r := range results {
			if r.Err != nil {
				notSent = append(notSent, r)
			}
		}
		if err != nil && len(notSent) == 0 {
			return fmt.Errorf("batch: send to %s: %w", b.id, err)
		}
	}
	if len(notSent) > 0 {
		return &AddError{NotSent: notSent}
	}
	return nil
}

// Track counts children into the open batch without sending them, and returns them with the
// batch's meta: send them yourself (after Track returned), or make them the callbacks of other
// batches, so that a batch of batches completes when its sub-batches have (docs/BATCHES.md,
// "Larger batches"). Like Add, it is idempotent for the same children in the same order.
func (b *Batch) Track(ctx context.Context, children ...producer.Message) ([]producer.Message, error) {
	shards, err := b.counterShards(ctx)
	if err != nil {
		return nil, err
	}
	msgs, who, err := b.tag(children, shards)
	if err != nil {
		return nil, err
	}
	for _, ch := range chunks(who, maxPartChildren) {
		if _, err := b.count(ctx, who[ch[0]:ch[1]], nil); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// AddThroughOutbox counts children into the open batch and puts them into the DynamoDB outbox in
// the same transactions (Config.Outbox; its relay sends them): a crash leaves a chunk either
// counted and enqueued, or neither. Each transaction holds up to 97 children (48 when the outbox
// also writes queued records), within DynamoDB's 100 actions and 4 MB. It costs the outbox's
// writes per child (docs/BATCHES.md, "Costs") and is idempotent like Add.
func (b *Batch) AddThroughOutbox(ctx context.Context, children ...producer.Message) error {
	shards, err := b.counterShards(ctx)
	if err != nil {
		return err
	}
	msgs, who, err := b.tag(children, shards)
	if err != nil {
		return err
	}
	jobsOf := func(lo, hi int) ([]types.TransactWriteItem, error) {
		var items []types.TransactWriteItem
		for _, m := range msgs[lo:hi] {
			j, err := b.c.cfg.Outbox.PrepareMessage(m)
			if err != nil {
				return nil, fmt.Errorf("batch: child %s: %w", m.ID, err)
			}
			items = append(items, j.Items...)
		}
		return items, nil
	}
	per := 1
	if len(msgs) > 0 {
		first, err := jobsOf(0, 1)
		if err != nil {
			return err
		}
		per = len(first)
	}
	reserved := 3 // the batch, the part, the fingerprint
	if shards > 1 {
		reserved += shards // and every shard the chunk may touch
	}
	max := (100 - reserved) / per
	sent := false
	for lo := 0; lo < len(msgs); {
		hi := min(lo+max, len(msgs))
		items, err := jobsOf(lo, hi)
		if err != nil {
			return err
		}
		// 4 MB: halve the chunk until the transaction fits (large envelopes).
		for hi-lo > 1 && putBytes(items) > maxTxBytes {
			hi = lo + (hi-lo)/2
			if items, err = jobsOf(lo, hi); err != nil {
				return err
			}
		}
		already, err := b.count(ctx, who[lo:hi], items)
		if err != nil {
			return err
		}
		sent = sent || !already
		lo = hi
	}
	if sent {
		b.c.outboxed()
	}
	return nil
}

// Seal closes the batch to new children. When every child has already finished (or there are
// none), the same transaction puts the callback into the outbox: an empty batch fires its
// callback at once, with a Summary of 0 children. Sealing a sealed or finished batch does nothing.
func (b *Batch) Seal(ctx context.Context) error { return b.c.seal(ctx, b.id) }

// seal seals batch id.
func (c *Client) seal(ctx context.Context, id string) error {
	for range 8 {
		item, err := c.get(ctx, batchKey(id))
		if err != nil {
			return err
		}
		if item == nil {
			return fmt.Errorf("%w: batch %s", ErrNotFound, id)
		}
		if getS(item, idempotency.AttrState) != StateOpen {
			return nil
		}
		snap := snapshotOf(item)
		now := c.cfg.Now()
		if snap.shards > 1 {
			done, err := c.sealShards(ctx, id, snap, now)
			if err != nil || done {
				return err
			}
			continue
		}
		if snap.remaining > 0 {
			_, err := c.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
				UpdateExpression:          aws.String("SET #st = :sealed, #sat = :now"),
				ConditionExpression:       aws.String("#st = :open AND #rem > :zero"),
				ExpressionAttributeNames:  map[string]string{"#st": idempotency.AttrState, "#sat": attrSealed, "#rem": attrRemaining},
				ExpressionAttributeValues: map[string]types.AttributeValue{":sealed": avS(StateSealed), ":now": avN(now.UnixMilli()), ":open": avS(StateOpen), ":zero": avN(0)},
			})
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) {
				continue // a child finished meanwhile: decide again
			}
			if err != nil {
				return fmt.Errorf("batch: seal %s: %w", id, err)
			}
			return nil
		}
		// Every child has finished: the seal completes the batch.
		items, err := c.completion(ctx, id, snap, delta{}, now, true)
		if err != nil {
			return err
		}
		err = c.transact(ctx, items)
		var te *txError
		if errors.As(err, &te) {
			continue
		}
		if err != nil {
			return err
		}
		if snap.callback != "" {
			c.outboxed()
		}
		return nil
	}
	return fmt.Errorf("batch: seal %s: the batch kept changing", id)
}

// sealShards seals sharded batch id, read as snap: while a shard has unfinished children (full >
// 0) one UpdateItem of the batch, conditioned on that; with none, the completion (the batch done,
// its callback into the outbox), conditioned on none. done is false when the batch changed
// meanwhile: read it again.
func (c *Client) sealShards(ctx context.Context, id string, snap snapshot, now time.Time) (done bool, err error) {
	if snap.full > 0 {
		_, err := c.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
			UpdateExpression:          aws.String("SET #st = :sealed, #sat = :now"),
			ConditionExpression:       aws.String("#st = :open AND #full > :zero"),
			ExpressionAttributeNames:  map[string]string{"#st": idempotency.AttrState, "#sat": attrSealed, "#full": attrFull},
			ExpressionAttributeValues: map[string]types.AttributeValue{":sealed": avS(StateSealed), ":now": avN(now.UnixMilli()), ":open": avS(StateOpen), ":zero": avN(0)},
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return false, nil // the last busy shard emptied meanwhile: decide again
		}
		if err != nil {
			return false, fmt.Errorf("batch: seal %s: %w", id, err)
		}
		return true, nil
	}
	// Every shard is at 0: the seal completes the batch.
	items, err := c.shardedCompletion(ctx, id, snap, nil, now)
	if errors.Is(err, errShardsMoved) {
		return false, nil // an Add between the reads
	}
	if err != nil {
		return false, err
	}
	err = c.transact(ctx, items)
	var te *txError
	if errors.As(err, &te) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if snap.callback != "" {
		c.outboxed()
	}
	return true, nil
}

// Tx is a whole batch as actions of a DynamoDB transaction: put Items into the TransactWriteItems
// of your business writes (or run them with Client.Transact).
type Tx struct {
	// ID is the batch's (or chain's) id.
	ID string
	// Items create the batch and its callback, count the children and put them into the outbox
	// (or create the chain and put its first step into the outbox).
	Items []types.TransactWriteItem

	what, pk string // "batch" or "chain", and the item whose create Transact explains
}

// noBusiness is a transaction with no business actions.
var noBusiness dynamodb.TransactWriteItemsInput

// Prepare returns the actions that create a batch of these children and put them into the DynamoDB
// outbox, for a transaction of the caller's: the batch exists, and its children are enqueued,
// exactly when the caller's business writes commit. With seal, the batch is sealed in the same
// transaction (an empty sealed batch puts its callback into the outbox at once); without, Add
// more children later (Client.Batch(id).AddThroughOutbox, Add) and Seal. All of it must fit one
// transaction with the caller's actions: 100 actions, 4 MB (each child is one action, two when
// the outbox writes queued records; the batch takes up to 4 more, and one per counter shard
// with Spec.CounterShards); the batch's items at most
// 3 MB, leaving 1 MB for the caller's (ErrTooLarge). Nothing is written.
func (c *Client) Prepare(spec Spec, seal bool, children ...producer.Message) (Tx, error) {
	if err := c.checkSpec(&spec); err != nil {
		return Tx{}, err
	}
	b := c.newBatch(spec.ID, spec.CounterShards)
	msgs, who, err := b.tag(children, spec.CounterShards)
	if err != nil {
		return Tx{}, err
	}
	now := c.cfg.Now()
	st := StateOpen
	if seal {
		st = StateSealed
	}
	if seal && len(children) == 0 {
		st = StateDone
	}
	items, err := c.newBatchItems(&spec, st, who, now)
	if err != nil {
		return Tx{}, err
	}
	exp := avN(expSeconds(now.Add(c.cfg.TTL)))
	if len(who) > 0 {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: map[string]types.AttributeValue{
			idempotency.AttrPK: avS(partKey(spec.ID, 1)), attrChildren: &types.AttributeValueMemberB{Value: encodeChildren(who)},
			attrCount: avN(int64(len(who))), idempotency.AttrExpires: exp,
		}}}, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: map[string]types.AttributeValue{
			idempotency.AttrPK: avS(fingerprintKey(spec.ID, fingerprint(who))), attrPart: avN(1), idempotency.AttrExpires: exp,
		}}})
	}
	for _, m := range msgs {
		j, err := c.cfg.Outbox.PrepareMessage(m)
		if err != nil {
			return Tx{}, fmt.Errorf("batch: child %s: %w", m.ID, err)
		}
		items = append(items, j.Items...)
	}
	if st == StateDone {
		bi := items[0].Put.Item
		bi[attrDone] = avN(now.UnixMilli())
		if spec.Callback != nil {
			cb, err := c.callbackJob(*spec.Callback, Summary{Batch: spec.ID, CompletedAt: now.UTC()})
			if err != nil {
				return Tx{}, err
			}
			items = append(items, cb...)
		}
	}
	if len(items) > 100 {
		return Tx{}, fmt.Errorf("%w: the batch takes %d actions, more than one transaction's 100: prepare fewer children and add the others with AddThroughOutbox", ErrTooLarge, len(items))
	}
	if n := putBytes(items); n > maxTxBytes {
		return Tx{}, fmt.Errorf("%w: the batch's items take %d bytes, more than %d of a transaction's 4 MB: prepare fewer children and add the others with AddThroughOutbox (large args belong in S3)", ErrTooLarge, n, maxTxBytes)
	}
	return Tx{ID: spec.ID, Items: items, what: "batch", pk: batchKey(spec.ID)}, nil
}

// Transact runs one TransactWriteItems with the actions of in (your business writes, first) and
// the batch's or chain's (Prepare, PrepareChain): all of them, or none. An id in use fails with
// ErrExists. Conflicts and throttling are retried as the outbox's Transact does.
func (c *Client) Transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, tx Tx) error {
	items := append(append([]types.TransactWriteItem(nil), in.TransactItems...), tx.Items...)
	err := c.transact(ctx, items)
	var te *txError
	if errors.As(err, &te) {
		business := len(in.TransactItems)
		if len(te.reasons) > business && te.failed(business) {
			return c.existsError(ctx, tx.pk, tx.what, tx.ID)
		}
		var failed []string
		for i, r := range te.reasons {
			if code := aws.ToString(r.Code); code != "" && code != "None" {
				failed = append(failed, "action "+strconv.Itoa(i)+": "+code)
			}
		}
		return fmt.Errorf("batch: transaction cancelled (%s); nothing was written: %w", strings.Join(failed, ", "), err)
	}
	if err == nil && tx.hasOutbox(c.cfg.Outbox.Table()) {
		c.outboxed()
	}
	return err
}

// maxTxBytes bounds the outbox items of one AddThroughOutbox transaction, below DynamoDB's 4 MB
// (the batch's own items take at most a part of 300 KB more).
const maxTxBytes = 3 << 20

// putBytes adds up the sizes of the items the Puts among items write.
func putBytes(items []types.TransactWriteItem) int {
	n := 0
	for _, it := range items {
		if it.Put != nil {
			n += ddbsize.ItemSize(it.Put.Item)
		}
	}
	return n
}

func (tx Tx) hasOutbox(table string) bool {
	for _, it := range tx.Items {
		if it.Put != nil && aws.ToString(it.Put.TableName) == table {
			return true
		}
	}
	return false
}
