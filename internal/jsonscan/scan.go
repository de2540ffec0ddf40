// Package jsonscan holds the JSON primitives shared by the hot-path decoders (internal/sqsevent
// and pkg/jobs' envelope parser): whitespace, strings (scan, validate, unescape, and scan and
// unescape into a buffer in one pass), numbers, literals and a validating skip of any value. It works on strings by index and
// allocates only to report an error, so callers can hand out substrings of their input without
// copying. Strings are scanned a word (8 bytes) at a time and long runs with the vectorized
// strings.IndexByte.
//
// It accepts exactly what encoding/json accepts: RFC 8259 JSON, any bytes ≥ 0x20 inside strings
// (invalid UTF-8 included; [Unquote] turns it into U+FFFD as encoding/json does) and nesting up to
// [MaxDepth] arrays and objects.
package jsonscan

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted, encoding/json's limit.
const MaxDepth = 10000

// Error is a syntax or type error at a byte offset of the input.
type Error struct {
	// Offset is the byte offset of the problem in the input.
	Offset int
	// Msg says what is wrong.
	Msg string
}

func (e *Error) Error() string { return "offset " + strconv.Itoa(e.Offset) + ": " + e.Msg }

// Errorf returns an *Error at offset off.
func Errorf(off int, format string, args ...any) error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Describe names what is at s[i] for an error message: a quoted character or "end of input".
func Describe(s string, i int) string {
	if i >= len(s) {
		return "end of input"
	}
	return fmt.Sprintf("%q", s[i])
}

// Kind names the JSON value that starts with c, for type errors.
func Kind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// EOF is the error for input that ends at i in the middle of a value.
func EOF(i int) error {
	return &Error{Offset: i, Msg: "unexpected end of JSON input"}
}

// Unexpected is the error for the character at s[i] when it is not what the grammar allows;
// context says where it is, e.g. "looking for beginning of value".
func Unexpected(s string, i int, context string) error {
	if i >= len(s) {
		return EOF(i)
	}
	return Errorf(i, "invalid character %q %s", s[i], context)
}

// isSpace marks the four JSON whitespace bytes.
var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// SkipSpace returns the index of the first non-whitespace byte at or after i.
func SkipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && isSpace[s[i]] {
		i++
	}
	return i
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads s[i:i+8] as a little-endian word (one unaligned load once compiled).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// String scans the JSON string whose opening quote is s[i]. It returns the index just after the
// closing quote and whether the contents (s[i+1:end-1]) must go through [Unquote]: they hold an
// escape or invalid UTF-8. It checks every escape.
func String(s string, i int) (end int, unquote bool, err error) {
	j, done := plainPrefix(s, i)
	if done {
		return j + 1, false, nil
	}
	return slowString(s, i, j, true)
}

// SkipString is [String] for a string whose value is not needed: it validates the syntax and
// returns the index just after the closing quote.
func SkipString(s string, i int) (int, error) {
	j, done := plainPrefix(s, i)
	if done {
		return j + 1, nil
	}
	end, _, err := slowString(s, i, j, false)
	return end, err
}

// PlainString reports whether the JSON string whose opening quote is s[i] is printable ASCII
// without escapes, so that its value is s[i+1:end-1], and returns end, the index after it.
func PlainString(s string, i int) (end int, ok bool) {
	j, done := plainPrefix(s, i)
	if !done {
		return 0, false
	}
	return j + 1, true
}

// plainPrefix looks for the end of the string that starts at s[i] == '"' on the fast paths. It
// returns the index of the closing quote and true when the contents are printable ASCII without
// escapes, or else an index up to which they are.
func plainPrefix(s string, i int) (int, bool) {
	j := i + 1
	// Short strings (keys, most values): a word at a time.
	for range 2 {
		if j+8 > len(s) {
			break
		}
		if m := stops(load64(s, j)); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			return j, s[j] == '"'
		}
		j += 8
	}
	// Longer ones: the next quote with the vectorized IndexByte, then the bytes before it.
	if q := strings.IndexByte(s[j:], '"'); q >= 0 {
		if seg := s[j : j+q]; printableASCII(seg) && strings.IndexByte(seg, '\\') < 0 {
			return j + q, true
		}
	}
	return j, false
}

// stops returns a word with the high bit set in (at least) the lowest byte of x that is '"',
// '\\', a control character or ≥ 0x80, and no bit below it.
func stops(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return ((q-lsb)&^q | (b-lsb)&^b | (x-lsb*0x20)&^x | x) & msb
}

// printableASCII reports whether every byte of s is in [0x20, 0x7f].
func printableASCII(s string) bool {
	if len(s) < 8 {
		for k := 0; k < len(s); k++ {
			if c := s[k]; c < 0x20 || c >= utf8.RuneSelf {
				return false
			}
		}
		return true
	}
	// A byte below 0x20 borrows its word's high bit, a byte above 0x7f has it set; a borrow
	// can only come from a byte that already fails.
	var acc uint64
	k := 0
	for ; k+16 <= len(s); k += 16 {
		x, y := load64(s, k), load64(s, k+8)
		acc |= (x - lsb*0x20) | x | (y - lsb*0x20) | y
	}
	if k+8 <= len(s) {
		x := load64(s, k)
		acc |= (x - lsb*0x20) | x
	}
	x := load64(s, len(s)-8) // the tail, overlapping the last whole word
	acc |= (x - lsb*0x20) | x
	return acc&msb == 0
}

// strClass tells slowString what a byte inside a string is: 0 plain, 1 quote, 2 backslash,
// 3 control character, 4 start of a multi-byte sequence (or invalid UTF-8).
var strClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 3
	}
	t['"'] = 1
	t['\\'] = 2
	for c := 0x80; c < 0x100; c++ {
		t[c] = 4
	}
	return t
}()

// slowString scans the string that starts at s[start] byte by byte from s[i]; with checkUTF8 it
// notes invalid UTF-8.
func slowString(s string, start, i int, checkUTF8 bool) (end int, unquote bool, err error) {
	for i < len(s) {
		switch strClass[s[i]] {
		case 0:
			i++
		case 1:
			return i + 1, unquote, nil
		case 2:
			n, err := escape(s, i)
			if err != nil {
				return 0, false, err
			}
			i += n
			unquote = true
		case 3:
			return 0, false, control(s, i)
		default:
			if !checkUTF8 {
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				unquote = true
			}
			i += size
		}
	}
	return 0, false, unterminated(start, len(s))
}

func unterminated(start, end int) error {
	return &Error{Offset: end, Msg: "unexpected end of JSON input in the string that starts at offset " + strconv.Itoa(start)}
}

func control(s string, i int) error {
	return Errorf(i, "invalid character %q in string literal", s[i])
}

// escape checks the escape sequence at s[i] == '\\' and returns its length.
func escape(s string, i int) (int, error) {
	if i+1 >= len(s) {
		return 0, EOF(len(s))
	}
	switch s[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for j := i + 2; j < i+6; j++ {
			if j >= len(s) {
				return 0, EOF(len(s))
			}
			if unhex[s[j]] < 0 {
				return 0, Errorf(j, "invalid character %q in \\u hexadecimal character escape", s[j])
			}
		}
		return 6, nil
	}
	return 0, Errorf(i+1, "invalid character %q in string escape code", s[i+1])
}

var unhex = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = int8(c - 'a' + 10)
		t[c-'a'+'A'] = int8(c - 'a' + 10)
	}
	return t
}()

// hex4 decodes the four hex digits of a \u escape (already checked), or returns -1 when raw does
// not start with a complete one.
func hex4(raw string) rune {
	if len(raw) < 6 || raw[0] != '\\' || raw[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range []byte(raw[2:6]) {
		v := unhex[c]
		if v < 0 {
			return -1
		}
		r = r<<4 | rune(v)
	}
	return r
}

// AppendDecoded scans the JSON string whose opening quote is s[i], like [String], and appends its
// value to dst in the same pass, returning the extended slice and the index after the closing
// quote. A string with invalid UTF-8 (whose value replaces it with U+FFFD) stops the scan with
// ok false and dst unextended; the caller then uses [String] and [Unquote].
func AppendDecoded(dst []byte, s string, i int) (out []byte, end int, ok bool, err error) {
	n := len(dst)
	r := i + 1
	for {
		var k int
		dst, k = appendRun(dst, s, r)
		if k >= len(s) {
			return dst[:n], 0, false, unterminated(i, len(s))
		}
		switch strClass[s[k]] {
		case 1:
			return dst, k + 1, true, nil
		case 2:
			if k+1 < len(s) {
				if c := unescape[s[k+1]]; c != 0 {
					dst = append(dst, c)
					r = k + 2
					continue
				}
			}
			esc, err := escape(s, k)
			if err != nil {
				return dst[:n], 0, false, err
			}
			r = k + esc
			u := hex4(s[k:]) // esc == 6: a two-byte escape took the branch above
			if utf16.IsSurrogate(u) {
				if dec := utf16.DecodeRune(u, hex4(s[r:])); dec != utf8.RuneError {
					u = dec
					r += 6
				} else {
					u = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, u)
		case 3:
			return dst[:n], 0, false, control(s, k)
		default:
			c, size := utf8.DecodeRuneInString(s[k:])
			if c == utf8.RuneError && size == 1 {
				return dst[:n], 0, false, nil
			}
			dst = append(dst, s[k:k+size]...)
			r = k + size
		}
	}
}

// appendRun appends s[r:k] to dst, where k is the index of the next stop (see nextStop), and
// returns k. The short runs between the escapes of an escaped document take one or two word
// loads and stores: the words are stored whole into dst's spare capacity, past what is appended
// (bytes no value holds: values end at len(dst)).
func appendRun(dst []byte, s string, r int) ([]byte, int) {
	if r+16 <= len(s) {
		dst = slices.Grow(dst, 16)
		w := len(dst)
		buf := dst[w : w+16]
		x := load64(s, r)
		binary.LittleEndian.PutUint64(buf, x)
		if m := stops(x); m != 0 {
			k := bits.TrailingZeros64(m) >> 3
			return dst[:w+k], r + k
		}
		y := load64(s, r+8)
		binary.LittleEndian.PutUint64(buf[8:], y)
		if m := stops(y); m != 0 {
			k := 8 + bits.TrailingZeros64(m)>>3
			return dst[:w+k], r + k
		}
		dst, r = dst[:w+16], r+16
	}
	k := nextStop(s, r)
	return append(dst, s[r:k]...), k
}

// unescape maps the character after a backslash of a two-byte escape to its value.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// nextStop returns the index of the first byte at or after k that is a quote, a backslash, a
// control character or ≥ 0x80, or len(s).
func nextStop(s string, k int) int {
	for range 2 {
		if k+8 > len(s) {
			break
		}
		if m := stops(load64(s, k)); m != 0 {
			return k + bits.TrailingZeros64(m)>>3
		}
		k += 8
	}
	// A long run: when the bytes up to the next quote are plain, that quote is the stop.
	if q := strings.IndexByte(s[k:], '"'); q >= 16 && s[k+q-1] != '\\' {
		if seg := s[k : k+q]; printableASCII(seg) && strings.IndexByte(seg, '\\') < 0 {
			return k + q
		}
	}
	for k+8 <= len(s) {
		if m := stops(load64(s, k)); m != 0 {
			return k + bits.TrailingZeros64(m)>>3
		}
		k += 8
	}
	for k < len(s) && strClass[s[k]] == 0 {
		k++
	}
	return k
}

// Unquote appends the value of the string contents raw (between the quotes, already checked by
// [String]) to dst, as encoding/json decodes it: escapes resolved, surrogate pairs combined,
// lone surrogates and invalid UTF-8 replaced with U+FFFD. Escapes only shrink, so the result is
// never longer than raw unless raw holds invalid UTF-8 (one byte becomes three).
func Unquote(dst []byte, raw string) []byte {
	i := 0
	for i < len(raw) {
		// Copy the run up to the next backslash or non-ASCII byte.
		j := i
		for j+8 <= len(raw) {
			x := load64(raw, j)
			b := x ^ (lsb * '\\')
			if m := ((b-lsb)&^b | x) & msb; m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < len(raw) && raw[j] != '\\' && raw[j] < utf8.RuneSelf {
			j++
		}
		dst = append(dst, raw[i:j]...)
		if j >= len(raw) {
			break
		}
		if c := raw[j]; c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(raw[j:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, raw[j:j+size]...)
			}
			i = j + size
			continue
		}
		// A backslash: String checked that a complete escape follows.
		switch raw[j+1] {
		case '"', '\\', '/':
			dst = append(dst, raw[j+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[j:])
			j += 6
			if utf16.IsSurrogate(r) {
				if dec := utf16.DecodeRune(r, hex4(raw[j:])); dec != utf8.RuneError {
					r = dec
					j += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			i = j
			continue
		}
		i = j + 2
	}
	return dst
}

// Literal checks that the literal lit (true, false or null) is at s[i] and returns the index
// after it.
func Literal(s string, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(s) {
			return 0, EOF(len(s))
		}
		if s[i+k] != lit[k] {
			return 0, Errorf(i+k, "invalid character %q in literal %s (expecting %q)", s[i+k], lit, lit[k])
		}
	}
	return i + len(lit), nil
}

// Number checks the JSON number at s[i] and returns the index after it and whether it is an
// integer (no fraction, no exponent).
func Number(s string, i int) (end int, integer bool, err error) {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return 0, false, EOF(i)
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return 0, false, Errorf(i, "invalid character %q in numeric literal", s[i])
	}
	integer = true
	if i < len(s) && s[i] == '.' {
		integer = false
		i++
		if i >= len(s) {
			return 0, false, EOF(i)
		}
		if s[i] < '0' || s[i] > '9' {
			return 0, false, Errorf(i, "invalid character %q after decimal point in numeric literal", s[i])
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		integer = false
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) {
			return 0, false, EOF(i)
		}
		if s[i] < '0' || s[i] > '9' {
			return 0, false, Errorf(i, "invalid character %q in exponent of numeric literal", s[i])
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i, integer, nil
}

// SkipValue checks the JSON value at s[i] (no leading whitespace) and returns the index after
// it. depth is the number of arrays and objects that enclose the value.
func SkipValue(s string, i, depth int) (int, error) {
	if i >= len(s) {
		return 0, EOF(i)
	}
	switch c := s[i]; c {
	case '"':
		return SkipString(s, i)
	case '{':
		return skipObject(s, i, depth+1)
	case '[':
		return skipArray(s, i, depth+1)
	case 't':
		return Literal(s, i, "true")
	case 'f':
		return Literal(s, i, "false")
	case 'n':
		return Literal(s, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			end, _, err := Number(s, i)
			return end, err
		}
	}
	return 0, Unexpected(s, i, "looking for beginning of value")
}

func tooDeep(i int) error {
	return Errorf(i, "exceeded max depth (%d nested arrays and objects)", MaxDepth)
}

func skipObject(s string, i, depth int) (int, error) {
	if depth > MaxDepth {
		return 0, tooDeep(i)
	}
	i = SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, nil
	}
	var err error
	for {
		if i >= len(s) || s[i] != '"' {
			return 0, Unexpected(s, i, "looking for beginning of object key string")
		}
		if i, err = SkipString(s, i); err != nil {
			return 0, err
		}
		i = SkipSpace(s, i)
		if i >= len(s) || s[i] != ':' {
			return 0, Unexpected(s, i, "after object key")
		}
		if i, err = SkipValue(s, SkipSpace(s, i+1), depth); err != nil {
			return 0, err
		}
		i = SkipSpace(s, i)
		if i < len(s) {
			switch s[i] {
			case ',':
				i = SkipSpace(s, i+1)
				continue
			case '}':
				return i + 1, nil
			}
		}
		return 0, Unexpected(s, i, "after object key:value pair")
	}
}

func skipArray(s string, i, depth int) (int, error) {
	if depth > MaxDepth {
		return 0, tooDeep(i)
	}
	i = SkipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1, nil
	}
	var err error
	for {
		if i, err = SkipValue(s, i, depth); err != nil {
			return 0, err
		}
		i = SkipSpace(s, i)
		if i < len(s) {
			switch s[i] {
			case ',':
				i = SkipSpace(s, i+1)
				continue
			case ']':
				return i + 1, nil
			}
		}
		return 0, Unexpected(s, i, "after array element")
	}
}

// End checks that only whitespace follows the top-level value that ends at i.
func End(s string, i int) error {
	if i = SkipSpace(s, i); i < len(s) {
		return Errorf(i, "invalid character %q after top-level value", s[i])
	}
	return nil
}
