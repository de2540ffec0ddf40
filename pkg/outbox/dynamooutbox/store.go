package dynamooutbox

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
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/outbox"
)

// Placeholders of the expressions below. The embedded emulator substitutes names and values by
// plain text replacement, so none may be a prefix of another (TestPlaceholdersArePrefixFree).
var names = map[string]string{
	"#pk": AttrPK, "#v": AttrVersion, "#st": AttrState, "#av": AttrAvailableAt, "#at": AttrAttempts,
	"#lb": AttrLockedBy, "#lu": AttrLockedUntil, "#le": AttrLastError, "#gpk": AttrGSIPK, "#exp": AttrExpires,
	"#ca": AttrCreatedAt,
}

const (
	// leaseFree: no live claim at :now (a locked_until that is not a number holds nothing).
	leaseFree = "(attribute_not_exists(#lu) OR NOT attribute_type(#lu, :ntype) OR #lu <= :now)"
	// claimSweep is the condition of a claim by Claim: pending, due, unclaimed, a known format.
	claimSweep = "#st = :pending AND #v <= :ver AND #av <= :now AND " + leaseFree
	// claimStream is the condition of a claim for a stream record: as claimSweep, but a job
	// never tried since its commit (available_at = created_at) is taken at once: the stream
	// brings it at its commit, and the writer's clock may be ahead of the relay's.
	claimStream = "#st = :pending AND #v <= :ver AND (#av <= :now OR #av = #ca) AND " + leaseFree
	// guard is the condition of every write-back: the writer's claim is still the item's.
	guard = "#st = :pending AND #lb = :owner AND #at = :att"
	// killFree and killOwn are the conditions of the write that makes an item whose relay state
	// cannot be read dead: pending, a known format, and unclaimed, or claimed by this claim.
	killFree = "#st = :pending AND #v <= :ver AND " + leaseFree
	killOwn  = "#st = :pending AND #v <= :ver AND #lb = :owner AND #lu = :until"
)

// stateAttrs are the attributes a relay keeps its state in: an item whose values of them are not
// integers cannot be claimed, counted or guarded, so it is made dead at once (stateProblem).
var stateAttrs = []string{AttrAvailableAt, AttrCreatedAt, AttrAttempts, AttrLockedUntil}

// stateProblem says why the relay state of item cannot be used ("" when it can), looking at the
// attributes given: available_at, created_at and attempts must be integers, locked_until an
// integer when present.
func stateProblem(item map[string]types.AttributeValue, attrs ...string) string {
	for _, name := range attrs {
		_, ok, err := getN(item, name)
		switch {
		case err != nil:
			return err.Error()
		case !ok && name != AttrLockedUntil:
			return "attribute " + name + " is missing"
		}
	}
	return ""
}

// claimMode says which condition a claim uses.
type claimMode int

const (
	modeSweep claimMode = iota
	modeStream
)

// candidate is an item a claim will try, in commit order.
type candidate struct {
	k   key
	ord string
	// bad, when set, says why the item's relay state cannot be read: the claim makes it dead
	// (kill) instead. item is the item as read, when it was (a stream image, a group read).
	bad  string
	item map[string]types.AttributeValue
}

// Claim implements [outbox.Store]: it reads the due entries from the by_state index (every
// shard, merged in commit order), claims each with a conditional UpdateItem (pending, due,
// unclaimed), and returns those it won. A FIFO group is read with one strongly consistent Query
// of its partition and claimed from its oldest unsent job on, stopping at the first it cannot
// claim. Entries never attempted are due only Config.SweepAfter after their commit. An item
// whose relay state is unreadable (available_at, created_at, attempts or locked_until not an
// integer: other code wrote it) is not returned: one conditional write makes it dead at once,
// with the reason as its last error, so it is listed and alarmed on and holds nothing up.
//
// Every entry's lease ends at c.Until, counted from c.Now, before the claim's first write: the
// claim's own time is spent from it. So a claim stops taking entries once a quarter of the lease
// (c.Until − c.Now) has passed since it began, and returns what it has: on a slow table a claim of
// many entries would otherwise spend its first entries' lease before the relay sends them (the
// relay checks what is left, outbox.RelayConfig.Lease, and would only release them).
func (o *Outbox) Claim(ctx context.Context, c outbox.Claim) ([]outbox.Entry, error) {
	started := time.Now()
	if c.Owner == "" || c.Max <= 0 || !c.Until.After(c.Now) {
		return nil, fmt.Errorf("%w: claim needs an owner, a positive Max and Until after Now", outbox.ErrInvalid)
	}
	cands, err := o.dueCandidates(ctx, c.Now, c.Max)
	if err != nil {
		return nil, err
	}
	entries, failures := o.claimCandidates(ctx, c, started, cands, modeSweep, c.Max)
	if len(failures) > 0 {
		var errs []error
		for _, err := range failures {
			errs = append(errs, err)
		}
		if len(entries) == 0 {
			return nil, fmt.Errorf("dynamooutbox: claim: %w", errors.Join(errs...))
		}
		o.cfg.Logger.WarnContext(ctx, "outbox claims failed; those entries are tried again later", "table", o.cfg.Table, "failed", len(errs), "error", errs[0])
	}
	return entries, nil
}

// due reports whether the sweeper may take an item now, by its available and creation times: a
// job never tried since its commit (available == created) waits SweepAfter for the stream. Every
// write that leaves a job pending moves available_at off created_at (a retry, a release, a
// deferral, Retry), so those are due as soon as available_at has passed.
func (o *Outbox) due(avail, created int64, now time.Time) bool {
	n := now.UnixMilli()
	if avail > n {
		return false
	}
	return avail != created || created <= now.Add(-o.cfg.SweepAfter).UnixMilli()
}

// dueCandidates reads up to max due entries per shard of the by_state index, merged by commit
// order.
func (o *Outbox) dueCandidates(ctx context.Context, now time.Time, max int) ([]candidate, error) {
	per := make([][]candidate, Shards)
	err := o.parallel(ctx, Shards, func(ctx context.Context, s int) error {
		in := &dynamodb.QueryInput{
			TableName:                aws.String(o.cfg.Table),
			IndexName:                aws.String(IndexByState),
			KeyConditionExpression:   aws.String("#gpk = :gpk"),
			FilterExpression:         aws.String("#av <= :now OR NOT attribute_type(#av, :ntype)"),
			ProjectionExpression:     aws.String("#pk, #sk, #ord, #av, #ca"),
			ExpressionAttributeNames: map[string]string{"#gpk": AttrGSIPK, "#av": AttrAvailableAt, "#pk": AttrPK, "#sk": AttrSK, "#ord": AttrOrd, "#ca": AttrCreatedAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":gpk": attrS(statePartition(string(outbox.StatePending), s)),
				":now": attrN(now.UnixMilli()), ":ntype": attrS("N"),
			},
			Limit: aws.Int32(int32(min(1000, 4*max+16))),
		}
		for {
			out, err := o.cfg.Client.Query(ctx, in, keepConnection)
			if err != nil {
				return fmt.Errorf("dynamooutbox: query %s shard %d: %w", IndexByState, s, err)
			}
			for _, it := range out.Items {
				pk, _ := getS(it, AttrPK)
				sk, _ := getS(it, AttrSK)
				ord, _ := getS(it, AttrOrd)
				if pk == "" || sk == "" {
					continue
				}
				if bad := stateProblem(it, AttrAvailableAt, AttrCreatedAt); bad != "" {
					per[s] = append(per[s], candidate{k: key{pk, sk}, ord: ord, bad: bad})
					continue
				}
				av, _, _ := getN(it, AttrAvailableAt)
				ca, _, _ := getN(it, AttrCreatedAt)
				if !o.due(av, ca, now) {
					continue
				}
				per[s] = append(per[s], candidate{k: key{pk, sk}, ord: ord})
			}
			if len(per[s]) >= max || len(out.LastEvaluatedKey) == 0 {
				return nil
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	})
	if err != nil {
		return nil, err
	}
	var all []candidate
	for _, p := range per {
		all = append(all, p...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ord < all[j].ord })
	return all, nil
}

// attempt is one claim to try: a standard job, or a job of a FIFO group (group ≥ 0) that may be
// claimed only after the attempts before it in its group succeeded.
type attempt struct {
	candidate
	group int // index into groups, or -1
}

// claimCandidates claims the earliest claimable candidates, at most c.Max, and at most perGroup
// of each FIFO group. It works in rounds:
// each round tries, in parallel, as many of the next attempts (in commit order) as are still
// wanted; the attempts of one FIFO group in a round run one after another, and a group's first
// refused claim drops the rest of that group (an item made dead instead does not: the group goes
// on behind it). failures maps the partition key of each item (or FIFO group) whose read or
// claim failed (not a refused condition) to the error.
//
// started is when the claim began (c.Now, on the monotonic clock): no attempt starts once a
// quarter of the lease has passed since.
func (o *Outbox) claimCandidates(ctx context.Context, c outbox.Claim, started time.Time, cands []candidate, mode claimMode, perGroup int) (entries []outbox.Entry, failures map[string]error) {
	// FIFO candidates stand for their group: read each group once, in order, from its head.
	type group struct {
		pk      string
		dropped bool
	}
	var groups []*group
	groupOf := map[string]int{}
	var attempts []attempt
	for _, cd := range cands {
		if !cd.k.fifo() {
			attempts = append(attempts, attempt{candidate: cd, group: -1})
			continue
		}
		if _, ok := groupOf[cd.k.pk]; !ok {
			groupOf[cd.k.pk] = len(groups)
			groups = append(groups, &group{pk: cd.k.pk})
		}
	}
	var (
		mu      sync.Mutex
		claimed []claimedEntry
	)
	failures = map[string]error{}
	fail := func(pk string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := failures[pk]; !ok {
			failures[pk] = err
		}
	}
	heads := make([][]candidate, len(groups))
	o.parallel(ctx, len(groups), func(ctx context.Context, g int) error {
		var err error
		if heads[g], err = o.groupHead(ctx, groups[g].pk, c.Now, min(c.Max, perGroup), mode); err != nil {
			fail(groups[g].pk, err)
		}
		return nil
	})
	for g, h := range heads {
		for _, cd := range h {
			attempts = append(attempts, attempt{candidate: cd, group: g})
		}
	}
	sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].ord < attempts[j].ord })

	// A claim that has taken a quarter of the lease stops: the entries it claimed first must still
	// be held, by more than half the lease, when the relay sends them after the claim returns.
	stopAt := started.Add(c.Until.Sub(c.Now) / 4)
	late := func() bool { return time.Now().After(stopAt) }
	next := 0
	for len(claimed) < c.Max && next < len(attempts) && ctx.Err() == nil && !late() {
		// The next round: as many live attempts as are still wanted, grouped into units that run
		// in parallel (a standard job, or the round's attempts of one group, in order).
		want := c.Max - len(claimed)
		var units [][]attempt
		unitOf := map[int]int{}
		for ; next < len(attempts) && want > 0; next++ {
			a := attempts[next]
			if a.group >= 0 && groups[a.group].dropped {
				continue
			}
			want--
			if a.group < 0 {
				units = append(units, []attempt{a})
				continue
			}
			u, ok := unitOf[a.group]
			if !ok {
				u = len(units)
				unitOf[a.group] = u
				units = append(units, nil)
			}
			units[u] = append(units[u], a)
		}
		o.parallel(ctx, len(units), func(ctx context.Context, u int) error {
			for _, a := range units[u] {
				if late() {
					return nil // left for the next pass, and the rest of its group with it
				}
				var e outbox.Entry
				var res claimResult
				var err error
				if a.bad != "" {
					res, err = o.kill(ctx, a.k, a.item, c, false)
				} else {
					e, res, err = o.claimOne(ctx, a.k, c, mode)
				}
				if err != nil {
					fail(a.k.pk, err)
				}
				switch res {
				case claimed1:
					mu.Lock()
					claimed = append(claimed, claimedEntry{e, a.ord})
					mu.Unlock()
					continue
				case killed:
					continue // dead now: it no longer holds its group back
				}
				if a.group >= 0 {
					mu.Lock()
					groups[a.group].dropped = true
					mu.Unlock()
				}
				return nil
			}
			return nil
		})
	}
	sort.Slice(claimed, func(i, j int) bool { return claimed[i].ord < claimed[j].ord })
	entries = make([]outbox.Entry, len(claimed))
	for i := range claimed {
		entries[i] = claimed[i].e
	}
	return entries, failures
}

// claimedEntry is a claimed entry with its commit-order key, to sort by.
type claimedEntry struct {
	e   outbox.Entry
	ord string
}

// groupHead reads a FIFO group's unsent jobs (strongly consistent, in commit order) and returns
// the ones that may be claimed now, from the oldest on, up to the first that may not (claimed
// elsewhere, or waiting for a retry): at most max.
func (o *Outbox) groupHead(ctx context.Context, pk string, now time.Time, max int, mode claimMode) ([]candidate, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(o.cfg.Table),
		ConsistentRead:           aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :pk"),
		FilterExpression:         aws.String("#st = :pending"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#st": AttrState},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": attrS(pk), ":pending": attrS(string(outbox.StatePending)),
		},
		Limit: aws.Int32(int32(min(1000, max+16))),
	}
	var out []candidate
	for {
		res, err := o.cfg.Client.Query(ctx, in, keepConnection)
		if err != nil {
			return nil, fmt.Errorf("dynamooutbox: read FIFO group %s: %w", pk, err)
		}
		for _, it := range res.Items {
			e, k, err := decodeItem(it)
			if err != nil {
				return out, nil // a newer format holds the group: leave the rest to a newer relay
			}
			free := e.LockedBy == "" || !now.Before(e.LockedUntil)
			if bad := stateProblem(it, stateAttrs...); bad != "" {
				if !free || len(out) == max {
					return out, nil
				}
				out = append(out, candidate{k: k, ord: k.sk, bad: bad, item: it})
				continue
			}
			var due bool
			if mode == modeStream {
				due = e.AvailableAt.Equal(e.CreatedAt) || !e.AvailableAt.After(now)
			} else {
				due = o.due(e.AvailableAt.UnixMilli(), e.CreatedAt.UnixMilli(), now)
			}
			if !free || !due || len(out) == max {
				return out, nil
			}
			out = append(out, candidate{k: k, ord: k.sk})
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// claimResult is what a claim of one item came to.
type claimResult int

const (
	refused  claimResult = iota // the condition refused it: claimed, not due, gone, sent or dead
	claimed1                    // claimed
	killed                      // its relay state was unreadable: it is dead now
)

// claimOne claims one item with a conditional UpdateItem. An item whose relay state turns out
// unreadable (DynamoDB refuses to add to a non-number attempts with a ValidationException; a
// claim that went through returns the state) is made dead instead (kill).
func (o *Outbox) claimOne(ctx context.Context, k key, c outbox.Claim, mode claimMode) (outbox.Entry, claimResult, error) {
	cond := claimSweep
	used := []string{"#st", "#v", "#av", "#lu", "#at", "#lb"}
	if mode == modeStream {
		cond = claimStream
		used = append(used, "#ca")
	}
	out, err := o.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(o.cfg.Table),
		Key:                      k.av(),
		UpdateExpression:         aws.String("SET #at = #at + :one, #lb = :owner, #lu = :until"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: pick(names, used...),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pending": attrS(string(outbox.StatePending)), ":ver": attrN(ItemVersion), ":now": attrN(c.Now.UnixMilli()),
			":one": attrN(1), ":owner": attrS(c.Owner), ":until": attrN(c.Until.UnixMilli()), ":ntype": attrS("N"),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return outbox.Entry{}, refused, nil
		}
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
			// Most likely attempts is not a number: read the item and see.
			res, kerr := o.kill(ctx, k, nil, c, false)
			if kerr == nil && res != refused {
				return outbox.Entry{}, res, nil
			}
			return outbox.Entry{}, refused, fmt.Errorf("claim %s/%s: %w", k.pk, k.sk, errors.Join(err, kerr))
		}
		return outbox.Entry{}, refused, fmt.Errorf("claim %s/%s: %w", k.pk, k.sk, err)
	}
	if bad := stateProblem(out.Attributes, stateAttrs...); bad != "" {
		res, err := o.kill(ctx, k, out.Attributes, c, true)
		return outbox.Entry{}, res, err
	}
	e, _, err := decodeItem(out.Attributes)
	if err != nil {
		// Claimed, but not readable as an entry at all: hand it back as corrupt under the key's id.
		e.Corrupt = err.Error()
	}
	created, _, _ := getN(out.Attributes, AttrCreatedAt)
	o.remember(e.ID(), claimRef{k: k, created: created})
	return e, claimed1, nil
}

// kill makes dead, with the reason as its last error, an item whose relay state cannot be read
// (stateProblem): it cannot be claimed, its attempts cannot be counted and a write-back cannot
// be guarded, so it is not relayed at all. item is the item as read (nil: read it now); own says
// that this claim (c) holds the item, else it must be unclaimed. It reports refused when the item
// turned out readable, or its condition refused the write.
func (o *Outbox) kill(ctx context.Context, k key, item map[string]types.AttributeValue, c outbox.Claim, own bool) (claimResult, error) {
	if item == nil {
		out, err := o.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(o.cfg.Table), Key: k.av(), ConsistentRead: aws.Bool(true)}, keepConnection)
		if err != nil {
			return refused, fmt.Errorf("read %s/%s: %w", k.pk, k.sk, err)
		}
		item = out.Item
	}
	bad := stateProblem(item, stateAttrs...)
	e, _, err := decodeItem(item)
	if bad == "" || err != nil {
		return refused, nil
	}
	reason := "the relay cannot use this item's state (" + bad + "): fix or delete the item; it was never sent"
	cond := killFree
	values := map[string]types.AttributeValue{
		":pending": attrS(string(outbox.StatePending)), ":ver": attrN(ItemVersion), ":dead": attrS(string(outbox.StateDead)),
		":err": attrS(reason), ":dgpk": attrS(statePartition(string(outbox.StateDead), shard(e.ID()))),
	}
	used := []string{"#st", "#v", "#lu", "#le", "#gpk", "#lb"}
	if own {
		cond = killOwn
		values[":owner"], values[":until"] = attrS(c.Owner), attrN(c.Until.UnixMilli())
	} else {
		values[":now"], values[":ntype"] = attrN(c.Now.UnixMilli()), attrS("N")
	}
	_, err = o.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(o.cfg.Table),
		Key:                       k.av(),
		UpdateExpression:          aws.String("SET #st = :dead, #le = :err, #gpk = :dgpk REMOVE #lb, #lu"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  pick(names, used...),
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return refused, nil
	case err != nil:
		return refused, fmt.Errorf("make %s/%s dead: %w", k.pk, k.sk, err)
	}
	o.cfg.Logger.ErrorContext(ctx, "outbox item is dead: its relay state cannot be read", "table", o.cfg.Table,
		"job_id", e.ID(), "kind", e.Message.Kind, "error", bad)
	return killed, nil
}

// claimRef is what the Outbox remembers of an entry it claimed, until its write-back.
type claimRef struct {
	k       key
	created int64 // created_at, unix ms
}

func (o *Outbox) remember(id string, r claimRef) {
	o.keysMu.Lock()
	defer o.keysMu.Unlock()
	if len(o.keys) > 100_000 { // entries claimed and never completed (a pass that failed): drop them
		clear(o.keys)
	}
	o.keys[id] = r
}

// keyFor returns the key of an entry: remembered from its claim, derived from the id (standard
// queues), or looked up in the by_id index (FIFO). ok is false when there is no such entry.
func (o *Outbox) keyFor(ctx context.Context, id string, forget bool) (key, bool, error) {
	r, _, err := o.refFor(ctx, id, forget)
	return r.k, true, err
}

// refFor is keyFor with the entry's creation time when this Outbox claimed it (remembered is
// false otherwise, and created 0).
func (o *Outbox) refFor(ctx context.Context, id string, forget bool) (ref claimRef, remembered bool, err error) {
	o.keysMu.Lock()
	r, ok := o.keys[id]
	if ok && forget {
		delete(o.keys, id)
	}
	o.keysMu.Unlock()
	if ok {
		return r, true, nil
	}
	out, err := o.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(o.cfg.Table),
		IndexName:                 aws.String(IndexByID),
		KeyConditionExpression:    aws.String("#id = :id"),
		ExpressionAttributeNames:  map[string]string{"#id": AttrJobID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": attrS(id)},
	}, keepConnection)
	if err != nil {
		return claimRef{}, false, fmt.Errorf("dynamooutbox: look up job %s in %s: %w", id, IndexByID, err)
	}
	for _, it := range out.Items {
		pk, _ := getS(it, AttrPK)
		sk, _ := getS(it, AttrSK)
		if pk != "" && sk != "" {
			return claimRef{k: key{pk, sk}}, false, nil
		}
	}
	return claimRef{k: key{pk: standardPrefix + id, sk: standardSK}}, false, nil
}

// Complete implements [outbox.Store]: one conditional write per outcome, guarded by the claim
// (pending, locked by owner, attempts as claimed): a DeleteItem for a sent entry (or an
// UpdateItem that marks it sent, with Config.KeepSent), an UpdateItem otherwise. Writes refused
// by their guard are skipped.
func (o *Outbox) Complete(ctx context.Context, owner string, outcomes []outbox.Outcome) error {
	now := o.cfg.Now()
	var mu sync.Mutex
	var errs []error
	err := o.parallel(ctx, len(outcomes), func(ctx context.Context, i int) error {
		oc := outcomes[i]
		ref, remembered, err := o.refFor(ctx, oc.ID, true)
		if err == nil {
			if !remembered {
				ref.created = -1
			}
			err = o.completeOne(ctx, ref, owner, oc, now)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// completeOne writes back one outcome. ref.created is the entry's created_at as claimed (-1 when
// not known).
func (o *Outbox) completeOne(ctx context.Context, ref claimRef, owner string, oc outbox.Outcome, now time.Time) error {
	k := ref.k
	values := map[string]types.AttributeValue{
		":pending": attrS(string(outbox.StatePending)), ":owner": attrS(owner), ":att": attrN(int64(oc.Attempts)),
	}
	var err error
	if oc.Sent && o.cfg.KeepSent == 0 {
		_, err = o.deleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(o.cfg.Table), Key: k.av(), ConditionExpression: aws.String(guard),
			ExpressionAttributeNames: pick(names, "#st", "#lb", "#at"), ExpressionAttributeValues: values,
		})
	} else {
		var update string
		used := []string{"#st", "#lb", "#at", "#lu"}
		switch {
		case oc.Sent:
			update = "SET #st = :sent, #exp = :exp REMOVE #gpk, #lb, #lu"
			values[":sent"] = attrS(string(outbox.StateSent))
			values[":exp"] = attrN(expSeconds(now.Add(o.cfg.KeepSent)))
			used = append(used, "#exp", "#gpk")
		case oc.Release:
			// Available at AvailableAt (zero: now), and never at created_at itself, which would
			// make the sweeper take it for a job not tried yet and leave it SweepAfter to the
			// stream (due).
			av := oc.AvailableAt
			if av.IsZero() {
				av = now
			}
			ms := av.UnixMilli()
			if ref.created >= 0 && ms <= ref.created {
				ms = ref.created + 1
			}
			update = "SET #at = #at - :one, #av = :av REMOVE #lb, #lu"
			values[":one"], values[":av"] = attrN(1), attrN(ms)
			used = append(used, "#av")
		case oc.Dead:
			id := oc.ID
			update = "SET #st = :dead, #le = :err, #gpk = :dgpk REMOVE #lb, #lu"
			values[":dead"] = attrS(string(outbox.StateDead))
			values[":err"] = attrS(oc.Error)
			values[":dgpk"] = attrS(statePartition(string(outbox.StateDead), shard(id)))
			used = append(used, "#le", "#gpk")
		default:
			update = "SET #av = :av, #le = :err REMOVE #lb, #lu"
			values[":av"] = attrN(oc.AvailableAt.UnixMilli())
			values[":err"] = attrS(oc.Error)
			used = append(used, "#av", "#le")
		}
		_, err = o.updateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(o.cfg.Table), Key: k.av(), UpdateExpression: aws.String(update),
			ConditionExpression: aws.String(guard), ExpressionAttributeNames: pick(names, used...),
			ExpressionAttributeValues: values,
		})
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // the claim is no longer ours (taken over, or gone): not ours to write
	}
	if err != nil {
		return fmt.Errorf("dynamooutbox: write back job %s: %w", oc.ID, err)
	}
	return nil
}

func expSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// Get implements [outbox.Inspector] with a strongly consistent read (a FIFO job is found
// through the by_id index first, which lags writes by up to about a second).
func (o *Outbox) Get(ctx context.Context, id string) (outbox.Entry, error) {
	if id == "" {
		return outbox.Entry{}, fmt.Errorf("%w: empty id", outbox.ErrNotFound)
	}
	k, _, err := o.keyFor(ctx, id, false)
	if err != nil {
		return outbox.Entry{}, err
	}
	out, err := o.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(o.cfg.Table), Key: k.av(), ConsistentRead: aws.Bool(true)}, keepConnection)
	if err != nil {
		return outbox.Entry{}, fmt.Errorf("dynamooutbox: get job %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return outbox.Entry{}, fmt.Errorf("%w: %q", outbox.ErrNotFound, id)
	}
	e, _, err := decodeItem(out.Item)
	if err != nil {
		return outbox.Entry{}, fmt.Errorf("dynamooutbox: job %s: %w", id, err)
	}
	return e, nil
}

// Retry implements [outbox.Inspector]: one conditional UpdateItem makes the entry pending, due
// now, with no attempts and no claim, unless a relay's claim on it is live (by Config.Now): then
// it changes nothing and returns an error wrapping outbox.ErrClaimed that names the claim.
func (o *Outbox) Retry(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty id", outbox.ErrNotFound)
	}
	k, _, err := o.keyFor(ctx, id, false)
	if err != nil {
		return err
	}
	now := o.cfg.Now()
	_, err = o.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(o.cfg.Table),
		Key:                      k.av(),
		UpdateExpression:         aws.String("SET #st = :pending, #at = :zero, #av = :now, #gpk = :pgpk REMOVE #lb, #lu"),
		ConditionExpression:      aws.String("attribute_exists(#pk) AND #st <> :sent AND (#st <> :pending OR " + leaseFree + ")"),
		ExpressionAttributeNames: pick(names, "#pk", "#st", "#at", "#av", "#gpk", "#lb", "#lu"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pending": attrS(string(outbox.StatePending)), ":zero": attrN(0), ":now": attrN(now.UnixMilli()),
			":pgpk": attrS(statePartition(string(outbox.StatePending), shard(id))), ":sent": attrS(string(outbox.StateSent)),
			":ntype": attrS("N"),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Gone or sent, or claimed: read it to say which.
		e, gerr := o.Get(ctx, id)
		switch {
		case gerr == nil && e.State == outbox.StatePending && e.Claimed(now):
			return fmt.Errorf("%w: job %s is claimed by relay %s until %s: it is being sent now; retry it after that if it is still pending",
				outbox.ErrClaimed, id, e.LockedBy, e.LockedUntil.Format(time.RFC3339))
		case gerr == nil && e.State != outbox.StateSent:
			return fmt.Errorf("dynamooutbox: retry job %s: it changed meanwhile (%s); try again", id, e.State)
		}
		return fmt.Errorf("%w: %q", outbox.ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("dynamooutbox: retry job %s: %w", id, err)
	}
	return nil
}

// CountDead returns how many dead jobs the outbox holds: one Query with Select COUNT per shard
// of the by_state index (paged), which reads index keys only. The relay function publishes it
// after every sweep as the gauge OutboxDeadJobs, on which the stack's alarm fires.
func (o *Outbox) CountDead(ctx context.Context) (int, error) {
	counts := make([]int, Shards)
	err := o.parallel(ctx, Shards, func(ctx context.Context, s int) error {
		in := &dynamodb.QueryInput{
			TableName: aws.String(o.cfg.Table), IndexName: aws.String(IndexByState),
			KeyConditionExpression:    aws.String("#gpk = :gpk"),
			ExpressionAttributeNames:  map[string]string{"#gpk": AttrGSIPK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":gpk": attrS(statePartition(string(outbox.StateDead), s))},
			Select:                    types.SelectCount,
		}
		for {
			out, err := o.cfg.Client.Query(ctx, in, keepConnection)
			if err != nil {
				return fmt.Errorf("dynamooutbox: count dead jobs, shard %d: %w", s, err)
			}
			counts[s] += int(out.Count)
			if len(out.LastEvaluatedKey) == 0 {
				return nil
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// List implements [outbox.Inspector]: it queries the state's shards of the by_state index (in
// commit order), merges them, and reads the page's items (strongly consistent, BatchGetItem);
// entries that left the state meanwhile are skipped. The page token is the last entry's commit
// order key.
func (o *Outbox) List(ctx context.Context, q outbox.ListQuery) (outbox.Page, error) {
	if q.State != outbox.StatePending && q.State != outbox.StateDead {
		return outbox.Page{}, fmt.Errorf("%w: list state %q: want %q or %q", outbox.ErrInvalid, q.State, outbox.StatePending, outbox.StateDead)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 100) // one BatchGetItem
	if q.PageToken != "" && !validOrd(q.PageToken) {
		return outbox.Page{}, fmt.Errorf("%w: page token %q is not one List returned", outbox.ErrInvalid, q.PageToken)
	}
	per := make([][]candidate, Shards)
	more := make([]bool, Shards)
	err := o.parallel(ctx, Shards, func(ctx context.Context, s int) error {
		cond := "#gpk = :gpk"
		values := map[string]types.AttributeValue{":gpk": attrS(statePartition(string(q.State), s))}
		if q.PageToken != "" {
			cond += " AND #ord > :tok"
			values[":tok"] = attrS(q.PageToken)
		}
		out, err := o.cfg.Client.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(o.cfg.Table), IndexName: aws.String(IndexByState),
			KeyConditionExpression:    aws.String(cond),
			ProjectionExpression:      aws.String("#pk, #sk, #ord"),
			ExpressionAttributeNames:  map[string]string{"#gpk": AttrGSIPK, "#ord": AttrOrd, "#pk": AttrPK, "#sk": AttrSK},
			ExpressionAttributeValues: values,
			Limit:                     aws.Int32(int32(limit)),
		}, keepConnection)
		if err != nil {
			return fmt.Errorf("dynamooutbox: list %s shard %d: %w", q.State, s, err)
		}
		for _, it := range out.Items {
			pk, _ := getS(it, AttrPK)
			sk, _ := getS(it, AttrSK)
			ord, _ := getS(it, AttrOrd)
			if pk != "" && sk != "" && ord != "" {
				per[s] = append(per[s], candidate{k: key{pk, sk}, ord: ord})
			}
		}
		more[s] = len(out.LastEvaluatedKey) > 0
		return nil
	})
	if err != nil {
		return outbox.Page{}, err
	}
	var all []candidate
	anyMore := false
	for s := range per {
		all = append(all, per[s]...)
		anyMore = anyMore || more[s]
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ord < all[j].ord })
	var p outbox.Page
	if len(all) > limit {
		all, anyMore = all[:limit], true
	}
	if len(all) == 0 {
		return p, nil
	}
	items, err := o.batchGet(ctx, all)
	if err != nil {
		return outbox.Page{}, err
	}
	for _, c := range all {
		it, ok := items[c.k]
		if !ok {
			continue
		}
		e, _, err := decodeItem(it)
		if err != nil || e.State != q.State {
			continue
		}
		p.Entries = append(p.Entries, e)
	}
	if anyMore {
		p.NextPageToken = all[len(all)-1].ord
	}
	return p, nil
}

// maxSortKeyBytes is DynamoDB's limit on a sort key (ord is by_state's): a longer page token is
// no entry's, and DynamoDB would answer the query with a ValidationException.
const maxSortKeyBytes = 1024

// validOrd reports whether s has the shape of a commit-order key.
func validOrd(s string) bool {
	if len(s) < 21 || len(s) > maxSortKeyBytes || s[19] != '#' {
		return false
	}
	_, err := strconv.ParseUint(s[:19], 10, 64)
	return err == nil
}

// batchGet reads items by key, strongly consistent, retrying unprocessed keys.
func (o *Outbox) batchGet(ctx context.Context, cands []candidate) (map[key]map[string]types.AttributeValue, error) {
	keys := make([]map[string]types.AttributeValue, len(cands))
	for i, c := range cands {
		keys[i] = c.k.av()
	}
	got := map[key]map[string]types.AttributeValue{}
	for round := 0; len(keys) > 0; round++ {
		if round > 0 {
			if err := sleep(ctx, time.Duration(round)*50*time.Millisecond); err != nil {
				return nil, err
			}
		}
		if round == 8 {
			return nil, fmt.Errorf("dynamooutbox: %d items still unprocessed after %d BatchGetItem calls", len(keys), round)
		}
		out, err := o.cfg.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			o.cfg.Table: {Keys: keys, ConsistentRead: aws.Bool(true)},
		}}, keepConnection)
		if err != nil {
			return nil, fmt.Errorf("dynamooutbox: read %d items: %w", len(keys), err)
		}
		for _, it := range out.Responses[o.cfg.Table] {
			pk, _ := getS(it, AttrPK)
			sk, _ := getS(it, AttrSK)
			got[key{pk, sk}] = it
		}
		keys = out.UnprocessedKeys[o.cfg.Table].Keys
	}
	return got, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parallel runs f(0…n-1) with at most Config.Concurrency at once and returns the first error.
func (o *Outbox) parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	if n == 1 {
		return f(ctx, 0)
	}
	sem := make(chan struct{}, o.cfg.Concurrency)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	return first
}

// pick returns the placeholders asked for with their names.
func pick(all map[string]string, placeholders ...string) map[string]string {
	out := make(map[string]string, len(placeholders))
	for _, p := range placeholders {
		out[p] = all[p]
	}
	return out
}

// updateItem runs an UpdateItem, sent again while a transaction conflict refuses it: the write
// changed nothing (internal/ddbretry).
func (o *Outbox) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return o.cfg.Client.UpdateItem(ctx, in, keepConnection)
	})
}

// deleteItem runs a DeleteItem, sent again while a transaction conflict refuses it (updateItem).
func (o *Outbox) deleteItem(ctx context.Context, in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.DeleteItemOutput, error) {
		return o.cfg.Client.DeleteItem(ctx, in, keepConnection)
	})
}

// keepConnection is passed with every DynamoDB call: without it the SDK may lose a response
// under a race in its HTTP layer and repeat the call, and a repeated conditional write (a claim,
// a write-back) is refused by its own first attempt: a claim lost that way stays claimed, unsent,
// for a whole lease, and holds its FIFO group (internal/sdkhttp).
func keepConnection(o *dynamodb.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}
