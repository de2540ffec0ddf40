package dynamooutbox

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// maxStoredBody bounds a body read back from the table (decompressed): SQS's own limit, 1 MiB.
// A larger one is not read further; the entry comes back corrupt, and the relay kills it.
const maxStoredBody = 1 << 20

// key is an item's primary key.
type key struct{ pk, sk string }

func (k key) av() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: attrS(k.pk), AttrSK: attrS(k.sk)}
}

func (k key) fifo() bool { return strings.HasPrefix(k.pk, fifoPrefix) }

// queueName returns the last path element of a queue URL.
func queueName(url string) string {
	url = strings.TrimRight(url, "/")
	return url[strings.LastIndexByte(url, '/')+1:]
}

func isFIFO(url string) bool { return strings.HasSuffix(strings.TrimRight(url, "/"), ".fifo") }

// itemKey returns the key of a job: its own partition on a standard queue, its group's on a
// FIFO queue (sorted by ord).
func itemKey(m *producer.Message, ord string) key {
	if isFIFO(m.QueueURL) {
		return key{pk: fifoPrefix + queueName(m.QueueURL) + "#" + m.GroupID, sk: ord}
	}
	return key{pk: standardPrefix + m.ID, sk: standardSK}
}

// ordKey returns the commit-order key of a job written at ns (unix nanoseconds).
func ordKey(ns int64, id string) string {
	return fmt.Sprintf("%019d#%s", max(ns, 0), id)
}

// encodeItem returns the item of a pending entry. compressAbove > 0 stores bodies longer than
// that gzip-compressed.
func encodeItem(e *outbox.Entry, ord string, compressAbove int) (map[string]types.AttributeValue, key, error) {
	m := &e.Message
	switch {
	case m.ID == "":
		return nil, key{}, fmt.Errorf("%w: the job has no id", outbox.ErrInvalid)
	case m.QueueURL == "":
		return nil, key{}, fmt.Errorf("%w: job %s has no queue URL (prepare it with a producer)", outbox.ErrInvalid, m.ID)
	case isFIFO(m.QueueURL) && m.GroupID == "":
		return nil, key{}, fmt.Errorf("%w: job %s is for FIFO queue %s and has no message group", outbox.ErrInvalid, m.ID, queueName(m.QueueURL))
	case e.CreatedAt.IsZero():
		return nil, key{}, fmt.Errorf("%w: job %s has no CreatedAt", outbox.ErrInvalid, m.ID)
	}
	k := itemKey(m, ord)
	avail := e.AvailableAt
	if avail.IsZero() {
		avail = e.CreatedAt
	}
	item := map[string]types.AttributeValue{
		AttrPK:          attrS(k.pk),
		AttrSK:          attrS(k.sk),
		AttrVersion:     attrN(ItemVersion),
		AttrKind:        attrS(m.Kind),
		AttrKey:         attrS(m.Key),
		AttrQueueURL:    attrS(m.QueueURL),
		AttrCreatedAt:   attrN(e.CreatedAt.UnixMilli()),
		AttrAvailableAt: attrN(avail.UnixMilli()),
		AttrAttempts:    attrN(int64(e.Attempts)),
		AttrState:       attrS(string(outbox.StatePending)),
		AttrOrd:         attrS(ord),
		AttrGSIPK:       attrS(statePartition(string(outbox.StatePending), shard(m.ID))),
	}
	if k.fifo() {
		item[AttrJobID] = attrS(m.ID)
	}
	if compressAbove > 0 && len(m.Body) > compressAbove {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write([]byte(m.Body)) // a bytes.Buffer never fails
		zw.Close()
		item[AttrBodyGzip] = &types.AttributeValueMemberB{Value: buf.Bytes()}
	} else {
		item[AttrBody] = attrS(m.Body)
	}
	if len(m.Attributes) > 0 {
		attrs := make(map[string]types.AttributeValue, len(m.Attributes))
		for name, v := range m.Attributes {
			a := map[string]types.AttributeValue{"t": attrS(aws.ToString(v.DataType))}
			if v.StringValue != nil {
				a["s"] = attrS(*v.StringValue)
			}
			if v.BinaryValue != nil {
				a["b"] = &types.AttributeValueMemberB{Value: v.BinaryValue}
			}
			attrs[name] = &types.AttributeValueMemberM{Value: a}
		}
		item[AttrAttributes] = &types.AttributeValueMemberM{Value: attrs}
	}
	if m.GroupID != "" {
		item[AttrGroupID] = attrS(m.GroupID)
	}
	if m.DeduplicationID != "" {
		item[AttrDedupID] = attrS(m.DeduplicationID)
	}
	if !m.RunAt.IsZero() {
		item[AttrRunAt] = attrN(m.RunAt.UnixMilli())
	}
	return item, k, nil
}

// errForeign marks an item this package does not read: another key format, or a newer item
// format. It is left alone.
var errForeign = errors.New("not an outbox item of this format")

// decodeItem reads an item back. Items that are not outbox items (or of a newer format) give an
// error wrapping errForeign. Any other problem gives an entry with Corrupt set, holding what
// could be read: the relay fails it with that reason until it is dead.
func decodeItem(item map[string]types.AttributeValue) (outbox.Entry, key, error) {
	var e outbox.Entry
	pk, err1 := getS(item, AttrPK)
	sk, err2 := getS(item, AttrSK)
	if err1 != nil || err2 != nil || pk == "" || sk == "" {
		return e, key{}, fmt.Errorf("%w: no string keys %s and %s", errForeign, AttrPK, AttrSK)
	}
	k := key{pk: pk, sk: sk}
	switch {
	case strings.HasPrefix(pk, standardPrefix) && sk == standardSK:
		e.Message.ID = pk[len(standardPrefix):]
	case strings.HasPrefix(pk, fifoPrefix):
		id, err := getS(item, AttrJobID)
		if err != nil || id == "" {
			if _, after, ok := strings.Cut(sk, "#"); ok {
				id = after
			}
		}
		e.Message.ID = id
	default:
		return e, k, fmt.Errorf("%w: key %q/%q", errForeign, pk, sk)
	}
	if e.Message.ID == "" {
		return e, k, fmt.Errorf("%w: key %q/%q names no job", errForeign, pk, sk)
	}
	if v, ok, err := getN(item, AttrVersion); err != nil || !ok || v > ItemVersion || v < 1 {
		return e, k, fmt.Errorf("%w: item %q/%q has format %s, this relay reads %d", errForeign, pk, sk, attrText(item[AttrVersion]), ItemVersion)
	}
	d := decoder{item: item}
	m := &e.Message
	m.Kind = d.s(AttrKind)
	m.Key = d.s(AttrKey)
	m.QueueURL = d.s(AttrQueueURL)
	m.GroupID = d.s(AttrGroupID)
	m.DeduplicationID = d.s(AttrDedupID)
	m.Body = d.body()
	m.Attributes = d.attributes()
	m.RunAt = d.ms(AttrRunAt)
	e.CreatedAt = d.ms(AttrCreatedAt)
	e.AvailableAt = d.ms(AttrAvailableAt)
	e.Attempts = int(d.n(AttrAttempts))
	e.LockedBy = d.s(AttrLockedBy)
	e.LockedUntil = d.ms(AttrLockedUntil)
	e.LastError = d.s(AttrLastError)
	switch st := outbox.State(d.s(AttrState)); st {
	case outbox.StatePending, outbox.StateDead, outbox.StateSent:
		e.State = st
	default:
		d.fail("attribute %s is %q, not pending, dead or sent", AttrState, st)
	}
	switch {
	case m.QueueURL == "":
		d.fail("no queue URL")
	case isFIFO(m.QueueURL) != k.fifo():
		d.fail("queue %s does not match the item's key %q", m.QueueURL, pk)
	case k.fifo() && pk != fifoPrefix+queueName(m.QueueURL)+"#"+m.GroupID:
		d.fail("message group %q does not match the item's key %q", m.GroupID, pk)
	}
	if e.Attempts < 0 {
		d.fail("attribute %s is negative", AttrAttempts)
	}
	e.Corrupt = d.problem
	return e, k, nil
}

// decoder reads attributes, keeping the first problem met.
type decoder struct {
	item    map[string]types.AttributeValue
	problem string
}

func (d *decoder) fail(format string, args ...any) {
	if d.problem == "" {
		d.problem = fmt.Sprintf(format, args...)
	}
}

func (d *decoder) s(name string) string {
	s, err := getS(d.item, name)
	if err != nil {
		d.fail("%v", err)
	}
	return s
}

func (d *decoder) n(name string) int64 {
	n, _, err := getN(d.item, name)
	if err != nil {
		d.fail("%v", err)
	}
	return n
}

func (d *decoder) ms(name string) time.Time {
	n, ok, err := getN(d.item, name)
	if err != nil {
		d.fail("%v", err)
	}
	if !ok || err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func (d *decoder) body() string {
	if _, ok := d.item[AttrBodyGzip]; !ok {
		return d.s(AttrBody)
	}
	b, ok := d.item[AttrBodyGzip].(*types.AttributeValueMemberB)
	if !ok {
		d.fail("attribute %s is %s, want binary", AttrBodyGzip, typeName(d.item[AttrBodyGzip]))
		return ""
	}
	zr, err := gzip.NewReader(bytes.NewReader(b.Value))
	if err != nil {
		d.fail("attribute %s: %v", AttrBodyGzip, err)
		return ""
	}
	body, err := io.ReadAll(io.LimitReader(zr, maxStoredBody+1))
	switch {
	case err != nil:
		d.fail("attribute %s: %v", AttrBodyGzip, err)
		return ""
	case len(body) > maxStoredBody:
		d.fail("the body is over %d bytes once decompressed, more than SQS takes", maxStoredBody)
		return ""
	}
	return string(body)
}

func (d *decoder) attributes() map[string]sqstypes.MessageAttributeValue {
	v, ok := d.item[AttrAttributes]
	if !ok {
		return nil
	}
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		d.fail("attribute %s is %s, want a map", AttrAttributes, typeName(v))
		return nil
	}
	out := make(map[string]sqstypes.MessageAttributeValue, len(m.Value))
	for name, av := range m.Value {
		a, ok := av.(*types.AttributeValueMemberM)
		if !ok {
			d.fail("message attribute %q is %s, want a map", name, typeName(av))
			continue
		}
		var mv sqstypes.MessageAttributeValue
		t, err := getS(a.Value, "t")
		if err != nil {
			d.fail("message attribute %q: %v", name, err)
		}
		mv.DataType = aws.String(t)
		if s, ok := a.Value["s"]; ok {
			if sv, ok := s.(*types.AttributeValueMemberS); ok {
				mv.StringValue = aws.String(sv.Value)
			} else {
				d.fail("message attribute %q: value is %s, want a string", name, typeName(s))
			}
		}
		if b, ok := a.Value["b"]; ok {
			if bv, ok := b.(*types.AttributeValueMemberB); ok {
				mv.BinaryValue = bv.Value
			} else {
				d.fail("message attribute %q: value is %s, want binary", name, typeName(b))
			}
		}
		out[name] = mv
	}
	return out
}

func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func attrN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// getS returns a string attribute ("" when absent).
func getS(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name]
	if !ok {
		return "", nil
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s is %s, want a string", name, typeName(v))
	}
	return s.Value, nil
}

// getN returns an integer attribute (0, false when absent).
func getN(item map[string]types.AttributeValue, name string) (int64, bool, error) {
	v, ok := item[name]
	if !ok {
		return 0, false, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, fmt.Errorf("attribute %s is %s, want a number", name, typeName(v))
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("attribute %s is %.40q, not an integer", name, n.Value)
	}
	return i, true, nil
}

func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "a string"
	case *types.AttributeValueMemberN:
		return "a number"
	case *types.AttributeValueMemberB:
		return "binary"
	case *types.AttributeValueMemberBOOL:
		return "a boolean"
	case *types.AttributeValueMemberNULL:
		return "null"
	case *types.AttributeValueMemberM:
		return "a map"
	case *types.AttributeValueMemberL:
		return "a list"
	case *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
		return "a set"
	case nil:
		return "absent"
	}
	return fmt.Sprintf("%T", v)
}

// attrText shows a scalar attribute in a message.
func attrText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		return strconv.Quote(v.Value)
	case *types.AttributeValueMemberS:
		return strconv.Quote(v.Value)
	}
	return typeName(v)
}
