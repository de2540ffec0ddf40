package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The names the Amazon SQS Extended Client Library uses on the wire.
const (
	// PointerClass is the class name the current libraries (Java 2.x and later, Python) write as
	// the first element of a pointer body.
	PointerClass = "software.amazon.payloadoffloading.PayloadS3Pointer"
	// LegacyPointerClass is the class name of the Java library's 1.x releases; their pointers are
	// still read.
	LegacyPointerClass = "com.amazon.sqs.javamessaging.MessageS3Pointer"
	// SizeAttribute is the reserved message attribute (DataType Number) that marks a message as a
	// pointer and holds the payload's size in bytes. The producer writes it.
	SizeAttribute = "ExtendedPayloadSize"
	// LegacySizeAttribute is the older name of SizeAttribute. The Java library writes it unless
	// configured otherwise (useLegacyReservedAttributeName defaults to true); both are read.
	LegacySizeAttribute = "SQSLargePayloadSize"
)

// ErrNotPointer is wrapped by ParsePointer's errors: the body is not a pointer.
var ErrNotPointer = errors.New("payload: not an S3 pointer")

// Pointer names the S3 object that holds a message's payload.
type Pointer struct {
	// Bucket and Key locate the object.
	Bucket, Key string
	// Class is the pointer's class name: PointerClass or LegacyPointerClass. AppendJSON writes
	// PointerClass when it is empty.
	Class string
}

// String returns the pointer as an s3:// URL.
func (p Pointer) String() string { return "s3://" + p.Bucket + "/" + p.Key }

// AppendJSON appends the pointer's body, exactly as the Java library's Jackson writer produces
// it: ["<class>",{"s3BucketName":"<bucket>","s3Key":"<key>"}] with no spaces.
func (p Pointer) AppendJSON(dst []byte) []byte {
	class := p.Class
	if class == "" {
		class = PointerClass
	}
	dst = append(dst, '[')
	dst = appendJSONString(dst, class)
	dst = append(dst, `,{"s3BucketName":`...)
	dst = appendJSONString(dst, p.Bucket)
	dst = append(dst, `,"s3Key":`...)
	dst = appendJSONString(dst, p.Key)
	return append(dst, "}]"...)
}

// Body returns the pointer's message body (see AppendJSON).
func (p Pointer) Body() string {
	return string(p.AppendJSON(make([]byte, 0, 96+len(p.Bucket)+len(p.Key))))
}

// appendJSONString appends s as a JSON string without HTML escaping (as Jackson writes it).
func appendJSONString(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimRight(buf.Bytes(), "\n")...)
}

// MaybePointer reports whether body could be a pointer: its first byte is not '{' (an envelope
// is a JSON object, a pointer a JSON array). It is the worker's one-byte test on the hot path;
// ParsePointer decides.
func MaybePointer(body string) bool { return len(body) > 0 && body[0] != '{' }

// ParsePointer reads a pointer body. It accepts both class names, whitespace between tokens and
// unknown fields in the object (as the Java library's reader does), and requires a non-empty
// bucket and key. Any other body yields an error wrapping ErrNotPointer.
func ParsePointer(body string) (Pointer, error) {
	b := bytes.TrimLeft([]byte(body), " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return Pointer{}, fmt.Errorf("%w: the body is not a JSON array", ErrNotPointer)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return Pointer{}, fmt.Errorf("%w: %v", ErrNotPointer, err)
	}
	if len(parts) != 2 {
		return Pointer{}, fmt.Errorf("%w: the array has %d elements, want 2 (class name, object)", ErrNotPointer, len(parts))
	}
	var p Pointer
	if err := json.Unmarshal(parts[0], &p.Class); err != nil {
		return Pointer{}, fmt.Errorf("%w: the first element is not a class name", ErrNotPointer)
	}
	if p.Class != PointerClass && p.Class != LegacyPointerClass {
		return Pointer{}, fmt.Errorf("%w: class %q is neither %s nor %s", ErrNotPointer, p.Class, PointerClass, LegacyPointerClass)
	}
	var obj struct {
		Bucket *string `json:"s3BucketName"`
		Key    *string `json:"s3Key"`
	}
	if t := bytes.TrimLeft(parts[1], " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return Pointer{}, fmt.Errorf("%w: the second element is not an object", ErrNotPointer)
	}
	if err := json.Unmarshal(parts[1], &obj); err != nil {
		return Pointer{}, fmt.Errorf("%w: the second element: %v", ErrNotPointer, err)
	}
	if obj.Bucket == nil || *obj.Bucket == "" {
		return Pointer{}, fmt.Errorf("%w: s3BucketName is missing or empty", ErrNotPointer)
	}
	if obj.Key == nil || *obj.Key == "" {
		return Pointer{}, fmt.Errorf("%w: s3Key is missing or empty", ErrNotPointer)
	}
	p.Bucket, p.Key = *obj.Bucket, *obj.Key
	return p, nil
}

// SizeValue returns the value of the size attribute for a payload of n bytes: its decimal size.
func SizeValue(n int) string { return strconv.Itoa(n) }

// SizeFrom returns the payload size recorded in a message's attributes (SizeAttribute, else
// LegacySizeAttribute), given a lookup of an attribute's string value. ok is false when neither
// attribute is present or its value is not a non-negative integer.
func SizeFrom(lookup func(name string) (string, bool)) (size int64, name string, ok bool) {
	for _, n := range [...]string{SizeAttribute, LegacySizeAttribute} {
		v, found := lookup(n)
		if !found {
			continue
		}
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s < 0 {
			return 0, n, false
		}
		return s, n, true
	}
	return 0, "", false
}

// IsSizeAttribute reports whether name is one of the reserved size attributes.
func IsSizeAttribute(name string) bool { return name == SizeAttribute || name == LegacySizeAttribute }
