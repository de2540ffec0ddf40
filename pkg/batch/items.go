package batch

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// The items of batches and chains live in the job table beside the job records (docs/TABLE.md,
// "Batches and chains"). Their partition keys contain no '#': every job record's key does
// (ItemKey is kind + "#" + key, IDItemKey starts with "#"), so no job, whatever its kind, key or
// id, can share an item with a batch or a chain.
//
//	batch:<id>           the batch: state, counters (the hot item: kept under 1 KB)
//	batch:<id>:cb        its callback, a prepared message (written once)
//	batch:<id>:x         the ids of children that did not succeed (a string set, at most MaxNotSucceeded)
//	batch:<id>:s:<k>     counter shard k of a batch of Spec.CounterShards > 1: the counters of its children
//	batch:<id>:x:<k>     the ids of shard k's children that did not succeed
//	batch:<id>:p:<n>     part n: the children one Add counted (id, kind, key), gzip-compressed
//	batch:<id>:f:<hash>  a chunk's fingerprint: that chunk is counted (so Add is idempotent)
//	chain:<id>           the chain: state, steps, current step
//	chain:<id>:s:<k>     step k, a prepared message
const (
	batchPrefix = "batch:"
	chainPrefix = "chain:"
)

// Attribute names of batch and chain items. pk, st, reason, exp, gsi1pk and gsi1sk are the job
// table's own (idempotency.Attr*): the listing reads the by_status index, which projects st.
const (
	attrVersion   = "v"      // N: item format, 1
	attrTotal     = "tot"    // N: children counted
	attrRemaining = "rem"    // N: children not finished
	attrSucceeded = "ok"     // N
	attrDead      = "dead"   // N
	attrCancelled = "cxl"    // N
	attrParts     = "parts"  // N: part items written
	attrCallback  = "cb"     // S: the callback's job id
	attrCBKind    = "cbk"    // S: the callback's kind
	attrDesc      = "desc"   // S: description
	attrCreated   = "cat"    // N: unix ms
	attrSealed    = "sat"    // N: unix ms
	attrDone      = "dat"    // N: unix ms
	attrLast      = "last"   // N: unix ms of the last counter change
	attrCancelAt  = "cancel" // N: unix ms the batch or chain was cancelled
	attrMsg       = "msg"    // S: a prepared message's JSON (callback, chain step)
	attrMsgGzip   = "msgz"   // B: the same, gzip-compressed (large messages)
	attrIDs       = "ids"    // SS: not-succeeded child ids
	attrChildren  = "c"      // B: a part's children, gzip of "id\tkind\tkey\n" lines (key empty when it is the id)
	attrCount     = "n"      // N: children in a part; steps of a chain
	attrPart      = "part"   // N: the part a fingerprint counted
	attrCurrent   = "cur"    // N: a chain's current step (1-based)
	attrFailed    = "fstep"  // N: the step a chain stopped at
	attrJob       = "job"    // S: a chain's current step's job id; a step item's job id
	attrKind      = "kind"   // S: a step item's kind
	attrShards    = "nsh"    // N: a batch's counter shards (absent: 1, the counters are on the batch)
	attrFull      = "full"   // N: a sharded batch's shards with unfinished children

	// attrCounted is the attribute of a child's job record that says what its batch or chain
	// counted it as (succeeded, dead, cancelled): the condition that keeps a child from being
	// counted twice, and what lets a redriven dead child that succeeds move its count.
	attrCounted = "counted"
)

// listShards is the number of by_status index partitions batches and chains are listed from:
// batch#0…batch#7, chain#0…chain#7.
const listShards = 8

// Item limits.
const (
	// maxStoredMessage bounds a stored callback or chain step (its item must stay within
	// DynamoDB's 400 KB, the message gzip-compressed when large).
	maxStoredMessage = 350 << 10
	// maxPartChildren and maxPartBytes bound a part (one Add's chunk).
	maxPartChildren = 1000
	maxPartBytes    = 300 << 10
	// compressAbove compresses stored messages longer than this.
	compressAbove = 1024
)

func batchKey(id string) string           { return batchPrefix + id }
func callbackKey(id string) string        { return batchPrefix + id + ":cb" }
func notSucceededKey(id string) string    { return batchPrefix + id + ":x" }
func partKey(id string, n int) string     { return batchPrefix + id + ":p:" + strconv.Itoa(n) }
func fingerprintKey(id, fp string) string { return batchPrefix + id + ":f:" + fp }
func shardKey(id string, k int) string    { return batchPrefix + id + ":s:" + strconv.Itoa(k) }
func shardNotSucceededKey(id string, k int) string {
	return batchPrefix + id + ":x:" + strconv.Itoa(k)
}
func chainKey(id string) string          { return chainPrefix + id }
func stepKey(id string, step int) string { return chainPrefix + id + ":s:" + strconv.Itoa(step) }
func listPartition(prefix string, pk string) string {
	return strings.TrimSuffix(prefix, ":") + "#" + strconv.Itoa(idempotency.Shard(pk, listShards))
}

// MaxIDLength is the longest batch or chain id.
const MaxIDLength = 128

// ValidateID reports whether id can name a batch or a chain: 1 to MaxIDLength characters of
// A-Z a-z 0-9 . _ - (no ':' or '#', which the item keys use).
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDLength {
		return fmt.Errorf("%w: id %.40q must be 1-%d characters", ErrInvalid, id, MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: id %q: character %q at %d is not allowed (want [A-Za-z0-9._-])", ErrInvalid, id, c, i)
		}
	}
	return nil
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func avKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{idempotency.AttrPK: avS(pk)}
}

func getS(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, name string) int64 {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		// Some backends write whole numbers as floats.
		f, ferr := strconv.ParseFloat(n.Value, 64)
		if ferr != nil {
			return 0
		}
		v = int64(f)
	}
	return v
}

func getMs(item map[string]types.AttributeValue, name string) time.Time {
	if _, ok := item[name]; !ok {
		return time.Time{}
	}
	return time.UnixMilli(getN(item, name)).UTC()
}

func getSS(item map[string]types.AttributeValue, name string) []string {
	if ss, ok := item[name].(*types.AttributeValueMemberSS); ok {
		return ss.Value
	}
	return nil
}

// expSeconds returns the unix second of an expiry, rounded up (as the job table's records).
func expSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// storedMessage encodes a prepared message into the attributes of its item (msg, or msgz when
// it is long).
func storedMessage(m *producer.Message, item map[string]types.AttributeValue) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%w: encode message %s: %v", ErrInvalid, m.ID, err)
	}
	if len(b) <= compressAbove {
		item[attrMsg] = avS(string(b))
	} else {
		item[attrMsgGzip] = &types.AttributeValueMemberB{Value: gzipBytes(b)}
	}
	if size := ddbsize.ItemSize(item); size > maxStoredMessage {
		return fmt.Errorf("%w: message %s (%s) takes %d bytes stored, above the %d a batch or chain keeps: pass large data through S3 (producer.Config.Payload keeps the envelope small only when it is sent, not when it is stored) and keep a reference in the args",
			ErrTooLarge, m.ID, m.Kind, size, maxStoredMessage)
	}
	return nil
}

// loadMessage decodes the message of an item storedMessage wrote.
func loadMessage(item map[string]types.AttributeValue) (producer.Message, error) {
	var raw []byte
	switch {
	case item[attrMsg] != nil:
		raw = []byte(getS(item, attrMsg))
	case item[attrMsgGzip] != nil:
		b, ok := item[attrMsgGzip].(*types.AttributeValueMemberB)
		if !ok {
			return producer.Message{}, errors.New("batch: stored message is not binary")
		}
		var err error
		if raw, err = gunzip(b.Value, 2<<20); err != nil {
			return producer.Message{}, fmt.Errorf("batch: stored message: %w", err)
		}
	default:
		return producer.Message{}, errors.New("batch: the item holds no message")
	}
	var m producer.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return producer.Message{}, fmt.Errorf("batch: stored message: %w", err)
	}
	return m, nil
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b) // a bytes.Buffer never fails
	zw.Close()
	return buf.Bytes()
}

func gunzip(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("more than %d bytes once decompressed", limit)
	}
	return out, nil
}

// Child names one child of a batch: enough to find its job record.
type Child struct {
	// ID, Kind and Key are the child job's id, kind and idempotency key (the id when it has none
	// of its own).
	ID, Kind, Key string
}

// encodeChildren returns a part's children attribute.
func encodeChildren(cs []Child) []byte {
	var b strings.Builder
	for _, c := range cs {
		key := c.Key
		if key == c.ID {
			key = ""
		}
		b.WriteString(c.ID + "\t" + c.Kind + "\t" + key + "\n")
	}
	return gzipBytes([]byte(b.String()))
}

// decodeChildren reads a part's children attribute.
func decodeChildren(item map[string]types.AttributeValue) ([]Child, error) {
	b, ok := item[attrChildren].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("batch: part %s has no children", getS(item, idempotency.AttrPK))
	}
	raw, err := gunzip(b.Value, 64<<20)
	if err != nil {
		return nil, fmt.Errorf("batch: part %s: %w", getS(item, idempotency.AttrPK), err)
	}
	var out []Child
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("batch: part %s: malformed line %q", getS(item, idempotency.AttrPK), line)
		}
		c := Child{ID: f[0], Kind: f[1], Key: f[2]}
		if c.Key == "" {
			c.Key = c.ID
		}
		out = append(out, c)
	}
	return out, nil
}

// fingerprint returns the fingerprint of a chunk of children: the first 32 hex digits of the
// SHA-256 of their ids, in order.
func fingerprint(cs []Child) string {
	h := sha256.New()
	for _, c := range cs {
		h.Write([]byte(c.ID))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
