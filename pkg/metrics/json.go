package metrics

import (
	"github.com/sqsworker/sqsworker/internal/jsonscan"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendInt appends n in decimal.
func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// appendMillis appends d in milliseconds with up to three decimals (microsecond precision),
// without trailing zeros: 1.5ms → 1.5, 42ms → 42. Negative durations (clock skew) are 0.
func appendMillis(dst []byte, d time.Duration) []byte {
	us := max(d.Microseconds(), 0)
	dst = strconv.AppendInt(dst, us/1000, 10)
	frac := us % 1000
	if frac == 0 {
		return dst
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }

// truncate cuts s to at most n bytes, at a UTF-8 boundary, marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
