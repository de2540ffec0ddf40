package producer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/payload"
)

// Limits the producer enforces before sending.
const (
	// MaxMessageSize is the largest job message the producer sends, body + message attributes
	// counted the way SQS counts them, on a queue whose MaximumMessageSize is 1 MiB (1,048,576
	// bytes, Config.QueueMaxMessageSize's default): that minus 8 KiB kept for what the worker
	// adds when it dead-letters or re-sends the job. A smaller queue lowers it.
	MaxMessageSize = 1<<20 - 8<<10
	// MaxBatchRequestSize is SQS's limit on the total size of one SendMessageBatch request.
	MaxBatchRequestSize = 1 << 20
	// MaxBatchEntries is SQS's limit on the entries of one SendMessageBatch request.
	MaxBatchEntries = 10
	// MaxAttributes is how many message attributes a job may carry: SQS allows 10 per message,
	// and the worker keeps 2 for itself.
	MaxAttributes = 8
	// MaxDelay is the longest delay SQS DelaySeconds expresses (900 s).
	MaxDelay = 15 * time.Minute
	// MaxKeyLength is the longest idempotency key, in bytes.
	MaxKeyLength = 1024
	// MaxIDLength is the longest job id given with WithID.
	MaxIDLength = 128
	// MaxGroupIDLength and MaxDeduplicationIDLength are SQS's limits.
	MaxGroupIDLength         = 128
	MaxDeduplicationIDLength = 128
	// maxAttributeNameLength and maxAttributeTypeLength are SQS's limits.
	maxAttributeNameLength = 256
	maxAttributeTypeLength = 256
)

// ReservedAttributePrefix starts the names of the message attributes the worker writes (such as
// "sqsworker.failure"); jobs may not use it.
const ReservedAttributePrefix = "sqsworker."

// validSQSToken reports whether s is 1 to 128 characters of letters, digits and ASCII
// punctuation, as SQS requires of message group and deduplication ids.
func validSQSToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// firstBadToken returns the index of the first character SQS does not allow in a group or
// deduplication id, or -1.
func firstBadToken(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return i
		}
	}
	return -1
}

func checkToken(field, s string) error {
	switch {
	case s == "":
		return invalid("%s is empty", field)
	case len(s) > 128:
		return invalid("%s %.32q… is %d characters long, SQS allows at most 128", field, s, len(s))
	}
	if i := firstBadToken(s); i >= 0 {
		return invalid("%s %q: character %q at %d is not allowed (SQS allows letters, digits and ASCII punctuation)", field, s, s[i], i)
	}
	return nil
}

// deduplicationID derives a FIFO deduplication id from the kind and the effective key:
// "kind:key" when SQS accepts it as it is, else its hex SHA-256 (64 characters). The two forms
// cannot collide: the first contains ':', the second does not.
func deduplicationID(kind, key string) string {
	if len(kind)+1+len(key) <= MaxDeduplicationIDLength && firstBadToken(key) < 0 {
		return kind + ":" + key
	}
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{':'})
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

func checkID(id string) error {
	switch {
	case id == "":
		return invalid("id is empty")
	case len(id) > MaxIDLength:
		return invalid("id %.32q… is %d characters long, the limit is %d", id, len(id), MaxIDLength)
	}
	if i := firstBadToken(id); i >= 0 {
		return invalid("id %q: character %q at %d is not allowed (want printable ASCII without spaces)", id, id[i], i)
	}
	return nil
}

func checkKey(key string) error {
	switch {
	case key == "":
		return invalid("key is empty (omit WithKey to use the job id)")
	case len(key) > MaxKeyLength:
		return invalid("key %.32q… is %d bytes long, the limit is %d", key, len(key), MaxKeyLength)
	case !utf8.ValidString(key):
		return invalid("key %q is not valid UTF-8", key)
	}
	return nil
}

// checkAttributes validates a job's message attributes and returns their size as SQS counts it:
// for each attribute, its name, data type and value bytes.
func checkAttributes(attrs map[string]types.MessageAttributeValue) (int, error) {
	if len(attrs) > MaxAttributes {
		return 0, invalid("%d message attributes, at most %d are allowed (SQS allows 10 per message and the worker keeps 2)", len(attrs), MaxAttributes)
	}
	size := 0
	for name, v := range attrs {
		if err := checkAttributeName(name); err != nil {
			return 0, err
		}
		n, err := attributeValueSize(name, v)
		if err != nil {
			return 0, err
		}
		size += len(name) + n
	}
	return size, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func checkAttributeName(name string) error {
	switch {
	case name == "":
		return invalid("message attribute name is empty")
	case len(name) > maxAttributeNameLength:
		return invalid("message attribute name %.32q… is %d characters long, SQS allows at most %d", name, len(name), maxAttributeNameLength)
	case hasPrefixFold(name, "AWS.") || hasPrefixFold(name, "Amazon."):
		return invalid("message attribute name %q: the prefixes \"AWS.\" and \"Amazon.\" are reserved by AWS", name)
	case hasPrefixFold(name, ReservedAttributePrefix):
		return invalid("message attribute name %q: the prefix %q is reserved for the sqsworker worker", name, ReservedAttributePrefix)
	case payload.IsSizeAttribute(name):
		return invalid("message attribute name %q is reserved: it marks a message whose payload is in S3 (the Amazon SQS Extended Client's format)", name)
	case name[0] == '.' || name[len(name)-1] == '.':
		return invalid("message attribute name %q must not start or end with a period", name)
	case strings.Contains(name, ".."):
		return invalid("message attribute name %q must not contain consecutive periods", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return invalid("message attribute name %q: character %q at %d is not allowed (SQS allows letters, digits, '_', '-' and '.')", name, c, i)
		}
	}
	return nil
}

// attributeValueSize checks an attribute's data type and value and returns their size.
func attributeValueSize(name string, v types.MessageAttributeValue) (int, error) {
	if v.DataType == nil || *v.DataType == "" {
		return 0, invalid("message attribute %q has no DataType (want String, Number or Binary, optionally followed by .label)", name)
	}
	dt := *v.DataType
	if len(dt) > maxAttributeTypeLength {
		return 0, invalid("message attribute %q: DataType is %d characters long, SQS allows at most %d", name, len(dt), maxAttributeTypeLength)
	}
	base := dt
	if i := strings.IndexByte(dt, '.'); i >= 0 {
		base = dt[:i]
		if i == len(dt)-1 {
			return 0, invalid("message attribute %q: DataType %q has an empty custom label", name, dt)
		}
	}
	if len(v.StringListValues) > 0 || len(v.BinaryListValues) > 0 {
		return 0, invalid("message attribute %q: StringListValues and BinaryListValues are not supported by SQS", name)
	}
	switch base {
	case "String", "Number":
		if v.StringValue == nil || *v.StringValue == "" {
			return 0, invalid("message attribute %q (%s) has an empty StringValue", name, dt)
		}
		if v.BinaryValue != nil {
			return 0, invalid("message attribute %q (%s) sets BinaryValue; use StringValue", name, dt)
		}
		if i, ok := validText(*v.StringValue); !ok {
			return 0, invalid("message attribute %q: StringValue has a character SQS does not allow at byte %d (invalid UTF-8 or a control character)", name, i)
		}
		if base == "Number" {
			if err := checkNumber(*v.StringValue); err != nil {
				return 0, invalid("message attribute %q (%s): StringValue %.40q %v", name, dt, *v.StringValue, err)
			}
		}
		return len(dt) + len(*v.StringValue), nil
	case "Binary":
		if len(v.BinaryValue) == 0 {
			return 0, invalid("message attribute %q (%s) has an empty BinaryValue", name, dt)
		}
		if v.StringValue != nil {
			return 0, invalid("message attribute %q (%s) sets StringValue; use BinaryValue", name, dt)
		}
		return len(dt) + len(v.BinaryValue), nil
	}
	return 0, invalid("message attribute %q: DataType %q is not String, Number or Binary (optionally followed by .label)", name, dt)
}

// validText reports whether s has only the characters SQS accepts in message text:
// #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF. If not, it returns the
// byte offset of the first bad one.
func validText(s string) (int, bool) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i, false
			}
		case r == 0x9 || r == 0xa || r == 0xd:
		case r < 0x20, r >= 0xd800 && r < 0xe000, r == 0xfffe, r == 0xffff:
			return i, false
		}
	}
	return 0, true
}

// delaySeconds checks a delay and converts it to whole seconds, rounding up. scheduled reports
// a delay SQS cannot express (beyond 15 minutes, or any on a FIFO queue): it needs a one-time
// schedule, and canSchedule says whether the producer has a scheduler.
func delaySeconds(d time.Duration, fifo, canSchedule bool) (secs int32, scheduled bool, err error) {
	switch {
	case d < 0:
		return 0, false, invalid("delay %v is negative", d)
	case d == 0:
		return 0, false, nil
	case (fifo || d > MaxDelay) && !canSchedule:
		if fifo {
			return 0, false, needsScheduler("delay %v on a FIFO queue: FIFO queues have no per-message delay, so delayed jobs there go through EventBridge Scheduler: set producer.Config.Scheduler", d)
		}
		return 0, false, needsScheduler("delay %v is longer than SQS's 15-minute maximum (DelaySeconds 0-900): longer delays go through EventBridge Scheduler: set producer.Config.Scheduler", d)
	case fifo || d > MaxDelay:
		return 0, true, nil
	}
	return int32((d + time.Second - 1) / time.Second), false, nil
}

// SQS's limits on a Number attribute: "up to 38 digits of precision, and it can be between
// 10^-128 and 10^+126" (in magnitude; 0 too), leading and trailing zeros not counting.
const (
	maxNumberDigits = 38
	minNumberExp    = -128 // the smallest magnitude: 10^-128
	maxNumberExp    = 126  // the largest magnitude: 10^126
)

// checkNumber reports why s is not a number SQS accepts as a Number attribute: a decimal with
// an optional sign, digits with an optional decimal point (at least one digit), and an optional
// exponent ("42", "-1.5", ".5", "6.02E23", "1e-7"); no spaces, no "NaN" or "Infinity", no hex,
// at most 38 significant digits, and 0 or a magnitude from 10^-128 to 10^126.
func checkNumber(s string) error {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	// The significant digits: from the first non-zero digit to the last one; point is the
	// position of the decimal point among all the digits (the number of digits before it).
	var digits, first, last, point int
	first, last, point = -1, -1, -1
	var lead byte // the first significant digit
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if c != '0' {
				if first < 0 {
					first, lead = digits, c
				}
				last = digits
			}
			digits++
			continue
		case c == '.' && point < 0:
			point = digits
			continue
		}
		break
	}
	if digits == 0 {
		return errors.New("is not a number (SQS wants a decimal such as 42, -1.5 or 6.02E23)")
	}
	if point < 0 {
		point = digits
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		start := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if exp < 1e6 { // far beyond either limit: stop growing
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if i == start {
			return errors.New("is not a number: its exponent has no digits")
		}
		if neg {
			exp = -exp
		}
	}
	if i != len(s) {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("is not a number: %q at byte %d (SQS wants a decimal such as 42, -1.5 or 6.02E23)", r, i)
	}
	if first < 0 {
		return nil // zero
	}
	if n := last - first + 1; n > maxNumberDigits {
		return fmt.Errorf("has %d significant digits, SQS keeps at most %d", n, maxNumberDigits)
	}
	// The magnitude is 10^e times a number in [1, 10): e is the place of the first significant
	// digit.
	e := point - first - 1 + exp
	if e < minNumberExp || e > maxNumberExp || (e == maxNumberExp && (last > first || lead != '1')) {
		return errors.New("is outside SQS's range for numbers: 0, or a magnitude from 10^-128 to 10^126")
	}
	return nil
}
