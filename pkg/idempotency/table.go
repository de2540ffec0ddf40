package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The DynamoDB table design, shared with pkg/status (one item per job key):
//
//   - partition key pk (S) = Layout.ItemKey(kind, key, jobID): IDItemKey(jobID) for a job whose
//     key is its id, ItemKey(kind, key) for the others (and for every job under LayoutKindKey); no
//     sort key;
//   - GSI IndexByStatus (sparse): AttrGSI1PK = StatusPartition(state, pk, shards), AttrGSI1SK =
//     the update time in unix ms; written only for the states in StatusIndexed;
//   - GSI IndexByID: AttrJobID, keys only, written only for items under ItemKey(kind, key): an
//     item under IDItemKey(id) is found by id with a direct read;
//   - TTL on AttrExpires (unix seconds). DynamoDB deletes expired items up to days late, so
//     readers always compare the expiry themselves (Record.Expired).

// Attribute names of a job item.
const (
	AttrPK      = "pk"       // S: Layout.ItemKey(kind, key, jobID)
	AttrKind    = "kind"     // S
	AttrKey     = "key"      // S: left out when the partition key spells it (IDItemKey of a short id)
	AttrJobID   = "job_id"   // S: partition key of IndexByID; only on items under ItemKey(kind, key)
	AttrState   = "st"       // S: a State
	AttrRuns    = "runs"     // N
	AttrToken   = "tok"      // S: the running claim's token
	AttrLease   = "lease"    // N: unix ms
	AttrHash    = "hash"     // S: payload hash
	AttrError   = "err"      // S: last error, at most MaxErrorBytes
	AttrReason  = "reason"   // S: dead-letter reason
	AttrDeadMsg = "dead_msg" // S: the SQS message whose run made the record dead
	AttrResult  = "result"   // S: a succeeded job's stored result (SetResult)
	AttrFirstAt = "first_at" // N: unix ms
	AttrLastAt  = "last_at"  // N: unix ms; absent: the same as first_at
	AttrUpdated = "upd"      // N: unix ms
	AttrExpires = "exp"      // N: unix SECONDS, the table's TTL attribute
	AttrGSI1PK  = "gsi1pk"   // S: StatusPartition(state, pk, shards), only for StatusIndexed states
	AttrGSI1SK  = "gsi1sk"   // N: unix ms of the write that set the state

	AttrProgress    = "prog_frac"  // N: the last progress fraction, 0-1 (4 decimal places)
	AttrProgressMsg = "prog_msg"   // S: the last progress message, at most MaxProgressMessageBytes
	AttrProgressAt  = "prog_at"    // N: unix ms of the last progress report
	AttrCancelAt    = "cxl_at"     // N: unix ms of a cancellation request of the running job
	AttrCancelWhy   = "cxl_reason" // S: the request's reason, at most MaxCancelReasonBytes

	AttrCursor        = "ckpt"     // S: the job's cursor JSON (jobs.Checkpoint), at most MaxCursorBytes
	AttrCursorPointer = "ckpt_ptr" // S: the S3 pointer of a larger cursor (payload.Pointer's body)
	AttrCursorSeq     = "ckpt_seq" // N: the cursor's number, from 1; a write must carry a higher one
	AttrCursorAt      = "ckpt_at"  // N: unix ms of the cursor's save
	AttrCursorBytes   = "ckpt_len" // N: the cursor's size in bytes, wherever it is kept
	AttrContinuations = "conts"    // N: runs that ended without ending the job (slices, sleeps)
	AttrRunTime       = "run_ms"   // N: the job's total run time, ms
	AttrRunAt         = "run_at"   // N: unix ms a scheduled or sleeping job is due (pkg/status reads it)
)

// Index names of a job table.
const (
	IndexByStatus = "by_status" // sparse: AttrGSI1PK, AttrGSI1SK
	IndexByID     = "by_id"     // AttrJobID, keys only
)

// DefaultShards is the number of IndexByStatus partitions per state.
const DefaultShards = 16

// MaxItemKeyBytes bounds the partition key ItemKey returns (DynamoDB allows 2,048 bytes).
const MaxItemKeyBytes = 1024

// ItemKey returns the partition key of a job key's item: kind + "#" + key. Kinds cannot contain
// '#', so the pair is recoverable. A longer result than MaxItemKeyBytes becomes
// kind + "#sha256:" + the hex SHA-256 of key, so that any key works; the item's AttrKind and
// AttrKey attributes keep the originals.
func ItemKey(kind, key string) string {
	if len(kind)+1+len(key) <= MaxItemKeyBytes {
		return kind + "#" + key
	}
	sum := sha256.Sum256([]byte(key))
	return kind + "#sha256:" + hex.EncodeToString(sum[:])
}

// IDKeyPrefix starts the partition key of every item under IDItemKey. No ItemKey starts with it:
// a kind is never empty and never contains '#'.
const IDKeyPrefix = "#"

// IDItemKey returns the partition key of the item of a job whose key is its id: "#" + id, found
// from the id alone (status.Table.GetByID reads it directly). An id longer than
// MaxItemKeyBytes - 1 becomes "#sha256:" + the hex SHA-256 of the id; the item's AttrKey then
// keeps the id.
func IDItemKey(id string) string {
	if len(IDKeyPrefix)+len(id) <= MaxItemKeyBytes {
		return IDKeyPrefix + id
	}
	sum := sha256.Sum256([]byte(id))
	return IDKeyPrefix + "sha256:" + hex.EncodeToString(sum[:])
}

// Layout says under which partition key a job's item is written. Readers (Store.Get, pkg/status)
// find items of either layout, so that a table written by both stays readable.
type Layout int

const (
	// LayoutByID, the default, writes the item of a job whose key is its id (a job enqueued
	// without a key: every delivery and re-send of it carries that id) under IDItemKey(id), without
	// AttrJobID, so that IndexByID is not written for it (a first-time success costs 2 write
	// units: claim and finish) and GetByID finds it with one direct read; such an item keeps its
	// kind in AttrKind. Other jobs are written under ItemKey(kind, key) with AttrJobID, as before.
	// Job ids must be unique across kinds (as jobs.NewID makes them): two jobs of different kinds
	// with the same id and no key share one record.
	LayoutByID Layout = iota
	// LayoutKindKey writes every job under ItemKey(kind, key) with AttrJobID (IndexByID), as
	// releases before LayoutByID did (3 write units per first-time success). Use it while the
	// table may still receive deliveries of jobs claimed under that layout (docs/TABLE.md,
	// "Changing the layout").
	LayoutKindKey
)

// String returns the layout's name.
func (l Layout) String() string {
	switch l {
	case LayoutByID:
		return "by-id"
	case LayoutKindKey:
		return "kind-key"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// ParseLayout returns the layout named s ("by-id" or "kind-key", as String writes them); "" is
// the default, LayoutByID.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "", LayoutByID.String():
		return LayoutByID, nil
	case LayoutKindKey.String():
		return LayoutKindKey, nil
	}
	return 0, fmt.Errorf("idempotency: unknown table layout %q (want %s or %s)", s, LayoutByID, LayoutKindKey)
}

// Valid reports whether l is a known layout.
func (l Layout) Valid() bool { return l == LayoutByID || l == LayoutKindKey }

// IDKeyed reports whether the item of the job (key, jobID) is written under IDItemKey(jobID).
func (l Layout) IDKeyed(key, jobID string) bool {
	return l == LayoutByID && jobID != "" && key == jobID
}

// ItemKey returns the partition key of the job's item: IDItemKey(jobID) when IDKeyed, otherwise
// ItemKey(kind, key). jobID may be empty (a caller that knows only the key: ItemKey).
func (l Layout) ItemKey(kind, key, jobID string) string {
	if l.IDKeyed(key, jobID) {
		return IDItemKey(jobID)
	}
	return ItemKey(kind, key)
}

// StatusIndexed reports whether records in state s are written to IndexByStatus: the states that
// need attention or lookup (retrying, dead, scheduled, cancelled).
func StatusIndexed(s State) bool {
	switch s {
	case StateRetrying, StateDead, StateScheduled, StateCancelled:
		return true
	}
	return false
}

// Shard returns the IndexByStatus shard of an item: fnv32a(pk) mod shards.
func Shard(pk string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(pk))
	return int(h.Sum32() % uint32(shards))
}

// StatusPartition returns the IndexByStatus partition key of an item in state s:
// state + "#" + shard (decimal). List a state by querying its shards 0…shards-1.
func StatusPartition(s State, pk string, shards int) string {
	return string(s) + "#" + strconv.Itoa(Shard(pk, shards))
}

// TableInput returns the CreateTable input of a job table named name: on-demand billing, the
// partition key AttrPK, and the two GSIs (IndexByStatus, sparse, projecting what a listing shows;
// IndexByID, keys only). Enable TTL afterwards with EnableTTL.
func TableInput(name string) *dynamodb.CreateTableInput {
	attr := func(name string, t types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: t}
	}
	key := func(name string, t types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: t}
	}
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			attr(AttrPK, types.ScalarAttributeTypeS),
			attr(AttrGSI1PK, types.ScalarAttributeTypeS),
			attr(AttrGSI1SK, types.ScalarAttributeTypeN),
			attr(AttrJobID, types.ScalarAttributeTypeS),
		},
		KeySchema: []types.KeySchemaElement{key(AttrPK, types.KeyTypeHash)},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName: aws.String(IndexByStatus),
				KeySchema: []types.KeySchemaElement{key(AttrGSI1PK, types.KeyTypeHash), key(AttrGSI1SK, types.KeyTypeRange)},
				Projection: &types.Projection{
					ProjectionType:   types.ProjectionTypeInclude,
					NonKeyAttributes: []string{AttrKind, AttrKey, AttrJobID, AttrState, AttrRuns, AttrReason, AttrUpdated, AttrLastAt},
				},
			},
			{
				IndexName:  aws.String(IndexByID),
				KeySchema:  []types.KeySchemaElement{key(AttrJobID, types.KeyTypeHash)},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
		},
	}
}

// TTLAPI is the part of the DynamoDB client EnableTTL uses.
type TTLAPI interface {
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// EnableTTL turns on the table's TTL on AttrExpires. It is idempotent: DynamoDB refuses to enable
// TTL that is already enabled, so it asks first and does nothing when TTL is enabled (or being
// enabled) on AttrExpires.
func EnableTTL(ctx context.Context, client TTLAPI, table string) error {
	d, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("idempotency: describe TTL of %s: %w", table, err)
	}
	if desc := d.TimeToLiveDescription; desc != nil && aws.ToString(desc.AttributeName) == AttrExpires {
		switch desc.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			return nil
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrExpires), Enabled: aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("idempotency: enable TTL on %s: %w", table, err)
	}
	return nil
}

// RecordFromItem decodes a job item (a GetItem result, or a by-status index entry, which has
// fewer attributes: missing ones stay zero). Kind and Key fall back to the parts of AttrPK.
func RecordFromItem(item map[string]types.AttributeValue) (Record, error) {
	var (
		r    Record
		errs []error
	)
	str := func(name string) string {
		av, ok := item[name]
		if !ok {
			return ""
		}
		s, ok := av.(*types.AttributeValueMemberS)
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %s is %T, want S", name, av))
			return ""
		}
		return s.Value
	}
	num := func(name string) (int64, bool) {
		av, ok := item[name]
		if !ok {
			return 0, false
		}
		n, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %s is %T, want N", name, av))
			return 0, false
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			// Some backends format whole numbers as floats.
			f, ferr := strconv.ParseFloat(n.Value, 64)
			if ferr != nil || f != float64(int64(f)) {
				errs = append(errs, fmt.Errorf("attribute %s = %q is not an integer", name, n.Value))
				return 0, false
			}
			v = int64(f)
		}
		return v, true
	}
	ms := func(name string) time.Time {
		if v, ok := num(name); ok {
			return fromMs(v)
		}
		return time.Time{}
	}
	r.Kind, r.Key = str(AttrKind), str(AttrKey)
	r.JobID = str(AttrJobID)
	switch pk := str(AttrPK); {
	case strings.HasPrefix(pk, IDKeyPrefix):
		// A job whose key is its id: the id is the key attribute, or else the partition key's.
		if r.Key == "" {
			r.Key = pk[len(IDKeyPrefix):]
		}
		if r.JobID == "" {
			r.JobID = r.Key
		}
	case pk != "" && (r.Kind == "" || r.Key == ""):
		if kind, key, ok := strings.Cut(pk, "#"); ok {
			if r.Kind == "" {
				r.Kind = kind
			}
			if r.Key == "" {
				r.Key = key
			}
		}
	}
	r.State = State(str(AttrState))
	if v, ok := num(AttrRuns); ok {
		r.Runs = int(v)
	}
	r.Token = str(AttrToken)
	r.LeaseUntil = ms(AttrLease)
	r.PayloadHash = str(AttrHash)
	r.LastError = str(AttrError)
	r.Reason = str(AttrReason)
	r.DeadMessageID = str(AttrDeadMsg)
	r.Result = str(AttrResult)
	r.FirstAttemptAt = ms(AttrFirstAt)
	r.LastAttemptAt = ms(AttrLastAt)
	if r.LastAttemptAt.IsZero() {
		r.LastAttemptAt = r.FirstAttemptAt // left out while equal (a job's first claim)
	}
	r.UpdatedAt = ms(AttrUpdated)
	if v, ok := num(AttrExpires); ok {
		r.ExpiresAt = time.Unix(v, 0).UTC()
	}
	if at := ms(AttrProgressAt); !at.IsZero() {
		r.Progress.At = at
		r.Progress.Message = str(AttrProgressMsg)
		if av, ok := item[AttrProgress]; ok {
			n, ok := av.(*types.AttributeValueMemberN)
			f, err := 0.0, error(nil)
			if ok {
				f, err = strconv.ParseFloat(n.Value, 64)
			}
			if !ok || err != nil || !ValidProgress(f) {
				errs = append(errs, fmt.Errorf("attribute %s = %v is not a progress fraction", AttrProgress, av))
			}
			r.Progress.Fraction = f
		}
	}
	r.CancelRequestedAt = ms(AttrCancelAt)
	r.CancelReason = str(AttrCancelWhy)
	r.Cursor.Value = str(AttrCursor)
	r.Cursor.Pointer = str(AttrCursorPointer)
	if v, ok := num(AttrCursorSeq); ok {
		r.Cursor.Seq = v
	}
	if v, ok := num(AttrCursorBytes); ok {
		r.Cursor.Bytes = int(v)
	}
	r.Cursor.At = ms(AttrCursorAt)
	if v, ok := num(AttrContinuations); ok {
		r.Continuations = int(v)
	}
	if v, ok := num(AttrRunTime); ok {
		r.RunTime = time.Duration(v) * time.Millisecond
	}
	if len(errs) > 0 {
		return Record{}, fmt.Errorf("idempotency: malformed item %q: %w", str(AttrPK), errors.Join(errs...))
	}
	return r, nil
}

// ItemFromRecord encodes r as a job item in the default layout (LayoutByID.Item).
func ItemFromRecord(r Record, shards int) map[string]types.AttributeValue {
	return LayoutByID.Item(r, shards)
}

// Item encodes r as a job item of layout l, under l.ItemKey(r.Kind, r.Key, r.JobID): times at the
// store's precision, the error truncated, the IndexByStatus attributes set when
// StatusIndexed(r.State) (keyed by r.UpdatedAt). Empty strings and zero times are left out, and
// so are what the item's key already says: AttrKey and AttrJobID under IDItemKey (unless the id
// was hashed: AttrKey keeps it), and AttrLastAt when it equals AttrFirstAt.
func (l Layout) Item(r Record, shards int) map[string]types.AttributeValue {
	if shards <= 0 {
		shards = DefaultShards
	}
	idKeyed := l.IDKeyed(r.Key, r.JobID)
	pk := l.ItemKey(r.Kind, r.Key, r.JobID)
	item := map[string]types.AttributeValue{
		AttrPK:    avS(pk),
		AttrState: avS(string(r.State)),
		AttrRuns:  avN(int64(r.Runs)),
	}
	if r.Kind != "" { // a dead record of a message that named no valid kind has none
		item[AttrKind] = avS(r.Kind)
	}
	if !idKeyed || pk != IDKeyPrefix+r.Key {
		item[AttrKey] = avS(r.Key)
	}
	setS := func(name, v string) {
		if v != "" {
			item[name] = avS(v)
		}
	}
	setMs := func(name string, t time.Time) {
		if !t.IsZero() {
			item[name] = avN(unixMs(t))
		}
	}
	if !idKeyed {
		setS(AttrJobID, r.JobID)
	}
	setS(AttrToken, r.Token)
	setMs(AttrLease, r.LeaseUntil)
	setS(AttrHash, r.PayloadHash)
	setS(AttrError, TruncateError(r.LastError))
	setS(AttrReason, r.Reason)
	setS(AttrDeadMsg, r.DeadMessageID)
	setS(AttrResult, r.Result)
	setMs(AttrFirstAt, r.FirstAttemptAt)
	if !msTime(r.LastAttemptAt).Equal(msTime(r.FirstAttemptAt)) {
		setMs(AttrLastAt, r.LastAttemptAt)
	}
	setMs(AttrUpdated, r.UpdatedAt)
	if !r.ExpiresAt.IsZero() {
		item[AttrExpires] = avN(expSeconds(r.ExpiresAt))
	}
	if !r.Progress.IsZero() {
		p := normalizeProgress(r.Progress, r.Progress.At)
		item[AttrProgress] = avF(p.Fraction)
		setS(AttrProgressMsg, p.Message)
		setMs(AttrProgressAt, p.At)
	}
	setMs(AttrCancelAt, r.CancelRequestedAt)
	setS(AttrCancelWhy, TruncateText(r.CancelReason, MaxCancelReasonBytes))
	setS(AttrCursor, r.Cursor.Value)
	setS(AttrCursorPointer, r.Cursor.Pointer)
	if r.Cursor.Seq > 0 {
		item[AttrCursorSeq] = avN(r.Cursor.Seq)
		item[AttrCursorBytes] = avN(int64(r.Cursor.Bytes))
		setMs(AttrCursorAt, r.Cursor.At)
	}
	if r.Continuations > 0 {
		item[AttrContinuations] = avN(int64(r.Continuations))
	}
	if r.RunTime > 0 {
		item[AttrRunTime] = avN(r.RunTime.Milliseconds())
	}
	if StatusIndexed(r.State) {
		item[AttrGSI1PK] = avS(StatusPartition(r.State, pk, shards))
		var sk int64
		if !r.UpdatedAt.IsZero() {
			sk = unixMs(r.UpdatedAt)
		}
		item[AttrGSI1SK] = avN(sk)
	}
	return item
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// avF is a number attribute of a progress fraction (already rounded).
func avF(f float64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(f, 'f', -1, 64)}
}

func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
