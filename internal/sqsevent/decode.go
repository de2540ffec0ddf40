package sqsevent

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/sqsworker/sqsworker/internal/jsonscan"
)

// MaxBatch is the most records Lambda puts in one SQS event; Decode uses it to bound the
// capacity it reserves, not to limit the records it reads.
const MaxBatch = 10000

// Decode reads Lambda's SQS event payload ({"Records":[…]}) into records.
//
// It allocates per batch, not per field: the values it keeps are copied (unescaped in the same
// pass) into a few blocks of memory that are never reused; keys and the fields the worker does
// not keep (eventSource, md5OfMessageAttributes) are not copied, and a value equal to the
// previous record's (eventSourceARN, awsRegion, SenderId) is shared. The records' strings stay
// valid as long as any record is reachable (and keep their blocks alive that long), except
// [Record.ReceiptHandle]: it points into payload (unless it holds escapes), so it is valid only
// until payload is reused or changed (the worker reads it only during the call, and copies it
// where it may outlive the call: for the SQS client and the malformed-job hook; it is 40 % of a
// record, and copying every one cost a fifth of the whole path).
// messageAttributes is kept undecoded in [Record.RawMessageAttributes].
//
// Decode accepts what encoding/json accepts into events.SQSEvent, with the same results
// (FromEvent of it), except that:
//   - keys match exactly: encoding/json also matches struct fields case-insensitively
//     ("Body" or "BODY" would set the body), Decode skips such keys as unknown;
//   - a second "Records" key is an error (encoding/json merges the arrays element by element);
//   - the values inside "messageAttributes" are checked only as JSON: their types are checked
//     when [Record.MessageAttributes] decodes them.
//
// Otherwise: unknown keys are skipped at any level, whitespace is allowed anywhere, a
// duplicated key's last value wins, null leaves a string field unchanged (so "" unless the key
// came before), "attributes": null clears the system attributes and "messageAttributes": null
// the message attributes. A malformed payload gives an error, wrapping a *[jsonscan.Error], that
// says at which byte offset what is wrong.
func Decode(payload []byte) ([]Record, error) {
	d := newDecoder(payload)
	recs, err := d.event()
	if err != nil {
		return nil, fmt.Errorf("sqsevent: decode: %w", err)
	}
	return recs, nil
}

type decoder struct {
	// s is the payload being read (never written).
	s string
	// arena is the block the kept values are appended to.
	arena []byte
	// The last value of the fields that are usually the same in every record of a batch, when
	// it can be shared (see same).
	arn, region, sender string
	// scratch holds the last key that was not matched as written (see object).
	scratch []byte
}

// Blocks: a new one is sized for the values of the rest of the payload (about 5/8 of it: the
// receipt handle and the body are most of a record), at most maxBlock; the current one is left
// once less than minFree is free in it.
const (
	minBlock = 4 << 10
	maxBlock = 256 << 10
	minFree  = 2 << 10
)

func newDecoder(payload []byte) decoder {
	d := decoder{s: bytesString(payload)}
	d.reserve(0)
	return d
}

func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// reserve starts a new block when the current one is nearly full. A value longer than the room
// left grows the block by append.
func (d *decoder) reserve(i int) {
	if cap(d.arena)-len(d.arena) < minFree {
		d.arena = make([]byte, 0, min(max((len(d.s)-i)*5/8, minBlock), maxBlock))
	}
}

// str reads the string at s[i] and returns its value, copied into the arena, and the index after
// it.
func (d *decoder) str(i int) (string, int, error) {
	d.reserve(i)
	start := len(d.arena)
	out, end, ok, err := jsonscan.AppendDecoded(d.arena, d.s, i)
	if err != nil {
		return "", 0, err
	}
	if !ok {
		// Invalid UTF-8, which becomes U+FFFD as in encoding/json.
		if end, _, err = jsonscan.String(d.s, i); err != nil {
			return "", 0, err
		}
		out = jsonscan.Unquote(d.arena, d.s[i+1:end-1])
	}
	d.arena = out
	return bytesString(out[start:]), end, nil
}

// keep copies raw into the arena.
func (d *decoder) keep(i int, raw string) string {
	d.reserve(i)
	start := len(d.arena)
	d.arena = append(d.arena, raw...)
	return bytesString(d.arena[start:])
}

// same reports whether the string at s[i] is exactly the value prev (shareable: printable ASCII
// without quotes or backslashes, so that its JSON form is itself) and returns the index after it.
func (d *decoder) same(i int, prev string) (int, bool) {
	if prev == "" || d.s[i] != '"' || !keyAt(d.s, i, prev) {
		return 0, false
	}
	return i + len(prev) + 2, true
}

// shareable reports whether v can be matched by same: printable ASCII, no '"' or '\\'.
func shareable(v string) bool {
	for k := 0; k < len(v); k++ {
		if c := v[k]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (d *decoder) event() ([]Record, error) {
	s := d.s
	i := jsonscan.SkipSpace(s, 0)
	if i >= len(s) {
		return nil, jsonscan.EOF(i)
	}
	switch s[i] {
	case '{':
	case 'n':
		// encoding/json accepts null for a struct and leaves it empty.
		end, err := jsonscan.Literal(s, i, "null")
		if err != nil {
			return nil, err
		}
		return nil, jsonscan.End(s, end)
	default:
		if _, err := jsonscan.SkipValue(s, i, 0); err != nil {
			return nil, err
		}
		return nil, jsonscan.Errorf(i, "the event is %s, want an object", jsonscan.Kind(s[i]))
	}
	var recs []Record
	seen := false
	i, err := d.object(i, eventKeys, func(key, i int) (int, error) {
		if key != 0 {
			return jsonscan.SkipValue(s, i, 1)
		}
		if seen {
			return 0, jsonscan.Errorf(i, `duplicate "Records" key`)
		}
		seen = true
		var err error
		recs, i, err = d.records(i)
		return i, err
	})
	if err != nil {
		return nil, err
	}
	return recs, jsonscan.End(s, i)
}

// object reads the object at s[i] == '{', calling field for each key with the key's index in
// expected (-1 for a key not in it, which field skips) and the index of its value (whitespace
// skipped); field returns the index after the value. It returns the index after '}'. expected
// lists the keys in the order Lambda writes them: a key that is the next one expected is matched
// without a scan.
func (d *decoder) object(i int, expected []string, field func(k, i int) (int, error)) (int, error) {
	s := d.s
	i = jsonscan.SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, nil
	}
	next := 0
	for {
		if i >= len(s) || s[i] != '"' {
			return 0, jsonscan.Unexpected(s, i, "looking for beginning of object key string")
		}
		key, end := -1, 0
		for k := range expected {
			if k += next; k >= len(expected) {
				k -= len(expected)
			}
			if keyAt(s, i, expected[k]) {
				key, end, next = k, i+len(expected[k])+2, k+1
				break
			}
		}
		if end == 0 {
			// Not a key as Lambda writes it: decode it (escapes) and look it up.
			var err error
			if end, err = d.keyName(i); err != nil {
				return 0, err
			}
			key = slices.Index(expected, bytesString(d.scratch))
		}
		var err error
		i = jsonscan.SkipSpace(s, end)
		if i >= len(s) || s[i] != ':' {
			return 0, jsonscan.Unexpected(s, i, "after object key")
		}
		i = jsonscan.SkipSpace(s, i+1)
		if i >= len(s) {
			return 0, jsonscan.EOF(i)
		}
		if i, err = field(key, i); err != nil {
			return 0, err
		}
		i = jsonscan.SkipSpace(s, i)
		if i < len(s) {
			switch s[i] {
			case ',':
				i = jsonscan.SkipSpace(s, i+1)
				continue
			case '}':
				return i + 1, nil
			}
		}
		return 0, jsonscan.Unexpected(s, i, "after object key:value pair")
	}
}

// keyName decodes the key at s[i] into d.scratch and returns the index after it.
func (d *decoder) keyName(i int) (int, error) {
	out, end, ok, err := jsonscan.AppendDecoded(d.scratch[:0], d.s, i)
	if err != nil {
		return 0, err
	}
	if !ok {
		if end, _, err = jsonscan.String(d.s, i); err != nil {
			return 0, err
		}
		out = jsonscan.Unquote(d.scratch[:0], d.s[i+1:end-1])
	}
	d.scratch = out
	return end, nil
}

// keyAt reports whether the key at s[i] is exactly "key" (so without escapes).
func keyAt(s string, i int, key string) bool {
	end := i + 1 + len(key)
	return end < len(s) && s[end] == '"' && s[i+1:end] == key
}

// The keys of a record, of its system attributes and of the event, in the order Lambda writes
// them, and their indexes.
const (
	rkMessageID = iota
	rkReceiptHandle
	rkBody
	rkAttributes
	rkMessageAttributes
	rkMD5OfMessageAttributes
	rkMD5OfBody
	rkEventSource
	rkEventSourceARN
	rkAWSRegion
)

const (
	akApproximateReceiveCount = iota
	akSentTimestamp
	akSequenceNumber
	akMessageGroupID
	akSenderID
	akMessageDeduplicationID
	akApproximateFirstReceiveTimestamp
	akAWSTraceHeader
	akDeadLetterQueueSourceArn
)

var (
	recordKeys = []string{rkMessageID: "messageId", rkReceiptHandle: "receiptHandle", rkBody: "body",
		rkAttributes: "attributes", rkMessageAttributes: "messageAttributes",
		rkMD5OfMessageAttributes: "md5OfMessageAttributes", rkMD5OfBody: "md5OfBody",
		rkEventSource: "eventSource", rkEventSourceARN: "eventSourceARN", rkAWSRegion: "awsRegion"}
	attributeKeys = []string{akApproximateReceiveCount: "ApproximateReceiveCount", akSentTimestamp: "SentTimestamp",
		akSequenceNumber: "SequenceNumber", akMessageGroupID: "MessageGroupId", akSenderID: "SenderId",
		akMessageDeduplicationID:           "MessageDeduplicationId",
		akApproximateFirstReceiveTimestamp: "ApproximateFirstReceiveTimestamp", akAWSTraceHeader: "AWSTraceHeader",
		akDeadLetterQueueSourceArn: "DeadLetterQueueSourceArn"}
	eventKeys = []string{"Records"}
)

// records reads the "Records" value at s[i].
func (d *decoder) records(i int) ([]Record, int, error) {
	s := d.s
	switch s[i] {
	case '[':
	case 'n':
		end, err := jsonscan.Literal(s, i, "null")
		return nil, end, err
	default:
		if _, err := jsonscan.SkipValue(s, i, 1); err != nil {
			return nil, 0, err
		}
		return nil, 0, jsonscan.Errorf(i, "Records is %s, want an array", jsonscan.Kind(s[i]))
	}
	i = jsonscan.SkipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return nil, i + 1, nil
	}
	return d.elements(i, true)
}

// elements reads the records from s[i] on, separated by commas: up to and including the closing
// ']' of Records when bracketed, else up to the end of s (a segment of [DecodeSegments]).
func (d *decoder) elements(i int, bracketed bool) ([]Record, int, error) {
	s := d.s
	var recs []Record
	for n := 0; ; n++ {
		start := i
		var err error
		if n == 0 {
			// Read the first record on the stack, then size the slice from its length: the
			// records of a batch look alike.
			var first Record
			if i, err = d.record(i, &first); err != nil {
				return nil, 0, err
			}
			per := max(jsonscan.SkipSpace(s, i)+1-start, 1)
			recs = make([]Record, 1, min(max((len(s)-start)/per, 1), MaxBatch))
			recs[0] = first
		} else {
			recs = append(recs, Record{})
			if i, err = d.record(i, &recs[n]); err != nil {
				return nil, 0, err
			}
		}
		i = jsonscan.SkipSpace(s, i)
		if i < len(s) {
			switch s[i] {
			case ',':
				i = jsonscan.SkipSpace(s, i+1)
				continue
			case ']':
				if bracketed {
					return recs, i + 1, nil
				}
			}
		} else if !bracketed {
			return recs, i, nil
		}
		return nil, 0, jsonscan.Unexpected(s, i, "after array element")
	}
}

// record reads one element of Records at s[i] into r.
func (d *decoder) record(i int, r *Record) (int, error) {
	s := d.s
	if i >= len(s) {
		return 0, jsonscan.EOF(i)
	}
	switch s[i] {
	case '{':
	case 'n':
		return jsonscan.Literal(s, i, "null")
	default:
		if _, err := jsonscan.SkipValue(s, i, 2); err != nil {
			return 0, err
		}
		return 0, jsonscan.Errorf(i, "a record is %s, want an object", jsonscan.Kind(s[i]))
	}
	return d.object(i, recordKeys, func(key, i int) (int, error) {
		var dst *string
		switch key {
		case rkMessageID:
			dst = &r.MessageID
		case rkReceiptHandle:
			return d.aliasField("receiptHandle", i, &r.ReceiptHandle)
		case rkBody:
			dst = &r.Body
		case rkMD5OfBody:
			dst = &r.MD5OfBody
		case rkEventSourceARN:
			return d.sharedField("", "eventSourceARN", i, &r.EventSourceARN, &d.arn)
		case rkAWSRegion:
			return d.sharedField("", "awsRegion", i, &r.AWSRegion, &d.region)
		case rkEventSource, rkMD5OfMessageAttributes:
			return d.skipStringField("", recordKeys[key], i)
		case rkAttributes:
			return d.attributes(i, r)
		case rkMessageAttributes:
			return d.messageAttributes(i, r)
		default:
			return jsonscan.SkipValue(s, i, 3)
		}
		return d.stringField("", recordKeys[key], i, dst)
	})
}

// aliasField is stringField for a field the worker reads only during the call (the receipt
// handle: a visibility change while settling): a value without escapes is not copied, it points
// into the payload.
func (d *decoder) aliasField(name string, i int, dst *string) (int, error) {
	if d.s[i] == '"' {
		if end, ok := jsonscan.PlainString(d.s, i); ok {
			*dst = d.s[i+1 : end-1]
			return end, nil
		}
	}
	return d.stringField("", name, i, dst)
}

// sharedField is stringField for a field that is usually the same in every record: a value equal
// to *prev is not copied again, and a new shareable value becomes *prev.
func (d *decoder) sharedField(prefix, name string, i int, dst, prev *string) (int, error) {
	if end, ok := d.same(i, *prev); ok {
		*dst = *prev
		return end, nil
	}
	end, err := d.stringField(prefix, name, i, dst)
	if err == nil && d.s[i] == '"' && shareable(*dst) {
		*prev = *dst
	}
	return end, err
}

// skipStringField checks the string or null at s[i] for a field that is not kept.
func (d *decoder) skipStringField(prefix, name string, i int) (int, error) {
	switch d.s[i] {
	case '"':
		return jsonscan.SkipString(d.s, i)
	case 'n':
		return jsonscan.Literal(d.s, i, "null")
	}
	return 0, d.typeError(prefix+name, i, "a string")
}

// stringField reads the string or null at s[i] into *dst (null leaves it unchanged). prefix+name
// names the field in errors.
func (d *decoder) stringField(prefix, name string, i int, dst *string) (int, error) {
	s := d.s
	switch s[i] {
	case '"':
		v, end, err := d.str(i)
		if err != nil {
			return 0, err
		}
		*dst = v
		return end, nil
	case 'n':
		return jsonscan.Literal(s, i, "null")
	}
	return 0, d.typeError(prefix+name, i, "a string")
}

// typeError reports the value at s[i] for field name when it is not of the type want, after
// checking its syntax (a syntax error inside it comes first, as in encoding/json).
func (d *decoder) typeError(name string, i int, want string) error {
	if _, err := jsonscan.SkipValue(d.s, i, 3); err != nil {
		return err
	}
	return jsonscan.Errorf(i, "%s is %s, want %s or null", name, jsonscan.Kind(d.s[i]), want)
}

// attributes reads the system attributes object at s[i] into r.
func (d *decoder) attributes(i int, r *Record) (int, error) {
	s := d.s
	switch s[i] {
	case '{':
	case 'n':
		// encoding/json sets the map to nil.
		r.clearAttributes()
		return jsonscan.Literal(s, i, "null")
	default:
		return 0, d.typeError("attributes", i, "an object")
	}
	return d.object(i, attributeKeys, func(key, i int) (int, error) {
		switch key {
		case -1:
			// Not one Lambda sends today: still a string (or null), as encoding/json's map wants.
			return d.skipStringField("attributes.", string(d.scratch), i)
		case akSenderID:
			return d.sharedField("attributes.", "SenderId", i, &r.SenderID, &d.sender)
		}
		var value string
		end, err := d.stringField("attributes.", attributeKeys[key], i, &value)
		if err != nil {
			return 0, err
		}
		r.setAttributeAt(key, value)
		return end, nil
	})
}

// messageAttributes keeps the message attributes object at s[i] as raw text.
func (d *decoder) messageAttributes(i int, r *Record) (int, error) {
	s := d.s
	switch s[i] {
	case '{':
	case 'n':
		r.RawMessageAttributes = ""
		r.Attrs = nil
		return jsonscan.Literal(s, i, "null")
	default:
		return 0, d.typeError("messageAttributes", i, "an object")
	}
	end, err := jsonscan.SkipValue(s, i, 3)
	if err != nil {
		return 0, err
	}
	raw := s[i:end]
	if raw == "{}" {
		r.RawMessageAttributes = mergeObjects(r.RawMessageAttributes, "{}")
	} else {
		r.RawMessageAttributes = mergeObjects(r.RawMessageAttributes, d.keep(i, raw))
	}
	return end, nil
}

// clearAttributes zeroes the system attributes.
func (r *Record) clearAttributes() {
	r.ApproximateReceiveCount = 0
	r.SentTimestamp = 0
	r.ApproximateFirstReceiveTimestamp = 0
	r.SenderID = ""
	r.MessageGroupID = ""
	r.MessageDeduplicationID = ""
	r.SequenceNumber = ""
	r.AWSTraceHeader = ""
	r.DeadLetterQueueSourceARN = ""
}

// mergeObjects returns the JSON object text that decodes into a map as a decoded into a map
// and then b into the same map: encoding/json's behavior for a duplicated key.
func mergeObjects(a, b string) string {
	ia, ib := innerObject(a), innerObject(b)
	if ia == "" {
		return b
	}
	if ib == "" {
		return a
	}
	return "{" + ia + "," + ib + "}"
}

// innerObject returns the members of the object text o, "" when it has none.
func innerObject(o string) string {
	if len(o) < 2 {
		return ""
	}
	in := o[1 : len(o)-1]
	if jsonscan.SkipSpace(in, 0) == len(in) {
		return ""
	}
	return in
}
