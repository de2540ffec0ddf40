package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var valueSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `true`, `false`, `null`, ` {"a" : [1, {"b":null}, "c\"\\\/\b\f\n\r\t\u00e9"]} `,
	`{"a":1,}`, `[1,]`, `01`, `1.`, `1e`, `-`, `"\x"`, `"\u12"`, "\"a\x01\"", `{"a" 1}`, `[1 2]`, `nul`, `{} {}`,
	"\"\xff\xfe\"", `"` + strings.Repeat("abcdefgh", 20) + `"`, `"` + strings.Repeat(`ab\"cd`, 20) + `"`,
	strings.Repeat("[", 100) + strings.Repeat("]", 100),
}

// FuzzSkipValue checks that SkipValue followed by End accepts exactly what json.Valid accepts.
func FuzzSkipValue(f *testing.F) {
	for _, s := range valueSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		i := SkipSpace(s, 0)
		end, err := SkipValue(s, i, 0)
		if err == nil {
			err = End(s, end)
		}
		if valid := json.Valid([]byte(s)); valid != (err == nil) {
			t.Fatalf("SkipValue(%q): %v; json.Valid = %v", s, err, valid)
		}
		var je *Error
		if err != nil && (!errors.As(err, &je) || je.Offset < 0 || je.Offset > len(s)) {
			t.Fatalf("SkipValue(%q): error %v without an offset inside the input", s, err)
		}
	})
}

// FuzzString checks String, SkipString, Unquote and AppendDecoded against encoding/json on a
// JSON string followed by more input.
func FuzzString(f *testing.F) {
	for _, s := range valueSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || s[0] != '"' {
			s = `"` + s
		}
		end, unquote, err := String(s, 0)
		skipEnd, skipErr := SkipString(s, 0)
		if (err == nil) != (skipErr == nil) || (err == nil && skipEnd != end) {
			t.Fatalf("String(%q) = %d, %v; SkipString = %d, %v", s, end, err, skipEnd, skipErr)
		}
		prefix := []byte("kept")
		appended, appEnd, appOK, appErr := AppendDecoded(prefix, s, 0)
		if (err == nil && appErr != nil) || (err != nil && appErr == nil && appOK) {
			t.Fatalf("AppendDecoded(%q): %v; String: %v", s, appErr, err)
		}
		if string(appended[:4]) != "kept" || (!appOK && len(appended) != 4) {
			t.Fatalf("AppendDecoded(%q) = %q, ok %v: changed what dst held, or kept a partial value", s, appended, appOK)
		}
		if err != nil {
			// The string part is invalid: encoding/json rejects it too.
			var v string
			if json.Unmarshal([]byte(s), &v) == nil {
				t.Fatalf("String(%q): %v, but encoding/json reads %q", s, err, v)
			}
			return
		}
		var want string
		if jerr := json.Unmarshal([]byte(s[:end]), &want); jerr != nil {
			t.Fatalf("String(%q) ends at %d, but encoding/json: %v", s, end, jerr)
		}
		raw := s[1 : end-1]
		got := raw
		if unquote {
			got = string(Unquote(nil, raw))
		}
		if got != want {
			t.Fatalf("value of %q = %q, want %q", s[:end], got, want)
		}
		if appOK {
			if appEnd != end || string(appended[4:]) != want {
				t.Fatalf("AppendDecoded(%q) = %q, end %d; want %q, end %d", s, appended[4:], appEnd, want, end)
			}
		} else if !strings.ContainsRune(want, '\uFFFD') {
			t.Fatalf("AppendDecoded(%q) gave up on a string without invalid UTF-8", s)
		}
	})
}
