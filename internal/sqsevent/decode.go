package sqsevent

import (
	"fmt"
	"unsafe"

	"github.com/sqsworker/sqsworker/internal/jsonscan"
)

// MaxBatch is the most records Lambda puts in one SQS event; Decode uses it to bound the
// capacity it reserves, not to limit the records it reads.
const MaxBatch = 10000

// Decode reads Lambda's SQS event payload ({"Records":[…]}) into records.
//
// It allocates per batch, not per field: one copy of payload (so payload may be reused once
// Decode returns), in which the strings that hold escapes (bodies, mostly) are unescaped in
// place, and the []Record. The records' strings alias that copy, which is never reused: they
// stay valid as long as any record is reachable (and keep the whole payload alive that long).
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
	// The scan reads payload (the caller does not change it during the call); the strings are
	// taken from buf, a copy where escaped strings are unescaped in place.
	buf := append([]byte(nil), payload...) // unlike make, does not zero the memory first
	d := decoder{s: bytesString(payload), buf: buf}
	recs, err := d.event()
	if err != nil {
		return nil, fmt.Errorf("sqsevent: decode: %w", err)
	}
	return recs, nil
}

type decoder struct {
	// s is the payload being read.
	s string
	// buf is the copy of s the records' strings alias. The bytes of an escaped string are
	// overwritten by its value (never longer than the escaped form, unless the input holds
	// invalid UTF-8), and nothing else is ever written.
	buf []byte
}

func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// str reads the string at s[i] and returns its value and the index after it. The value is
// unescaped over the string's own bytes in buf.
func (d *decoder) str(i int) (string, int, error) {
	n, end, ok, err := jsonscan.DecodeInPlace(d.buf, d.s, i)
	if err != nil {
		return "", 0, err
	}
	if ok {
		return bytesString(d.buf[i+1 : i+1+n]), end, nil
	}
	// Invalid UTF-8, which becomes the longer U+FFFD: when the value does not fit, append
	// moves it to new memory.
	if end, _, err = jsonscan.String(d.s, i); err != nil {
		return "", 0, err
	}
	return bytesString(jsonscan.Unquote(d.buf[i+1:i+1:end-1], d.s[i+1:end-1])), end, nil
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
	i, err := d.object(i, eventKeys, func(key string, i int) (int, error) {
		if key != "Records" {
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

// object reads the object at s[i] == '{', calling field for each key with the index of its value
// (whitespace skipped); field returns the index after the value. It returns the index after '}'.
// expected lists the keys in the order Lambda writes them: a key that is the next one expected
// is matched without a scan.
func (d *decoder) object(i int, expected []string, field func(key string, i int) (int, error)) (int, error) {
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
		key, end := "", 0
		for k := range expected {
			if k += next; k >= len(expected) {
				k -= len(expected)
			}
			if keyAt(s, i, expected[k]) {
				key, end, next = expected[k], i+len(expected[k])+2, k+1
				break
			}
		}
		if end == 0 {
			var err error
			if key, end, err = d.str(i); err != nil {
				return 0, err
			}
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

// keyAt reports whether the key at s[i] is exactly "key" (so without escapes).
func keyAt(s string, i int, key string) bool {
	end := i + 1 + len(key)
	return end < len(s) && s[end] == '"' && s[i+1:end] == key
}

// recordKeys and attributeKeys are the keys in the order Lambda writes them.
var (
	recordKeys = []string{"messageId", "receiptHandle", "body", "attributes", "messageAttributes",
		"md5OfMessageAttributes", "md5OfBody", "eventSource", "eventSourceARN", "awsRegion"}
	attributeKeys = []string{"ApproximateReceiveCount", "SentTimestamp", "SequenceNumber", "MessageGroupId",
		"SenderId", "MessageDeduplicationId", "ApproximateFirstReceiveTimestamp", "AWSTraceHeader"}
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
				return recs, i + 1, nil
			}
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
	var discard string
	return d.object(i, recordKeys, func(key string, i int) (int, error) {
		var dst *string
		switch key {
		case "messageId":
			dst = &r.MessageID
		case "receiptHandle":
			dst = &r.ReceiptHandle
		case "body":
			dst = &r.Body
		case "md5OfBody":
			dst = &r.MD5OfBody
		case "eventSourceARN":
			dst = &r.EventSourceARN
		case "awsRegion":
			dst = &r.AWSRegion
		case "eventSource", "md5OfMessageAttributes":
			dst = &discard
		case "attributes":
			return d.attributes(i, r)
		case "messageAttributes":
			return d.messageAttributes(i, r)
		default:
			return jsonscan.SkipValue(s, i, 3)
		}
		return d.stringField("", key, i, dst)
	})
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
	return d.object(i, attributeKeys, func(key string, i int) (int, error) {
		var value string
		end, err := d.stringField("attributes.", key, i, &value)
		if err != nil {
			return 0, err
		}
		r.setAttribute(key, value)
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
	r.RawMessageAttributes = mergeObjects(r.RawMessageAttributes, bytesString(d.buf[i:end]))
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
