package jobs_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// kindPattern is the kind rule of envelope v1 (docs/envelope.md and the schema).
const kindPattern = `^[a-z0-9][a-z0-9._:-]{0,127}$`

func TestValidateKindAcceptsValidKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{
		"a",
		"0",
		"email.send",
		"a:b-c_d.e",
		"9.a",
		"a.",  // punctuation may end a kind
		"a--", // and repeat
		"billing:invoice.v2",
		strings.Repeat("a", 128),
		"a" + strings.Repeat("._:-", 31) + "xyz", // 128 characters using every punctuation mark
	} {
		if err := jobs.ValidateKind(kind); err != nil {
			t.Errorf("ValidateKind(%q) = %v, want nil", kind, err)
		}
	}
}

func TestValidateKindRejectsInvalidKindsWithReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind string
		mentions   []string // all must appear in the message
	}{
		{"empty", "", []string{"empty"}},
		{"upper case", "A", []string{`"A"`, "'A'", "at 0", kindPattern}},
		{"upper case later", "emailSend", []string{`"emailSend"`, "'S'", "at 5"}},
		{"leading dot", ".a", []string{`".a"`, "'.'", "at 0"}},
		{"leading dash", "-a", []string{`"-a"`, "'-'", "at 0"}},
		{"leading underscore", "_a", []string{`"_a"`, "'_'", "at 0"}},
		{"leading colon", ":a", []string{`":a"`, "':'", "at 0"}},
		{"space", "a b", []string{`"a b"`, "' '", "at 1"}},
		{"slash", "a/b", []string{`"a/b"`, "'/'", "at 1"}},
		{"non-ASCII", "é", []string{`"é"`, "at 0", "not allowed"}},
		{"NUL", "a\x00", []string{`"a\x00"`, "at 1"}},
		{"129 characters", strings.Repeat("a", 129), []string{"129", "128"}},
		{"129 characters, otherwise invalid", strings.Repeat("A", 129), []string{"129", "128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := jobs.ValidateKind(tc.kind)
			if err == nil {
				t.Fatalf("ValidateKind(%q) = nil, want an error", tc.kind)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("ValidateKind(%q) = %q, want it to mention %q", tc.kind, err, m)
				}
			}
		})
	}
}

func TestValidateKindLongKindMessageIsTruncated(t *testing.T) {
	t.Parallel()
	err := jobs.ValidateKind(strings.Repeat("a", 10_000))
	if err == nil {
		t.Fatal("want an error")
	}
	if n := len(err.Error()); n > 200 {
		t.Errorf("message is %d bytes long, want the kind truncated: %q", n, err)
	}
}

func TestMaxKindLengthIs128(t *testing.T) {
	t.Parallel()
	if jobs.MaxKindLength != 128 {
		t.Errorf("MaxKindLength = %d, want 128 (the limit of envelope v1)", jobs.MaxKindLength)
	}
}

// TestValidateKindAgreesWithPattern compares ValidateKind with the documented regular expression
// for every byte as first and as later character, and at the length limits.
func TestValidateKindAgreesWithPattern(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(kindPattern)
	var inputs []string
	for c := 0; c < 256; c++ {
		b := string([]byte{byte(c)})
		inputs = append(inputs, b, "a"+b, "a"+b+"a", b+"a")
	}
	for _, n := range []int{127, 128, 129} {
		inputs = append(inputs, strings.Repeat("a", n), "a"+strings.Repeat(".", n-1), "."+strings.Repeat("a", n-1))
	}
	inputs = append(inputs, "é", "aé", "a\u2028", "")
	for _, in := range inputs {
		if got, want := jobs.ValidateKind(in) == nil, re.MatchString(in); got != want {
			t.Errorf("kind %q: ValidateKind accepts=%v, %s matches=%v", in, got, kindPattern, want)
		}
	}
}
