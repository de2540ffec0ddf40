package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sqsworker/sqsworker/internal/jsonscan"
	"sort"
	"strconv"
	"time"
	"unsafe"
)

// EnvelopeVersion is the envelope format this package reads and writes.
const EnvelopeVersion = 1

// TimeLayout is how the envelope writes times: RFC 3339 in UTC with milliseconds. Any RFC 3339
// time is accepted on read.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MetaTraceParent is the meta key that carries the W3C trace context.
const MetaTraceParent = "traceparent"

// Envelope is the wire format of a job (envelope v1), the JSON body of an SQS message:
//
//	{"v":1,"id":"01JD…","kind":"email.send","args":{"to":"a@b.c"},"key":"order-42-welcome",
//	 "enqueued_at":"2026-11-29T10:00:00.123Z","max_attempts":5,"attempts_before":0,
//	 "meta":{"traceparent":"00-…"}}
//
// v, id, kind and args are required; the others are omitted when zero. Unknown fields are
// ignored on read. docs/envelope.md and docs/envelope.schema.json describe it for other languages.
type Envelope struct {
	// V is the format version, 1.
	V int
	// ID is the job's unique id.
	ID string
	// Kind names the job type; see [ValidateKind].
	Kind string
	// Args is the job's arguments, a JSON object.
	Args json.RawMessage
	// Key is the idempotency key, scoped by kind. Empty means ID.
	Key string
	// EnqueuedAt is when the job was created.
	EnqueuedAt time.Time
	// MaxAttempts, when above 0, overrides the kind's MaxAttempts.
	MaxAttempts int
	// AttemptsBefore counts attempts spent before this copy was sent (re-sends, requeues).
	AttemptsBefore int
	// RunAt, when set, is the earliest time the job may run: a worker that receives it earlier
	// waits (without spending an attempt). Used for retries longer than SQS's visibility limit.
	RunAt time.Time
	// Meta carries string context such as "traceparent".
	Meta map[string]string
}

// EffectiveKey returns Key, or ID when Key is empty.
func (e *Envelope) EffectiveKey() string {
	if e.Key != "" {
		return e.Key
	}
	return e.ID
}

// ErrMalformed is wrapped by every error DecodeEnvelope and Validate return.
var ErrMalformed = errors.New("malformed envelope")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Validate checks the envelope's fields.
func (e *Envelope) Validate() error {
	if e.V != EnvelopeVersion {
		return malformed("unsupported version v=%d (want %d)", e.V, EnvelopeVersion)
	}
	if e.ID == "" {
		return malformed("id is empty")
	}
	if err := ValidateKind(e.Kind); err != nil {
		return malformed("%v", err)
	}
	if !isJSONObject(e.Args) {
		return malformed("args must be a JSON object")
	}
	if e.MaxAttempts < 0 {
		return malformed("max_attempts %d is negative", e.MaxAttempts)
	}
	if e.AttemptsBefore < 0 {
		return malformed("attempts_before %d is negative", e.AttemptsBefore)
	}
	if err := checkYear("enqueued_at", e.EnqueuedAt); err != nil {
		return err
	}
	if err := checkYear("run_at", e.RunAt); err != nil {
		return err
	}
	return nil
}

// checkYear rejects times RFC 3339 cannot write (years outside 0000-9999).
func checkYear(name string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return malformed("%s %s is outside the years 0000-9999 RFC 3339 can express", name, t)
	}
	return nil
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}

// MarshalJSON encodes the envelope after validating it.
func (e Envelope) MarshalJSON() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if !json.Valid(e.Args) {
		return nil, malformed("args are not valid JSON")
	}
	return e.AppendJSON(make([]byte, 0, 128+len(e.Args))), nil
}

// UnmarshalJSON decodes and validates an envelope, as [DecodeEnvelope] does.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	dec, err := DecodeEnvelope(b)
	if err != nil {
		return err
	}
	*e = dec
	return nil
}

// AppendJSON appends the envelope's JSON to dst. It does not validate: use it on envelopes that
// passed [Envelope.Validate] with args produced by a JSON encoder.
func (e *Envelope) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(e.V), 10)
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, e.ID)
	dst = append(dst, `,"kind":`...)
	dst = appendString(dst, e.Kind)
	dst = append(dst, `,"args":`...)
	dst = append(dst, e.Args...)
	if e.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = appendString(dst, e.Key)
	}
	if !e.EnqueuedAt.IsZero() {
		dst = append(dst, `,"enqueued_at":"`...)
		dst = e.EnqueuedAt.UTC().AppendFormat(dst, TimeLayout)
		dst = append(dst, '"')
	}
	if e.MaxAttempts != 0 {
		dst = append(dst, `,"max_attempts":`...)
		dst = strconv.AppendInt(dst, int64(e.MaxAttempts), 10)
	}
	if e.AttemptsBefore != 0 {
		dst = append(dst, `,"attempts_before":`...)
		dst = strconv.AppendInt(dst, int64(e.AttemptsBefore), 10)
	}
	if !e.RunAt.IsZero() {
		dst = append(dst, `,"run_at":"`...)
		dst = e.RunAt.UTC().AppendFormat(dst, TimeLayout)
		dst = append(dst, '"')
	}
	if len(e.Meta) > 0 {
		keys := make([]string, 0, len(e.Meta))
		for k := range e.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, `,"meta":{`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, e.Meta[k])
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendString appends s as a JSON string (see jsonscan.AppendString).
func appendString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }

// DecodeEnvelope parses and validates an envelope. Every error wraps [ErrMalformed].
//
// It is [ParseEnvelope] on a copy of body: the result does not alias body, and its Args may be
// modified (it is the only thing that refers to those bytes of the copy).
func DecodeEnvelope(body []byte) (Envelope, error) {
	b := bytes.Clone(body)
	if len(b) == 0 {
		return ParseEnvelope("")
	}
	// The strings of the result alias b where it holds them, and Args is b[start:end:end]
	// apart from them: writing to Args changes no string.
	return ParseEnvelope(unsafe.String(&b[0], len(b)))
}
