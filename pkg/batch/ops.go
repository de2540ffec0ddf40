package batch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// ErrFinished: Cancel of a batch or chain that has already finished.
var ErrFinished = errors.New("batch: already finished")

// Info is a batch as listings show it.
type Info struct {
	// ID and Description are the batch's.
	ID, Description string
	// State is StateOpen, StateSealed or StateDone.
	State string
	// Total children counted; Remaining of them have not finished (queued, running or
	// retrying); the others Succeeded, were dead-lettered (Dead) or Cancelled.
	Total, Remaining, Succeeded, Dead, Cancelled int
	// Callback and CallbackKind are the callback's job id and kind ("" for a batch without).
	Callback, CallbackKind string
	// CounterShards is how many counter shards count the batch's children (Spec.CounterShards; 1:
	// the batch's own item). The counts above are the sum of its shards'.
	CounterShards int
	// CreatedAt, SealedAt and DoneAt are when the batch was created, sealed and finished (zero
	// until then); CancelledAt when it was cancelled, with CancelReason.
	CreatedAt, SealedAt, DoneAt, CancelledAt time.Time
	CancelReason                             string
	// ExpiresAt is when its items expire (Config.TTL after its creation).
	ExpiresAt time.Time
}

// Finished returns how many children have finished.
func (i Info) Finished() int { return i.Succeeded + i.Dead + i.Cancelled }

// Progress returns the share of children that have finished, 0 to 1 (1 for a finished batch
// without children).
func (i Info) Progress() float64 {
	if i.Total == 0 {
		if i.State == StateDone {
			return 1
		}
		return 0
	}
	return float64(i.Finished()) / float64(i.Total)
}

func infoOf(item map[string]types.AttributeValue) Info {
	pk := getS(item, idempotency.AttrPK)
	info := Info{
		ID: pk[len(batchPrefix):], Description: getS(item, attrDesc), State: getS(item, idempotency.AttrState),
		Total: int(getN(item, attrTotal)), Remaining: int(getN(item, attrRemaining)), Succeeded: int(getN(item, attrSucceeded)),
		Dead: int(getN(item, attrDead)), Cancelled: int(getN(item, attrCancelled)),
		Callback: getS(item, attrCallback), CallbackKind: getS(item, attrCBKind),
		CreatedAt: getMs(item, attrCreated), SealedAt: getMs(item, attrSealed), DoneAt: getMs(item, attrDone),
		CancelledAt: getMs(item, attrCancelAt), CancelReason: getS(item, idempotency.AttrReason),
		CounterShards: shardsOf(item),
	}
	if _, ok := item[idempotency.AttrExpires]; ok {
		info.ExpiresAt = time.Unix(getN(item, idempotency.AttrExpires), 0).UTC()
	}
	return info
}

// withShards sets the counts of a sharded batch's info to the sums of its shards'.
func (i *Info) withShards(t snapshot) {
	i.Total, i.Remaining, i.Succeeded = int(t.total), int(t.remaining), int(t.succeeded)
	i.Dead, i.Cancelled = int(t.dead), int(t.cancelled)
}

// infos returns the infos of batch items, the counts of sharded ones summed from their shards
// (one BatchGetItem per 100 shards).
func (c *Client) infos(ctx context.Context, items []map[string]types.AttributeValue) ([]Info, error) {
	out := make([]Info, 0, len(items))
	var pks []string
	for _, it := range items {
		info := infoOf(it)
		if info.CounterShards > 1 {
			for k := range info.CounterShards {
				pks = append(pks, shardKey(info.ID, k))
			}
		}
		out = append(out, info)
	}
	if len(pks) == 0 {
		return out, nil
	}
	read, err := c.batchGet(ctx, pks)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].CounterShards <= 1 {
			continue
		}
		var s shards
		for k := range out[i].CounterShards {
			s.counters = append(s.counters, snapshotOf(read[shardKey(out[i].ID, k)]))
		}
		out[i].withShards(s.sum())
	}
	return out, nil
}

// ListQuery selects a page of batches or chains, newest first.
type ListQuery struct {
	// Limit is the most returned. Defaults to 50; at most 500.
	Limit int
	// Before, when set, returns those created before it (the CreatedAt of the last one of the
	// previous page).
	Before time.Time
}

// List returns batches, newest first: a query of each of the by_status index's 8 batch
// partitions, then a strongly consistent read of the batches found (their counters), and of the
// counter shards of sharded ones.
func (c *Client) List(ctx context.Context, q ListQuery) ([]Info, error) {
	items, err := c.list(ctx, batchPrefix, q)
	if err != nil {
		return nil, err
	}
	return c.infos(ctx, items)
}

// list returns the items of the newest batches or chains (prefix).
func (c *Client) list(ctx context.Context, prefix string, q ListQuery) ([]map[string]types.AttributeValue, error) {
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 0 || q.Limit > 500 {
		return nil, fmt.Errorf("%w: ListQuery.Limit %d: want 1-500", ErrInvalid, q.Limit)
	}
	type entry struct {
		pk string
		at int64
	}
	var (
		mu      sync.Mutex
		entries []entry
		wg      sync.WaitGroup
		errs    = make([]error, listShards)
	)
	for shard := range listShards {
		wg.Go(func() {
			part := prefix[:len(prefix)-1] + "#" + strconv.Itoa(shard)
			cond := "#g = :g"
			values := map[string]types.AttributeValue{":g": avS(part)}
			if !q.Before.IsZero() {
				cond += " AND #s < :before"
				values[":before"] = avN(q.Before.UnixMilli())
			}
			names := map[string]string{"#g": idempotency.AttrGSI1PK}
			if !q.Before.IsZero() {
				names["#s"] = idempotency.AttrGSI1SK
			}
			out, err := c.cfg.Client.Query(ctx, &dynamodb.QueryInput{
				TableName: aws.String(c.cfg.Table), IndexName: aws.String(idempotency.IndexByStatus),
				KeyConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
				ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(q.Limit)),
			})
			if err != nil {
				errs[shard] = fmt.Errorf("batch: list %s: %w", part, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, it := range out.Items {
				entries = append(entries, entry{pk: getS(it, idempotency.AttrPK), at: getN(it, idempotency.AttrGSI1SK)})
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].at != entries[j].at {
			return entries[i].at > entries[j].at
		}
		return entries[i].pk < entries[j].pk
	})
	if len(entries) > q.Limit {
		entries = entries[:q.Limit]
	}
	pks := make([]string, len(entries))
	for i, e := range entries {
		pks[i] = e.pk
	}
	got, err := c.batchGet(ctx, pks)
	if err != nil {
		return nil, err
	}
	var out []map[string]types.AttributeValue
	for _, pk := range pks {
		if it, ok := got[pk]; ok {
			out = append(out, it)
		}
	}
	return out, nil
}

// batchGet reads items by partition key, strongly consistent, 100 per request; missing items are
// absent from the result.
func (c *Client) batchGet(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(pks))
	seen := map[string]bool{}
	var unique []string
	for _, pk := range pks {
		if !seen[pk] {
			seen[pk] = true
			unique = append(unique, pk)
		}
	}
	for len(unique) > 0 {
		n := min(len(unique), 100)
		keys := make([]map[string]types.AttributeValue, n)
		for i, pk := range unique[:n] {
			keys[i] = avKey(pk)
		}
		unique = unique[n:]
		req := map[string]types.KeysAndAttributes{c.cfg.Table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		backoff := 50 * time.Millisecond
		for attempt := 1; ; attempt++ {
			res, err := c.cfg.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("batch: batch get: %w", err)
			}
			for _, it := range res.Responses[c.cfg.Table] {
				out[getS(it, idempotency.AttrPK)] = it
			}
			left, ok := res.UnprocessedKeys[c.cfg.Table]
			if !ok || len(left.Keys) == 0 {
				break
			}
			if attempt == 8 {
				return nil, fmt.Errorf("batch: batch get: %d keys still unprocessed after %d attempts", len(left.Keys), attempt)
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			backoff = min(2*backoff, 2*time.Second)
			req = map[string]types.KeysAndAttributes{c.cfg.Table: left}
		}
	}
	return out, nil
}

// ChildStatus is a child as Get shows it: who it is, and its job record.
type ChildStatus struct {
	Child
	// State is its record's state; "" when it has none yet (not delivered yet).
	State idempotency.State
	// Counted is what the batch counted it as ("" until it finished).
	Counted string
	// Runs, Reason, LastError and UpdatedAt are its record's.
	Runs              int
	Reason, LastError string
	UpdatedAt         time.Time
}

// Detail is one batch with its children.
type Detail struct {
	Info
	// NotSucceeded are ids of children that did not succeed, at most MaxNotSucceeded.
	NotSucceeded []string
	// Children are the first children asked for (Get's limit), in the order they were added.
	Children []ChildStatus
	// MoreChildren reports that the batch has more children than Children shows.
	MoreChildren bool
}

// Get returns batch id, with up to children of its children and their records (0: none; a
// negative number: all). It reads the batch, its not-succeeded set (a sharded batch: its shards
// and theirs), the parts that list the children and the children's records (strongly consistent
// reads, 100 per request).
func (c *Client) Get(ctx context.Context, id string, children int) (Detail, error) {
	if err := ValidateID(id); err != nil {
		return Detail{}, err
	}
	items, err := c.batchGet(ctx, []string{batchKey(id), notSucceededKey(id)})
	if err != nil {
		return Detail{}, err
	}
	item, ok := items[batchKey(id)]
	if !ok {
		return Detail{}, fmt.Errorf("%w: batch %s", ErrNotFound, id)
	}
	d := Detail{Info: infoOf(item), NotSucceeded: getSS(items[notSucceededKey(id)], attrIDs)}
	if d.CounterShards > 1 {
		s, err := c.readShards(ctx, id, d.CounterShards, true)
		if err != nil {
			return Detail{}, err
		}
		d.withShards(s.sum())
		d.NotSucceeded = s.notSucceeded()
	}
	sort.Strings(d.NotSucceeded)
	if children == 0 {
		return d, nil
	}
	parts := int(getN(item, attrParts))
	for p := 1; p <= parts; p++ {
		kids, err := c.part(ctx, id, p)
		if err != nil {
			return Detail{}, err
		}
		if children > 0 && len(d.Children)+len(kids) > children {
			kids = kids[:children-len(d.Children)]
			d.MoreChildren = true
		}
		st, err := c.childStatus(ctx, kids)
		if err != nil {
			return Detail{}, err
		}
		d.Children = append(d.Children, st...)
		if d.MoreChildren {
			break
		}
	}
	return d, nil
}

// part returns the children part p of batch id lists.
func (c *Client) part(ctx context.Context, id string, p int) ([]Child, error) {
	item, err := c.get(ctx, partKey(id, p))
	if err != nil {
		return nil, err
	}
	if item == nil {
		return nil, fmt.Errorf("batch: %s: part %d is missing", id, p)
	}
	return decodeChildren(item)
}

// childStatus reads the records of children.
func (c *Client) childStatus(ctx context.Context, kids []Child) ([]ChildStatus, error) {
	pks := make([]string, len(kids))
	for i, k := range kids {
		pks[i] = c.cfg.Layout.ItemKey(k.Kind, k.Key, k.ID)
	}
	recs, err := c.batchGet(ctx, pks)
	if err != nil {
		return nil, err
	}
	out := make([]ChildStatus, len(kids))
	for i, k := range kids {
		out[i] = ChildStatus{Child: k}
		raw, ok := recs[pks[i]]
		if !ok {
			continue
		}
		rec, err := idempotency.RecordFromItem(raw)
		if err != nil || rec.JobID != k.ID && rec.JobID != "" {
			continue // another job's record under the key
		}
		out[i].State, out[i].Counted, out[i].Runs = rec.State, getS(raw, attrCounted), rec.Runs
		out[i].Reason, out[i].LastError, out[i].UpdatedAt = rec.Reason, rec.LastError, rec.UpdatedAt
	}
	return out, nil
}

// CancelResult says what Cancel did.
type CancelResult struct {
	// Cancelled children had not started (or were retrying): they are cancelled and counted.
	Cancelled int
	// Running children hold a live claim: they finish their run and are counted then.
	Running int
}

// Cancel cancels batch id: it is marked cancelled and sealed (it takes no more children), and
// every child that has not started (no record yet, queued, scheduled, retrying, or running with a
// lapsed claim) is cancelled (its record cancelled, as status.Cancel does, so that its delivery is
// acknowledged without running) and counted cancelled, one transaction per child. Running
// children finish and are counted then. When the last child is counted, the callback is enqueued
// as for any batch, with Summary.BatchCancelled set. Cancelling a cancelled batch again cancels
// the children that are still unstarted; a finished batch returns ErrFinished.
func (c *Client) Cancel(ctx context.Context, id, reason string) (CancelResult, error) {
	if err := ValidateID(id); err != nil {
		return CancelResult{}, err
	}
	if len(reason) > 1024 {
		return CancelResult{}, fmt.Errorf("%w: reason is %d bytes, at most 1024", ErrInvalid, len(reason))
	}
	now := c.cfg.Now()
	set := "SET #cancel = :now"
	names := map[string]string{"#pk": idempotency.AttrPK, "#cancel": attrCancelAt, "#st": idempotency.AttrState}
	values := map[string]types.AttributeValue{":now": avN(now.UnixMilli()), ":done": avS(StateDone)}
	if reason != "" {
		set += ", #r = :r"
		names["#r"], values[":r"] = idempotency.AttrReason, avS(reason)
	}
	_, err := c.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.cfg.Table), Key: avKey(batchKey(id)),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#cancel) AND #st <> :done"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return CancelResult{}, fmt.Errorf("batch: cancel %s: %w", id, err)
	}
	item, err := c.get(ctx, batchKey(id))
	if err != nil {
		return CancelResult{}, err
	}
	if item == nil {
		return CancelResult{}, fmt.Errorf("%w: batch %s", ErrNotFound, id)
	}
	if snap := snapshotOf(item); snap.state == StateDone {
		return CancelResult{}, fmt.Errorf("%w: batch %s finished at %s", ErrFinished, id, getMs(item, attrDone).Format(time.RFC3339))
	}
	if err := c.seal(ctx, id); err != nil {
		return CancelResult{}, err
	}
	if reason == "" {
		reason = "batch " + id + " cancelled"
	}
	var res CancelResult
	var errs []error
	for p := 1; p <= int(getN(item, attrParts)); p++ {
		kids, err := c.part(ctx, id, p)
		if err != nil {
			return res, err
		}
		for len(kids) > 0 {
			n := min(len(kids), 100)
			r, err := c.cancelChildren(ctx, id, shardsOf(item), kids[:n], now, reason)
			res.Cancelled += r.Cancelled
			res.Running += r.Running
			if err != nil {
				errs = append(errs, err)
			}
			kids = kids[n:]
		}
	}
	return res, errors.Join(errs...)
}

// cancelChildren cancels the unstarted children among kids of batch id (of shards counter shards).
func (c *Client) cancelChildren(ctx context.Context, id string, shards int, kids []Child, now time.Time, reason string) (CancelResult, error) {
	pks := make([]string, len(kids))
	for i, k := range kids {
		pks[i] = c.cfg.Layout.ItemKey(k.Kind, k.Key, k.ID)
	}
	recs, err := c.batchGet(ctx, pks)
	if err != nil {
		return CancelResult{}, err
	}
	var res CancelResult
	var errs []error
	for i, k := range kids {
		raw := recs[pks[i]]
		switch cancellable(raw, now) {
		case childRunning:
			res.Running++
			continue
		case childFinished:
			continue
		}
		w := &cancelWriter{c: c, child: k, pk: pks[i], raw: raw, at: now, reason: reason}
		err := c.settleChild(ctx, id, shards, countedCancelled, w)
		switch {
		case err == nil:
			res.Cancelled++
		case errors.Is(err, errSkip):
			if cancellable(w.raw, c.cfg.Now()) == childRunning {
				res.Running++
			}
		case errors.Is(err, errNoChange):
		default:
			errs = append(errs, fmt.Errorf("child %s: %w", k.ID, err))
		}
	}
	return res, errors.Join(errs...)
}

// Repair counts the children of batch id whose job records are final (succeeded, dead,
// cancelled) but were not counted: their finishing transaction kept failing (throttling or
// conflicts beyond the retries), so the worker recorded their outcome alone and logged it. Each is
// counted with the same transaction, once (a child counted meanwhile is left alone), and the last
// one enqueues the callback as usual. It returns how many it counted. It reads every child's
// record (100 per request).
func (c *Client) Repair(ctx context.Context, id string) (int, error) {
	if err := ValidateID(id); err != nil {
		return 0, err
	}
	item, err := c.get(ctx, batchKey(id))
	if err != nil {
		return 0, err
	}
	if item == nil {
		return 0, fmt.Errorf("%w: batch %s", ErrNotFound, id)
	}
	counted := 0
	var errs []error
	now := c.cfg.Now()
	for p := 1; p <= int(getN(item, attrParts)); p++ {
		kids, err := c.part(ctx, id, p)
		if err != nil {
			return counted, err
		}
		for len(kids) > 0 {
			n := min(len(kids), 100)
			pks := make([]string, n)
			for i, k := range kids[:n] {
				pks[i] = c.cfg.Layout.ItemKey(k.Kind, k.Key, k.ID)
			}
			recs, err := c.batchGet(ctx, pks)
			if err != nil {
				return counted, err
			}
			for i, k := range kids[:n] {
				ok, err := c.repairChild(ctx, id, shardsOf(item), k, pks[i], recs[pks[i]], now)
				if err != nil {
					errs = append(errs, fmt.Errorf("child %s: %w", k.ID, err))
				}
				if ok {
					counted++
				}
			}
			kids = kids[n:]
		}
	}
	return counted, errors.Join(errs...)
}

// repairChild counts child k of batch id (its record raw, under pk) when the record is final but
// was not counted; it reports whether it counted it.
func (c *Client) repairChild(ctx context.Context, id string, shards int, k Child, pk string, raw map[string]types.AttributeValue, now time.Time) (bool, error) {
	st := idempotency.State(getS(raw, idempotency.AttrState))
	if raw == nil || getS(raw, attrCounted) != "" || outcomeOf(st) == "" || getS(raw, idempotency.AttrJobID) != "" && getS(raw, idempotency.AttrJobID) != k.ID ||
		getN(raw, idempotency.AttrExpires) > 0 && getN(raw, idempotency.AttrExpires) <= now.Unix() {
		return false, nil
	}
	w := &countWriter{c: c, pk: pk, id: k.ID, state: st}
	switch err := c.settleChild(ctx, id, shards, outcomeOf(st), w); {
	case err == nil:
		return true, nil
	case errors.Is(err, errSkip), errors.Is(err, errNoChange):
		return false, nil
	default:
		return false, err
	}
}

var _ producer.GroupCounter = (*Client)(nil)

// RepairJob counts the job env (a batch's child or a chain's step, as its envelope's meta says)
// when its record is final but its batch or chain did not count it: above all a scheduled job
// cancelled through its record (sqsworker cancel, status.Table.CancelByID, producer.Cancel),
// whose one-time schedule was deleted, so that no delivery comes to count the cancellation. Call
// it after such a cancel with the envelope the schedule carried (schedule.Client.GetJob). It
// returns what the job belongs to ("batch <id>", "chain <id> step <n>"; "" for a job of neither)
// and whether it counted it now (false: counted already, or not final). A chain's step is
// counted as RepairChain counts it.
//
// producer.Cancel calls it, given the Client as producer.Config.Groups.
func (c *Client) RepairJob(ctx context.Context, env jobs.Envelope) (in string, counted bool, err error) {
	g, ok, err := groupOf(env.Meta)
	if err != nil || !ok {
		return "", false, err
	}
	if g.chain != "" {
		counted, err := c.RepairChain(ctx, g.chain)
		return g.String(), counted, err
	}
	item, err := c.get(ctx, batchKey(g.batch))
	if err != nil {
		return g.String(), false, err
	}
	if item == nil {
		return g.String(), false, fmt.Errorf("%w: batch %s", ErrNotFound, g.batch)
	}
	key := env.Key
	if key == "" {
		key = env.ID
	}
	k := Child{ID: env.ID, Kind: env.Kind, Key: key}
	pk := c.cfg.Layout.ItemKey(k.Kind, k.Key, k.ID)
	raw, err := c.get(ctx, pk)
	if err != nil {
		return g.String(), false, err
	}
	counted, err = c.repairChild(ctx, g.batch, shardsOf(item), k, pk, raw, c.cfg.Now())
	return g.String(), counted, err
}

// RepairChain counts chain id's current step when its job record is final (succeeded, dead,
// cancelled) but the chain did not count it: the step's finishing transaction kept failing
// (throttling or conflicts beyond the retries), so the worker recorded its outcome alone and
// logged "could not count the job in its chain", and the chain waits. The step is counted with
// the same transaction the worker's would have been, once: a succeeded step enqueues the next
// one (through the outbox, with the step's result) or finishes the chain; a dead or cancelled
// one stops it. It reports whether it counted the step (false: nothing to repair). It reads the
// chain, its current step and that step's record.
func (c *Client) RepairChain(ctx context.Context, id string) (bool, error) {
	if err := ValidateID(id); err != nil {
		return false, err
	}
	item, err := c.get(ctx, chainKey(id))
	if err != nil {
		return false, err
	}
	if item == nil {
		return false, fmt.Errorf("%w: chain %s", ErrNotFound, id)
	}
	cur := int(getN(item, attrCurrent))
	step, err := c.get(ctx, stepKey(id, cur))
	if err != nil || step == nil {
		return false, err
	}
	kind, key, job := getS(step, attrKind), getS(step, idempotency.AttrKey), getS(step, attrJob)
	pk := c.cfg.Layout.ItemKey(kind, key, job)
	raw, err := c.get(ctx, pk)
	if err != nil {
		return false, err
	}
	st := idempotency.State(getS(raw, idempotency.AttrState))
	if raw == nil || getS(raw, attrCounted) != "" || outcomeOf(st) == "" || getS(raw, idempotency.AttrJobID) != "" && getS(raw, idempotency.AttrJobID) != job ||
		getN(raw, idempotency.AttrExpires) > 0 && getN(raw, idempotency.AttrExpires) <= c.cfg.Now().Unix() {
		return false, nil
	}
	w := &countWriter{c: c, pk: pk, id: job, state: st}
	err = c.settleChain(ctx, group{chain: id, step: cur}, outcomeOf(st), getS(raw, idempotency.AttrResult), getS(raw, idempotency.AttrReason), w)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errSkip), errors.Is(err, errNoChange):
		return false, nil
	}
	return false, fmt.Errorf("batch: repair chain %s: %w", id, err)
}

type childPhase int

const (
	childUnstarted childPhase = iota // no record, queued, scheduled, retrying, or a lapsed claim
	childRunning                     // a live claim
	childFinished                    // succeeded, dead, cancelled
)

// cancellable says where a child's record (nil: none) stands for Cancel.
func cancellable(raw map[string]types.AttributeValue, now time.Time) childPhase {
	if raw == nil {
		return childUnstarted
	}
	if exp, ok := raw[idempotency.AttrExpires]; ok && exp != nil && getN(raw, idempotency.AttrExpires) <= now.Unix() {
		return childUnstarted // expired: counts as absent
	}
	switch idempotency.State(getS(raw, idempotency.AttrState)) {
	case idempotency.StateQueued, idempotency.StateScheduled, idempotency.StateRetrying:
		return childUnstarted
	case idempotency.StateRunning:
		if getN(raw, idempotency.AttrLease) <= now.UnixMilli() {
			return childUnstarted
		}
		return childRunning
	}
	return childFinished
}

// cancelWriter cancels an unstarted child (status.CancelAction).
type cancelWriter struct {
	c      *Client
	child  Child
	pk     string
	raw    map[string]types.AttributeValue
	at     time.Time
	reason string
}

func (w *cancelWriter) jobID() string { return w.child.ID }

func (w *cancelWriter) action(x idempotency.Extra) (types.TransactWriteItem, error) {
	raw := w.raw
	if raw != nil && getN(raw, idempotency.AttrExpires) > 0 && getN(raw, idempotency.AttrExpires) <= w.c.cfg.Now().Unix() {
		raw = nil // expired: Cancel writes a new record
	}
	a, err := w.c.status.CancelAction(w.child.Kind, w.child.Key, w.child.ID, raw, w.at, w.reason, x)
	if errors.Is(err, status.ErrSucceeded) || errors.Is(err, status.ErrCancelled) {
		return a, errSkip
	}
	return a, err
}

func (w *cancelWriter) refused(ctx context.Context) (string, error) {
	raw, err := w.c.get(ctx, w.pk)
	if err != nil {
		return "", err
	}
	w.raw = raw
	if cancellable(raw, w.c.cfg.Now()) != childUnstarted {
		return "", errSkip
	}
	return getS(raw, attrCounted), nil
}

// ChainInfo is a chain as listings show it.
type ChainInfo struct {
	// ID and Description are the chain's.
	ID, Description string
	// State is ChainRunning, ChainSucceeded, ChainFailed or ChainCancelled.
	State string
	// Steps is the chain's length; Current the step enqueued or running (1-based), or the last
	// one once the chain finished; CurrentJob that step's job id.
	Steps, Current int
	CurrentJob     string
	// FailedStep is the step a failed or cancelled chain stopped at, with Reason.
	FailedStep int
	Reason     string
	// CreatedAt, DoneAt and CancelledAt are when it was created, finished (succeeded, failed,
	// cancelled) and cancelled; ExpiresAt when its items expire.
	CreatedAt, DoneAt, CancelledAt, ExpiresAt time.Time
}

func chainInfoOf(item map[string]types.AttributeValue) ChainInfo {
	pk := getS(item, idempotency.AttrPK)
	ci := ChainInfo{
		ID: pk[len(chainPrefix):], Description: getS(item, attrDesc), State: getS(item, idempotency.AttrState),
		Steps: int(getN(item, attrCount)), Current: int(getN(item, attrCurrent)), CurrentJob: getS(item, attrJob),
		FailedStep: int(getN(item, attrFailed)), Reason: getS(item, idempotency.AttrReason),
		CreatedAt: getMs(item, attrCreated), DoneAt: getMs(item, attrDone), CancelledAt: getMs(item, attrCancelAt),
	}
	if _, ok := item[idempotency.AttrExpires]; ok {
		ci.ExpiresAt = time.Unix(getN(item, idempotency.AttrExpires), 0).UTC()
	}
	return ci
}

// ListChains returns chains, newest first (as List does for batches).
func (c *Client) ListChains(ctx context.Context, q ListQuery) ([]ChainInfo, error) {
	items, err := c.list(ctx, chainPrefix, q)
	if err != nil {
		return nil, err
	}
	out := make([]ChainInfo, 0, len(items))
	for _, it := range items {
		out = append(out, chainInfoOf(it))
	}
	return out, nil
}

// StepStatus is a chain's step as GetChain shows it.
type StepStatus struct {
	// Step is its number (1-based); JobID, Kind and Key name its job.
	Step             int
	JobID, Kind, Key string
	// State is its record's state ("" when it has none: not enqueued yet, or not delivered).
	State idempotency.State
	// Runs, Reason, LastError, Result and UpdatedAt are its record's.
	Runs                      int
	Reason, LastError, Result string
	UpdatedAt                 time.Time
}

// ChainDetail is one chain with its steps.
type ChainDetail struct {
	ChainInfo
	Steps []StepStatus
}

// GetChain returns chain id with its steps and their records.
func (c *Client) GetChain(ctx context.Context, id string) (ChainDetail, error) {
	if err := ValidateID(id); err != nil {
		return ChainDetail{}, err
	}
	item, err := c.get(ctx, chainKey(id))
	if err != nil {
		return ChainDetail{}, err
	}
	if item == nil {
		return ChainDetail{}, fmt.Errorf("%w: chain %s", ErrNotFound, id)
	}
	d := ChainDetail{ChainInfo: chainInfoOf(item)}
	pks := make([]string, d.ChainInfo.Steps)
	for k := range pks {
		pks[k] = stepKey(id, k+1)
	}
	steps, err := c.batchGet(ctx, pks)
	if err != nil {
		return ChainDetail{}, err
	}
	kids := make([]Child, len(pks))
	for k, pk := range pks {
		s := steps[pk]
		kids[k] = Child{ID: getS(s, attrJob), Kind: getS(s, attrKind), Key: getS(s, idempotency.AttrKey)}
	}
	recs, err := c.childStatus(ctx, kids)
	if err != nil {
		return ChainDetail{}, err
	}
	for k, r := range recs {
		st := StepStatus{Step: k + 1, JobID: r.ID, Kind: r.Kind, Key: r.Key, State: r.State, Runs: r.Runs,
			Reason: r.Reason, LastError: r.LastError, UpdatedAt: r.UpdatedAt}
		d.Steps = append(d.Steps, st)
	}
	// Results: read the succeeded steps' records again for their result (not in ChildStatus).
	for i := range d.Steps {
		if d.Steps[i].State != idempotency.StateSucceeded {
			continue
		}
		raw, err := c.get(ctx, c.cfg.Layout.ItemKey(d.Steps[i].Kind, d.Steps[i].Key, d.Steps[i].JobID))
		if err == nil && raw != nil {
			d.Steps[i].Result = getS(raw, idempotency.AttrResult)
		}
	}
	return d, nil
}

// CancelChain cancels chain id: it is marked cancelled (no further step is enqueued) and its
// current step, if it has not started, is cancelled (status.Cancel); a running step finishes,
// and its success enqueues nothing. A chain that has finished returns ErrFinished.
func (c *Client) CancelChain(ctx context.Context, id, reason string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if len(reason) > 1024 {
		return fmt.Errorf("%w: reason is %d bytes, at most 1024", ErrInvalid, len(reason))
	}
	if reason == "" {
		reason = "chain " + id + " cancelled"
	}
	now := c.cfg.Now()
	_, err := c.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.cfg.Table), Key: avKey(chainKey(id)),
		UpdateExpression:    aws.String("SET #st = :cancelled, #cancel = :now, #dat = :now, #r = :r"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND #st = :running"),
		ExpressionAttributeNames: map[string]string{"#pk": idempotency.AttrPK, "#st": idempotency.AttrState,
			"#cancel": attrCancelAt, "#dat": attrDone, "#r": idempotency.AttrReason},
		ExpressionAttributeValues: map[string]types.AttributeValue{":cancelled": avS(ChainCancelled), ":now": avN(now.UnixMilli()),
			":r": avS(reason), ":running": avS(ChainRunning)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		item, gerr := c.get(ctx, chainKey(id))
		if gerr != nil {
			return gerr
		}
		if item == nil {
			return fmt.Errorf("%w: chain %s", ErrNotFound, id)
		}
		return fmt.Errorf("%w: chain %s is %s", ErrFinished, id, getS(item, idempotency.AttrState))
	}
	if err != nil {
		return fmt.Errorf("batch: cancel chain %s: %w", id, err)
	}
	item, err := c.get(ctx, chainKey(id))
	if err != nil || item == nil {
		return err
	}
	step, err := c.get(ctx, stepKey(id, int(getN(item, attrCurrent))))
	if err != nil || step == nil {
		return err
	}
	kind, key, job := getS(step, attrKind), getS(step, idempotency.AttrKey), getS(step, attrJob)
	raw, err := c.get(ctx, c.cfg.Layout.ItemKey(kind, key, job))
	if err != nil {
		return err
	}
	if cancellable(raw, now) == childUnstarted {
		if err := c.status.Cancel(ctx, kind, key, now, reason); err != nil && !errors.Is(err, status.ErrSucceeded) {
			return fmt.Errorf("batch: cancel chain %s's step %s: %w", id, job, err)
		}
	}
	return nil
}
