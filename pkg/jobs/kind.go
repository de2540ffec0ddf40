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
