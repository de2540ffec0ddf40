package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// The items of flow control in the job table (docs/TABLE.md, "Flow control"). Their partition
// keys start with '$', which no job item's key can: a job's item is kind#key (a kind starts with
// a lower-case letter or a digit) or #id.
const (
	// LimitKeyPrefix starts the partition key of a concurrency limit's item:
	// "$limit#" + name + "#" + key.
	LimitKeyPrefix = "$limit#"
	// RateKeyPrefix starts the partition key of a rate limit's item: "$rate#" + name + "#" + key.
	RateKeyPrefix = "$rate#"
	// PauseKey is the partition key of the one item that lists the paused kinds and queues.
	PauseKey = "$pause"

	// IndexPartitionLimits and IndexPartitionRates are the by_status index partitions
	// (idempotency.AttrGSI1PK) that list the limit items: every item enters its partition once,
	// when it is created, and leaves it when it expires. No job state has these names.
	IndexPartitionLimits = "$limit"
	IndexPartitionRates  = "$rate"
)

// Attributes of the flow items (beside pk, exp, gsi1pk and gsi1sk, which they share with job
// items). None of them is a job item's attribute, so job listings and table statistics, which
// read kind and st, never count a flow item.
const (
	attrHolders  = "n"     // N: concurrency item: how many h_ attributes it has
	attrLimit    = "lim"   // N: the limit (concurrency), or the jobs per period (rate)
	attrTAT      = "tat"   // N: rate item: the theoretical arrival time, unix microseconds
	attrPeriod   = "per"   // N: rate item: the period, milliseconds
	attrBurst    = "burst" // N: rate item: the burst
	attrKey      = "fkey"  // S: the key, when the partition key holds its hash instead
	holderPrefix = "h_"    // N: one per holder: lease end in unix ms, a random fraction as nonce
)

// maxKeyBytes bounds the key kept as is in a partition key; a longer key is hashed (and kept in
// attrKey for listings).
const maxKeyBytes = 512

// MaxLimit is the largest concurrency limit: every holder is an attribute of the limit's item, so
// the item (and each write's cost, one write unit per KB) grows with the limit; see docs/FLOW.md.
const MaxLimit = 1000

// DynamoDBAPI is the part of the DynamoDB client Table uses.
type DynamoDBAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// TableConfig configures NewTable.
type TableConfig struct {
	// Client talks to DynamoDB. Required.
	Client DynamoDBAPI
	// Table is the job table (idempotency.TableInput). Required.
	Table string
	// Rand returns a uniform int64 in [0, n): the nonce of each slot lease. Defaults to
	// math/rand/v2's Int64N.
	Rand func(n int64) int64
}

// Table keeps flow control's state in the job table: concurrency slots, rate buckets and pauses.
// The worker's middleware, the CLI and the console use it. It is safe for concurrent use.
//
// Every write is one conditional UpdateItem. A refused write is explained from the item
// DynamoDB returns with the refusal (ReturnValuesOnConditionCheckFailure ALL_OLD), or, from a
// backend that does not return it, from a strongly consistent GetItem.
type Table struct {
	client DynamoDBAPI
	table  string
	rand   func(n int64) int64
}

// NewTable validates cfg and returns the table.
func NewTable(cfg TableConfig) (*Table, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: TableConfig.Client is required", ErrConfig)
	}
	if cfg.Table == "" {
		return nil, fmt.Errorf("%w: TableConfig.Table is required", ErrConfig)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Int64N
	}
	return &Table{client: cfg.Client, table: cfg.Table, rand: cfg.Rand}, nil
}

// Name returns the table's name.
func (t *Table) Name() string { return t.table }

// ErrSlotLost is returned by RenewSlot when the slot is no longer the caller's: its lease ended
// and another job's acquisition removed it.
var ErrSlotLost = errors.New("flow: the slot's lease was lost")

// limitPK and ratePK return the partition keys of a limit's item.
func limitPK(name, key string) string { return LimitKeyPrefix + name + "#" + keyPart(key) }
func ratePK(name, key string) string  { return RateKeyPrefix + name + "#" + keyPart(key) }

func keyPart(key string) string {
	if len(key) <= maxKeyBytes {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// plainID matches job ids used as holder attribute names as they are (ULIDs do).
var plainID = regexp.MustCompile(`^[0-9A-Za-z]{1,64}$`)

// holderAttr returns the attribute that records a job's slot: "h_" + its id when the id is plain
// (as jobs.NewID's are), else "h_x" + a hash of it. Two deliveries of one job (duplicates) name
// the same holder, so the second is refused while the first holds the slot.
func holderAttr(jobID string) string {
	if plainID.MatchString(jobID) {
		return holderPrefix + jobID
	}
	sum := sha256.Sum256([]byte(jobID))
	return holderPrefix + "x" + hex.EncodeToString(sum[:16])
}

// holderJob returns the job id a holder attribute names ("" for a hashed id).
func holderJob(attr string) string {
	id := strings.TrimPrefix(attr, holderPrefix)
	if len(id) == 33 && id[0] == 'x' {
		if _, err := hex.DecodeString(id[1:]); err == nil {
			return ""
		}
	}
	return id
}

// leaseValue encodes a lease end for a holder attribute: unix milliseconds, and a random
// fraction that makes each acquisition's value its own, so that a late release or renewal of a
// slot that was pruned and taken again by another delivery of the same job does not touch it.
func (t *Table) leaseValue(until time.Time) string {
	return strconv.FormatInt(until.UnixMilli(), 10) + "." + fmt.Sprintf("%04d", 1+t.rand(9999))
}

// leaseMs reads a holder attribute's lease end (unix ms).
func leaseMs(v string) (int64, bool) {
	if i := strings.IndexByte(v, '.'); i >= 0 {
		v = v[:i]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// itemTTL is how long an item is kept after its last lease or due token: a day.
const itemTTL = 24 * time.Hour

// SlotRequest asks for a concurrency slot.
type SlotRequest struct {
	// Name and Key name the limit's item (Key "" for a limit of the whole name).
	Name, Key string
	// Limit is the most holders at once.
	Limit int
	// JobID names the holder.
	JobID string
	// LeaseUntil is when the slot returns by itself if it is neither released nor renewed.
	LeaseUntil time.Time
	// Now is the time holders' leases are compared with.
	Now time.Time
}

// Slot is a concurrency slot held by a job.
type Slot struct {
	// Name and Key name the limit's item.
	Name, Key string
	// LeaseUntil is the end of the slot's lease.
	LeaseUntil time.Time

	attr, value string // the holder attribute and its exact value
}

// SlotResult is the answer to AcquireSlot.
type SlotResult struct {
	// Acquired reports that the slot is the job's: Slot holds it.
	Acquired bool
	Slot     Slot
	// When refused: Holders is the number of holders found, EarliestEnd the earliest end of
	// their leases (when a slot will come back at the latest, unless renewed).
	Holders     int
	EarliestEnd time.Time
	// HeldUntil, when set, says that this job already holds a live slot of the limit (another
	// delivery of it is running) until then.
	HeldUntil time.Time
	// Pruned counts the expired holders this acquisition removed (holders that died).
	Pruned int
	// Writes counts the write requests made (refused ones included).
	Writes int
}

// maxSlotRounds bounds the writes of one acquisition when the item keeps changing under it.
const maxSlotRounds = 4

// maxPrune bounds the expired holders removed by one write.
const maxPrune = 50

// AcquireSlot takes a slot of the limit for the job, if the limit has one free: one conditional
// UpdateItem that adds the job's holder attribute and counts it, on the condition that the job
// holds none and fewer than Limit are held. When that is refused and the item shows holders whose
// lease has ended (their jobs died), a second conditional write removes them (each on the
// condition that its lease is the one read) and adds the job's. A refused acquisition returns
// Acquired false with what was found; only a failure of DynamoDB is an error.
func (t *Table) AcquireSlot(ctx context.Context, req SlotRequest) (SlotResult, error) {
	if req.Limit < 1 {
		return SlotResult{}, fmt.Errorf("%w: limit %d", ErrConfig, req.Limit)
	}
	pk := limitPK(req.Name, req.Key)
	attr := holderAttr(req.JobID)
	nowMs := req.Now.UnixMilli()
	var res SlotResult
	var expired []heldSlot // from the last refusal: holders to prune
	ownStale := ""         // the job's own expired holder value, when found
	for round := 0; round < maxSlotRounds; round++ {
		value := t.leaseValue(req.LeaseUntil)
		e := newExpr()
		u := &update{}
		h := e.n(attr)
		u.set = append(u.set,
			h+" = "+e.v(avNs(value)),
			e.n(attrLimit)+" = "+e.v(avN(int64(req.Limit))),
			e.n(idempotency.AttrExpires)+" = "+e.v(avN(req.LeaseUntil.Add(itemTTL).Unix())),
			e.n(idempotency.AttrGSI1PK)+" = if_not_exists("+e.n(idempotency.AttrGSI1PK)+", "+e.v(avS(IndexPartitionLimits))+")",
			e.n(idempotency.AttrGSI1SK)+" = if_not_exists("+e.n(idempotency.AttrGSI1SK)+", "+e.v(avN(nowMs))+")",
		)
		if req.Key != keyPart(req.Key) {
			u.set = append(u.set, e.n(attrKey)+" = "+e.v(avS(req.Key)))
		}
		var cond []string
		if ownStale != "" {
			cond = append(cond, h+" = "+e.v(avNs(ownStale)))
		} else {
			cond = append(cond, "attribute_not_exists("+h+")")
		}
		removed := 0
		for _, x := range expired {
			if x.attr == attr {
				continue
			}
			p := e.n(x.attr)
			u.remove = append(u.remove, p)
			cond = append(cond, p+" = "+e.v(avNs(x.value)))
			removed++
		}
		// After the write the item holds n - removed (+1 unless the job's own stale holder is
		// replaced) holders: at most Limit.
		delta := 1 - removed
		room := req.Limit + removed
		if ownStale != "" {
			delta--
			room++
		}
		n := e.n(attrHolders)
		cond = append(cond, "(attribute_not_exists("+n+") OR "+n+" < "+e.v(avN(int64(room)))+")")
		if delta != 0 {
			u.add = append(u.add, n+" "+e.v(avN(int64(delta))))
		} else {
			u.set = append(u.set, n+" = if_not_exists("+n+", "+e.v(avN(0))+")")
		}
		res.Writes++
		_, err := t.update(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(t.table),
			Key:                                 map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)},
			UpdateExpression:                    aws.String(u.String()),
			ConditionExpression:                 aws.String(strings.Join(cond, " AND ")),
			ExpressionAttributeNames:            e.names,
			ExpressionAttributeValues:           e.valuesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, keepConnection)
		if err == nil {
			res.Acquired, res.Pruned = true, removed
			if ownStale != "" {
				res.Pruned++
			}
			res.Slot = Slot{Name: req.Name, Key: req.Key, LeaseUntil: time.UnixMilli(req.LeaseUntil.UnixMilli()), attr: attr, value: value}
			return res, nil
		}
		item, found, err := t.refusal(ctx, pk, err)
		if err != nil {
			return res, fmt.Errorf("flow: acquire a slot of %s: %w", pk, err)
		}
		if !found {
			expired, ownStale = nil, ""
			continue // deleted meanwhile: start afresh
		}
		holders := readHolders(item)
		expired, ownStale = expired[:0], ""
		res.Holders, res.EarliestEnd, res.HeldUntil = 0, time.Time{}, time.Time{}
		for _, x := range holders {
			if x.leaseMs <= nowMs {
				if x.attr == attr {
					ownStale = x.value
				} else if len(expired) < maxPrune {
					expired = append(expired, x)
				}
				continue
			}
			if x.attr == attr {
				res.HeldUntil = time.UnixMilli(x.leaseMs)
			}
			res.Holders++
			if end := time.UnixMilli(x.leaseMs); res.EarliestEnd.IsZero() || end.Before(res.EarliestEnd) {
				res.EarliestEnd = end
			}
		}
		if !res.HeldUntil.IsZero() {
			return res, nil // another delivery of this job holds a slot
		}
		count, _ := getInt(item, attrHolders)
		if len(expired) == 0 && ownStale == "" && int(count) >= req.Limit {
			return res, nil // full
		}
		// Expired holders to prune, or room after all (changed since the write): try again.
	}
	return res, nil // contended: the caller defers briefly
}

// heldSlot is a holder attribute as read.
type heldSlot struct {
	attr, value string
	leaseMs     int64
}

func readHolders(item map[string]types.AttributeValue) []heldSlot {
	var out []heldSlot
	for name, av := range item {
		if !strings.HasPrefix(name, holderPrefix) {
			continue
		}
		v, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		ms, ok := leaseMs(v.Value)
		if !ok {
			continue
		}
		out = append(out, heldSlot{attr: name, value: v.Value, leaseMs: ms})
	}
	return out
}

// ReleaseSlot gives the slot back: one UpdateItem that removes the holder attribute and counts
// it out, on the condition that it still holds this acquisition's lease. A slot that is no longer
// the caller's (its lease ended and another acquisition pruned it) is left alone, and that is not
// an error.
func (t *Table) ReleaseSlot(ctx context.Context, s Slot) error {
	pk := limitPK(s.Name, s.Key)
	e := newExpr()
	h := e.n(s.attr)
	upd := "REMOVE " + h + " ADD " + e.n(attrHolders) + " " + e.v(avN(-1))
	_, err := t.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)},
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(h + " = " + e.v(avNs(s.value))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	}, keepConnection)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("flow: release a slot of %s: %w", pk, err)
	}
	return nil
}

// PeekSlot reads a limit's item, eventually consistent (half a read unit), and reports whether an
// acquisition could succeed now: fewer than limit live holders, or an expired one to remove. A
// job waiting for a slot (MaxHold) polls with it, so that a slot released by another process
// is taken soon without a refused write per poll.
func (t *Table) PeekSlot(ctx context.Context, name, key string, limit int, now time.Time) (bool, error) {
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.table),
		Key:       map[string]types.AttributeValue{idempotency.AttrPK: avS(limitPK(name, key))},
	}, keepConnection)
	if err != nil {
		return false, fmt.Errorf("flow: read the slots of %s: %w", limitPK(name, key), err)
	}
	live := 0
	for _, h := range readHolders(out.Item) {
		if h.leaseMs <= now.UnixMilli() {
			return true, nil
		}
		live++
	}
	return live < limit, nil
}

// HandoffSlot passes a held slot straight to another job waiting for the same limit in this
// process, instead of a release and that job's acquisition: one UpdateItem that replaces the
// holder attribute, on the condition that the slot is still the caller's and the other job holds
// none. It returns the other job's slot, or ErrSlotLost when the condition failed (then release
// normally and let the waiter acquire).
func (t *Table) HandoffSlot(ctx context.Context, s Slot, jobID string, until time.Time) (Slot, error) {
	attr := holderAttr(jobID)
	if attr == s.attr {
		return s, ErrSlotLost // the same job (a duplicate delivery): no handoff
	}
	pk := limitPK(s.Name, s.Key)
	value := t.leaseValue(until)
	e := newExpr()
	old, h := e.n(s.attr), e.n(attr)
	upd := "SET " + h + " = " + e.v(avNs(value)) + ", " + e.n(idempotency.AttrExpires) + " = " + e.v(avN(until.Add(itemTTL).Unix())) +
		" REMOVE " + old
	_, err := t.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)},
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(old + " = " + e.v(avNs(s.value)) + " AND attribute_not_exists(" + h + ")"),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	}, keepConnection)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return s, ErrSlotLost
	}
	if err != nil {
		return s, fmt.Errorf("flow: hand a slot of %s over: %w", pk, err)
	}
	return Slot{Name: s.Name, Key: s.Key, LeaseUntil: time.UnixMilli(until.UnixMilli()), attr: attr, value: value}, nil
}

// RenewSlot extends the slot's lease to until: one UpdateItem on the condition that the holder
// still holds the lease read (or last renewed). It returns the renewed slot, or ErrSlotLost.
func (t *Table) RenewSlot(ctx context.Context, s Slot, until time.Time) (Slot, error) {
	pk := limitPK(s.Name, s.Key)
	value := t.leaseValue(until)
	e := newExpr()
	h := e.n(s.attr)
	upd := "SET " + h + " = " + e.v(avNs(value)) + ", " + e.n(idempotency.AttrExpires) + " = " + e.v(avN(until.Add(itemTTL).Unix()))
	_, err := t.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)},
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(h + " = " + e.v(avNs(s.value))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	}, keepConnection)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return s, ErrSlotLost
	}
	if err != nil {
		return s, fmt.Errorf("flow: renew a slot of %s: %w", pk, err)
	}
	s.value, s.LeaseUntil = value, time.UnixMilli(until.UnixMilli())
	return s, nil
}

// TokenRequest asks for a token of a rate limit.
type TokenRequest struct {
	// Name and Key name the limit's item.
	Name, Key string
	// Limit jobs per Period, with bursts of Burst: a token is due every Period/Limit.
	Limit  int
	Period time.Duration
	Burst  int
	// Now is the time of the request.
	Now time.Time
	// Hint is the bucket's time (TAT) this process saw last, or zero: it chooses the first
	// write. Hints only save writes; a wrong one costs one refused write.
	Hint time.Time
	// Hold, when above 0, reserves a token due within Hold: the grant's StartAt says when the
	// job may start (the caller waits until then). Reservations fill the gaps that SQS's whole
	// seconds of visibility would leave between deferred jobs' returns.
	Hold time.Duration
}

// TokenResult is the answer to TakeToken.
type TokenResult struct {
	// Granted reports that the job may start, at StartAt (now, or a reserved time within Hold).
	Granted bool
	StartAt time.Time
	// TAT is the bucket's time as last seen (after the grant, or as found): it only grows, so it
	// is a safe hint for later requests.
	TAT time.Time
	// Wait is, when refused, how long until the next token is due.
	Wait time.Duration
	// Writes counts the write requests made (refused ones included).
	Writes int
}

// interval returns the time between two tokens, rounded up to whole microseconds (so that the
// rate is never above the limit).
func interval(limit int, period time.Duration) int64 {
	us := period.Microseconds()
	return (us + int64(limit) - 1) / int64(limit)
}

// TakeToken takes a token of the rate limit if one is due, by the generic cell rate algorithm on
// one attribute: tat, the bucket's theoretical arrival time. A token is due when
// tat ≤ now + (Burst−1)·T, T = Period/Limit; taking it sets tat to max(tat, now) + T. That is
// one conditional UpdateItem: "tat = tat + T if now < tat ≤ now + (Burst−1)·T" when the bucket
// is busy, "tat = now + T if tat ≤ now (or absent)" when it is idle; the hint chooses which to
// try first, and a refused one is followed by the other when the item read says so. Over any
// window of length W at most Burst + W/T tokens are granted. With Hold, a token due within Hold
// is reserved the same way and the job starts at its due time (StartAt), so the bound holds for
// the start times.
func (t *Table) TakeToken(ctx context.Context, req TokenRequest) (TokenResult, error) {
	if req.Limit < 1 || req.Period <= 0 || req.Burst < 1 {
		return TokenResult{}, fmt.Errorf("%w: rate %d per %s, burst %d", ErrConfig, req.Limit, req.Period, req.Burst)
	}
	pk := ratePK(req.Name, req.Key)
	T := interval(req.Limit, req.Period)
	now := req.Now.UnixMicro()
	// A token is due (now, or reserved within Hold) while tat ≤ maxTAT.
	maxTAT := now + int64(req.Burst-1)*T + max(req.Hold, 0).Microseconds()
	idle := req.Hint.IsZero() || req.Hint.UnixMicro() <= now
	var res TokenResult
	for round := 0; round < 3; round++ {
		e := newExpr()
		tat := e.n(attrTAT)
		u := &update{}
		var cond string
		var newTAT int64
		if idle {
			newTAT = now + T
			u.set = append(u.set, tat+" = "+e.v(avN(newTAT)))
			cond = "(attribute_not_exists(" + tat + ") OR " + tat + " <= " + e.v(avN(now)) + ")"
		} else {
			u.set = append(u.set, tat+" = "+tat+" + "+e.v(avN(T)))
			cond = tat + " > " + e.v(avN(now)) + " AND " + tat + " <= " + e.v(avN(maxTAT))
			newTAT = now + T // a lower bound, when the write does not return the new value
		}
		u.set = append(u.set,
			e.n(attrLimit)+" = "+e.v(avN(int64(req.Limit))),
			e.n(attrPeriod)+" = "+e.v(avN(req.Period.Milliseconds())),
			e.n(attrBurst)+" = "+e.v(avN(int64(req.Burst))),
			e.n(idempotency.AttrExpires)+" = "+e.v(avN(time.UnixMicro(maxTAT+T).Add(itemTTL).Unix())),
			e.n(idempotency.AttrGSI1PK)+" = if_not_exists("+e.n(idempotency.AttrGSI1PK)+", "+e.v(avS(IndexPartitionRates))+")",
			e.n(idempotency.AttrGSI1SK)+" = if_not_exists("+e.n(idempotency.AttrGSI1SK)+", "+e.v(avN(req.Now.UnixMilli()))+")",
		)
		if req.Key != keyPart(req.Key) {
			u.set = append(u.set, e.n(attrKey)+" = "+e.v(avS(req.Key)))
		}
		res.Writes++
		out, err := t.update(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(t.table),
			Key:                                 map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)},
			UpdateExpression:                    aws.String(u.String()),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            e.names,
			ExpressionAttributeValues:           e.valuesOrNil(),
			ReturnValues:                        types.ReturnValueUpdatedNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, keepConnection)
		if err == nil {
			res.Granted, res.StartAt = true, req.Now
			if v, ok := getInt(out.Attributes, attrTAT); ok {
				newTAT = v
				// The job starts when its token is due: tat before the grant − (Burst−1)·T.
				if start := newTAT - int64(req.Burst)*T; !idle && start > now {
					res.StartAt = time.UnixMicro(start)
				}
			} else if !idle && req.Hold > 0 {
				// Without the new value the reserved time is unknown: assume the latest.
				res.StartAt = time.UnixMicro(now + req.Hold.Microseconds())
			}
			res.TAT = time.UnixMicro(newTAT)
			return res, nil
		}
		item, found, err := t.refusal(ctx, pk, err)
		if err != nil {
			return res, fmt.Errorf("flow: take a token of %s: %w", pk, err)
		}
		old, ok := getInt(item, attrTAT)
		switch {
		case !found || !ok || old <= now:
			idle = true
		case old <= maxTAT:
			idle = false
		default:
			res.TAT, res.Wait = time.UnixMicro(old), time.Duration(old-maxTAT)*time.Microsecond
			return res, nil
		}
	}
	res.Wait = time.Duration(T) * time.Microsecond // contended: try again a token later
	return res, nil
}

// update sends one UpdateItem: every write of the flow items goes through it. Each is a single
// conditional write that either happened or did not, so it is sent again (bounded, jittered:
// internal/ddbretry, as the job table's other writers do) while a transaction holding the item
// refuses it; a refused condition is an answer and is returned at once.
func (t *Table) update(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return t.client.UpdateItem(ctx, in, opts...)
	})
}

// refusal returns the item that refused a conditional write to pk: from the
// ConditionalCheckFailedException, or else a strongly consistent read (found false when there is
// no item). Other errors are returned.
func (t *Table) refusal(ctx context.Context, pk string, err error) (map[string]types.AttributeValue, bool, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, false, err
	}
	if len(ccf.Item) > 0 {
		return ccf.Item, true, nil
	}
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.table),
		Key:            map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)},
		ConsistentRead: aws.Bool(true),
	}, keepConnection)
	if err != nil {
		return nil, false, err
	}
	return out.Item, len(out.Item) > 0, nil
}

// keepConnection is passed with every DynamoDB call (see internal/sdkhttp).
func keepConnection(o *dynamodb.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = sdkhttp.KeepConnection(o.HTTPClient)
	}
}
