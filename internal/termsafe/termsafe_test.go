package termsafe_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/internal/termsafe"
)

// raw reports whether s holds something a terminal would act on, judged with the unicode
// package's own tables rather than termsafe's: a control character (C0, DEL, C1), a
// bidirectional control, a line or paragraph separator, or a byte that is not UTF-8.
func raw(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"order-42 ünïcødé 日本 🙂 \\x1b", "order-42 ünïcødé 日本 🙂 \\x1b"}, // clean text and a literal backslash stay
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"\x1b[2J", `\x1b[2J`},
		{"a\rb", `a\rb`},
		{"a\tb\nc", `a\tb\nc`},
		{"\x00\x7f", `\x00\x7f`},
		{"ab\u202ecd", `ab\u202ecd`},
		{"\u2066\u2069\u200e\u200f\u061c", `\u2066\u2069\u200e\u200f\u061c`},
		{"\u0085\u009b", `\u0085\u009b`}, // C1 controls, as runes
		{"\x9b[2J", `\x9b[2J`},           // a lone C1 byte: not UTF-8
		{"\xff\xfe", `\xff\xfe`},
		{"a\u2028b", `a\u2028b`},
		{"\ufffd", "\ufffd"}, // the replacement character itself is text
	} {
		if got := termsafe.Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := termsafe.IsClean(tt.in); got != (tt.in == tt.want) {
			t.Errorf("IsClean(%q) = %v", tt.in, got)
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello!", 5, "hell…"},
		{"日本語テキスト", 4, "日本語…"},
		{"ab\x1b[2J", 5, "ab…"},       // `\x1b` does not fit whole: cut before it
		{"ab\x1b[2J", 7, `ab\x1b…`},   // it fits: cut after it
		{"ab\x1b[2J", 9, `ab\x1b[2J`}, // all of it
		{"\u202eabc", 4, "…"},         // `\u202e` is 6 runes
		{"\u202eabc", 8, `\u202ea…`},  // whole escape, then text
		{"x", 0, ""},
		{"🙂🙂🙂", 2, "🙂…"},
	} {
		got := termsafe.Truncate(tt.in, tt.n)
		if got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"smtp: 550\n\tat mailer.Send", 60, "smtp: 550…"},
		{"smtp: 550\r\nsecond", 60, "smtp: 550…"},
		{"a\rb", 60, `a\rb`}, // a lone CR is not a line break: it is shown
		{"a\tb", 60, "a b"},
		{"0123456789\nmore", 8, "0123456…"},
		{"0123456789", 8, "0123456…"},
		{"0123456\nmore", 8, "0123456…"},
		{"\x1b]0;pwned\x07\nrest", 12, `\x1b]0;pwne…`},
	} {
		if got := termsafe.Line(tt.in, tt.n); got != tt.want {
			t.Errorf("Line(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestLines(t *testing.T) {
	t.Parallel()
	got := termsafe.Lines("first\r\nsec\x1bond\rx\n\u202elast")
	want := []string{"first", `sec\x1bond\rx`, `\u202elast`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

// FuzzEscape: whatever the input, nothing escaped, truncated or split contains a raw control or
// bidi character or invalid UTF-8; a truncation is at most n runes and a prefix of the whole
// escape that ends between two escapes.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;title\x07", "\x1b[2J", "a\rb", "\u202e", "\x9b", "\xe2\x80", "a\u2028b\tc\n"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n%200 + 1
		if n < 1 {
			n += 200
		}
		esc := termsafe.Escape(s)
		if raw(esc) {
			t.Fatalf("Escape(%q) = %q holds a raw control", s, esc)
		}
		if !termsafe.IsClean(esc) {
			t.Fatalf("IsClean(Escape(%q)) is false", s)
		}
		if termsafe.IsClean(s) != !raw(s) {
			t.Fatalf("IsClean(%q) = %v, but the unicode tables say raw = %v", s, termsafe.IsClean(s), raw(s))
		}
		tr := termsafe.Truncate(s, n)
		if raw(tr) || utf8.RuneCountInString(tr) > n {
			t.Fatalf("Truncate(%q, %d) = %q", s, n, tr)
		}
		if tr != esc {
			prefix, ok := strings.CutSuffix(tr, termsafe.Ellipsis)
			if !ok || !strings.HasPrefix(esc, prefix) {
				t.Fatalf("Truncate(%q, %d) = %q is not a cut of %q", s, n, tr, esc)
			}
			boundary := false
			for k := 0; k <= len(s) && !boundary; k++ {
				boundary = termsafe.Escape(s[:k]) == prefix
			}
			if !boundary {
				t.Fatalf("Truncate(%q, %d) = %q cuts inside an escape or a character", s, n, tr)
			}
		}
		if l := termsafe.Line(s, n); raw(l) || utf8.RuneCountInString(l) > n {
			t.Fatalf("Line(%q, %d) = %q", s, n, l)
		}
		for _, l := range termsafe.Lines(s) {
			if raw(l) {
				t.Fatalf("Lines(%q) holds %q", s, l)
			}
		}
	})
}
