// Package termsafe makes untrusted text safe to print on a terminal. A job's id, key, kind, error
// or attribute comes from whoever could send to the queue or write to the table: printed as it
// is, `\x1b]0;title\x07` retitles the window, `\x1b[2J` clears the screen, `\r` overwrites what
// was printed before it, and U+202E reverses the text that follows.
//
// [Escape] replaces every character a terminal (or a bidirectional-text renderer) acts on with a
// visible escape, in Go's notation: the C0 controls and DEL as `\x1b` (with `\t`, `\n`, `\r` for
// the common three), the C1 controls as `\u009b`, the Unicode bidirectional controls (U+061C,
// U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators (U+2028,
// U+2029) as `\u202e`, and a byte that is not UTF-8 as `\xff` (to an 8-bit terminal, a lone 0x9b
// byte is a control sequence introducer). Everything else, the backslash included, is kept as it
// is, so ordinary text reads unchanged. [Truncate] and [Line] shorten after escaping, never in
// the middle of an escape or of a UTF-8 sequence.
//
// The CLI's text and table output goes through it; JSON output needs no such care (encoding/json
// escapes the C0 controls, and a JSON reader is not a terminal).
package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks text that [Truncate] or [Line] cut.
const Ellipsis = "…"

// Unsafe reports whether r is printed as an escape: a C0 control, DEL, a C1 control, a
// bidirectional control, or the line or paragraph separator.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional controls
	case r == 0x2028, r == 0x2029:
		return true // line and paragraph separators
	}
	return false
}

// IsClean reports whether s is printed as it is: valid UTF-8 without an [Unsafe] character.
func IsClean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || Unsafe(r) {
			return false
		}
		i += size
	}
	return true
}

// Escape returns s with every [Unsafe] character, and every byte that is not UTF-8, replaced by
// its visible escape (see the package documentation). A clean s is returned as it is.
func Escape(s string) string {
	if IsClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		tok, size := next(s[i:])
		b.WriteString(tok)
		i += size
	}
	return b.String()
}

// Truncate returns Escape(s) cut to at most n runes, ending in [Ellipsis] when it was cut. The
// cut falls between escapes and whole characters, never inside one. n below 1 gives "".
func Truncate(s string, n int) string {
	out, _ := truncate(s, n)
	return out
}

// Line returns the first line of s, escaped and cut to at most n runes, for one cell of a table:
// a tab becomes a space, and [Ellipsis] marks that something was left out (a later line, or the
// end of a long line). A CRLF ends a line as an LF does; a lone CR is escaped.
func Line(s string, n int) string {
	more := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, more = strings.TrimSuffix(s[:i], "\r"), true
	}
	s = strings.ReplaceAll(s, "\t", " ")
	if !more {
		return Truncate(s, n)
	}
	if n < 1 {
		return ""
	}
	if out, cut := truncate(s, n-1); !cut {
		return out + Ellipsis
	}
	return Truncate(s, n)
}

// Lines splits s into its lines (at LF; a CRLF counts as one break) and escapes each one, for
// text printed over several lines, such as an error with a stack trace. Tabs are escaped too:
// callers that want them as spaces replace them first.
func Lines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(strings.TrimSuffix(l, "\r"))
	}
	return lines
}

// truncate is Truncate, and whether it cut.
func truncate(s string, n int) (string, bool) {
	if n < 1 {
		return "", s != ""
	}
	esc := Escape(s)
	if utf8.RuneCountInString(esc) <= n {
		return esc, false
	}
	var b strings.Builder
	used := 0
	for i := 0; i < len(s); {
		tok, size := next(s[i:])
		w := utf8.RuneCountInString(tok)
		if used+w > n-1 {
			break
		}
		b.WriteString(tok)
		used += w
		i += size
	}
	b.WriteString(Ellipsis)
	return b.String(), true
}

const hexDigits = "0123456789abcdef"

// next returns the printed form of the character (or invalid byte) s starts with, and its length
// in s.
func next(s string) (string, int) {
	c := s[0]
	if c < utf8.RuneSelf {
		switch {
		case c == '\t':
			return `\t`, 1
		case c == '\n':
			return `\n`, 1
		case c == '\r':
			return `\r`, 1
		case c < 0x20 || c == 0x7f:
			return `\x` + string(hexDigits[c>>4]) + string(hexDigits[c&0xf]), 1
		}
		return s[:1], 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 {
		return `\x` + string(hexDigits[c>>4]) + string(hexDigits[c&0xf]), 1
	}
	if Unsafe(r) {
		return `\u` + string(hexDigits[r>>12&0xf]) + string(hexDigits[r>>8&0xf]) + string(hexDigits[r>>4&0xf]) + string(hexDigits[r&0xf]), size
	}
	return s[:size], size
}
