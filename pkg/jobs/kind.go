package jobs

import (
	"fmt"
	"unicode/utf8"
)

// MaxKindLength is the longest valid kind.
const MaxKindLength = 128

// ValidateKind reports whether kind matches ^[a-z0-9][a-z0-9._:-]{0,127}$.
func ValidateKind(kind string) error {
	if kind == "" {
		return fmt.Errorf("kind is empty")
	}
	if len(kind) > MaxKindLength {
		return fmt.Errorf("kind %.32q… is %d characters long, the limit is %d", kind, len(kind), MaxKindLength)
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == ':' || c == '-') && i > 0:
		default:
			r, _ := utf8.DecodeRuneInString(kind[i:])
			return fmt.Errorf("kind %q: character %q at %d is not allowed (want ^[a-z0-9][a-z0-9._:-]{0,127}$)", kind, r, i)
		}
	}
	return nil
}

// MaxQueueNameLength is the longest queue name of a stack's queue set (see [WithQueue]).
const MaxQueueNameLength = 20

// ValidateQueueName reports whether name is a queue name of a stack's queue set: a lowercase
// letter, then up to 19 lowercase letters, digits or '_' (^[a-z][a-z0-9_]{0,19}$), and not
// "dlq" or "jobs", which name other queues of a stack ("<stack>-jobs-dlq", and a stack named
// "<stack>-jobs"). The queue's SQS name derives from it: "<stack>-jobs-<name>", with
// "-dlq" for its DLQ; "default" names the stack's default queue, "<stack>-jobs".
func ValidateQueueName(name string) error {
	if name == "" {
		return fmt.Errorf("queue name is empty")
	}
	if len(name) > MaxQueueNameLength {
		return fmt.Errorf("queue name %.24q is %d characters long, the limit is %d", name, len(name), MaxQueueNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
		case (c >= '0' && c <= '9' || c == '_') && i > 0:
		default:
			r, _ := utf8.DecodeRuneInString(name[i:])
			return fmt.Errorf("queue name %q: character %q at %d is not allowed (want ^[a-z][a-z0-9_]{0,19}$)", name, r, i)
		}
	}
	if name == "dlq" || name == "jobs" {
		return fmt.Errorf("queue name %q is reserved (it names other queues of a stack)", name)
	}
	return nil
}
