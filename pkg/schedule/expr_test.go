package schedule

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the DST tests must not depend on the machine's zoneinfo
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func mustParse(t testing.TB, s string) Expression {
	t.Helper()
	e, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return e
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseKindsAndString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		kind ExprKind
	}{
		{"at(2026-05-01T09:30:00)", KindAt},
		{"rate(1 minute)", KindRate},
		{"rate(5 minutes)", KindRate},
		{"rate(1 hour)", KindRate},
		{"rate(12 hours)", KindRate},
		{"rate(1 day)", KindRate},
		{"rate(7 days)", KindRate},
		{"cron(0 10 * * ? *)", KindCron},
		{"cron(15 12 * * ? *)", KindCron},
		{"cron(0 18 ? * MON-FRI *)", KindCron},
		{"cron(0 8 1 * ? *)", KindCron},
		{"cron(0/15 * * * ? *)", KindCron},
		{"cron(0/10 * ? * MON-FRI *)", KindCron},
		{"cron(0/5 8-17 ? * MON-FRI *)", KindCron},
		{"cron(0 9 ? * 2#1 *)", KindCron},
		{"cron(0 0 L * ? *)", KindCron},
		{"cron(0 0 15W * ? *)", KindCron},
		{"cron(0 0 ? * 6L *)", KindCron},
		{"cron(0 0 ? * L *)", KindCron},
		{"cron(0 0 1 JAN,JUL ? 2030-2199/2)", KindCron},
		{"cron(1,2,3 0-23/2 1-31 */3 ? 1970)", KindCron},
		{"cron(0 0 ? * sun,mon-wed *)", KindCron},
	} {
		e, err := Parse(tc.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		if e.Kind() != tc.kind || e.String() != tc.expr {
			t.Errorf("Parse(%q) = kind %v, String %q", tc.expr, e.Kind(), e.String())
		}
	}
	if got := KindCron.String() + KindRate.String() + KindAt.String() + ExprKind(0).String(); got != "cronrateatinvalid" {
		t.Errorf("ExprKind.String: %q", got)
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, want string }{
		{"", `want at(...), rate(...) or cron(...)`},
		{"every(5 minutes)", `unknown expression type "every": want at, rate or cron`},
		{"cron(0 10 * * ? *", `want at(...), rate(...) or cron(...)`},
		{" rate(5 minutes)", `unknown expression type " rate"`},
		// at
		{"at(2026-02-30T10:00:00)", `at date-time: want yyyy-mm-ddThh:mm:ss, got "2026-02-30T10:00:00"`},
		{"at(2026-01-01 10:00:00)", `at date-time: want yyyy-mm-ddThh:mm:ss`},
		{"at(2026-01-01T10:00)", `at date-time: want yyyy-mm-ddThh:mm:ss`},
		{"at(2026-01-01T10:00:00.5)", `at date-time: want yyyy-mm-ddThh:mm:ss`},
		{"at(2026-01-01T10:00:00Z)", `at date-time: want yyyy-mm-ddThh:mm:ss`},
		// rate
		{"rate(0 minutes)", `rate value: want a positive integer, got "0"`},
		{"rate(-5 minutes)", `rate value: want a positive integer, got "-5"`},
		{"rate(+5 minutes)", `rate value: want a positive integer, got "+5"`},
		{"rate(1.5 hours)", `rate value: want a positive integer, got "1.5"`},
		{"rate(5)", `rate: want "value unit" separated by one space, got "5"`},
		{"rate(5  minutes)", `rate: want "value unit" separated by one space`},
		{"rate(5 weeks)", `rate unit: want minute(s), hour(s) or day(s), got "weeks"`},
		{"rate(5 Minutes)", `rate unit: want minute(s), hour(s) or day(s), got "Minutes"`},
		{"rate(1 minutes)", `rate unit: value 1 takes the singular "minute", got "minutes"`},
		{"rate(1 hours)", `rate unit: value 1 takes the singular "hour", got "hours"`},
		{"rate(5 hour)", `rate unit: value 5 takes the plural "hours", got "hour"`},
		{"rate(2 day)", `rate unit: value 2 takes the plural "days", got "day"`},
		{"rate(9999999999 days)", `rate value: 9999999999 days is too long a period`},
		// cron shape
		{"cron(0 10 * * ?)", `cron: want 6 fields (minutes hours day-of-month month day-of-week year) separated by single spaces, got 5`},
		{"cron(0 10 * * ? * *)", `cron: want 6 fields`},
		{"cron(0  10 * * ? *)", `cron: want 6 fields`},
		// ? rules
		{"cron(0 10 * * * *)", "cron day-of-week: one of day-of-month and day-of-week must be `?` (got \"*\" and \"*\")"},
		{"cron(0 10 1 * MON *)", "cron day-of-week: one of day-of-month and day-of-week must be `?`"},
		{"cron(0 10 ? * ? *)", "cron day-of-week: `?` may be used in only one of day-of-month and day-of-week"},
		{"cron(? 10 * * ? *)", "cron minutes: `?` is only allowed in day-of-month or day-of-week, alone"},
		{"cron(0 10 1,? * ? *)", "cron day-of-month: `?` is only allowed"},
		// ranges of values
		{"cron(60 10 * * ? *)", `cron minutes: value 60 out of range 0-59`},
		{"cron(0 24 * * ? *)", `cron hours: value 24 out of range 0-23`},
		{"cron(0 10 0 * ? *)", `cron day-of-month: value 0 out of range 1-31`},
		{"cron(0 10 32 * ? *)", `cron day-of-month: value 32 out of range 1-31`},
		{"cron(0 10 * 13 ? *)", `cron month: value 13 out of range 1-12`},
		{"cron(0 10 * FOO ? *)", `cron month: invalid value "FOO": want 1-12 or JAN-DEC`},
		{"cron(0 10 ? * 0 *)", `cron day-of-week: value 0 out of range 1-7`},
		{"cron(0 10 ? * 8 *)", `cron day-of-week: value 8 out of range 1-7`},
		{"cron(0 10 ? * FRIDAY *)", `cron day-of-week: invalid value "FRIDAY": want 1-7 or SUN-SAT`},
		{"cron(0 10 * * ? 1969)", `cron year: value 1969 out of range 1970-2199`},
		{"cron(0 10 * * ? 2200)", `cron year: value 2200 out of range 1970-2199`},
		{"cron(0 10 * * ? 2020-2200)", `cron year: value 2200 out of range 1970-2199`},
		{"cron(a 10 * * ? *)", `cron minutes: invalid value "a": want 0-59`},
		{"cron(0 1- * * ? *)", `cron hours: missing value`},
		{"cron(0 1,,2 * * ? *)", `cron hours: empty item in list "1,,2"`},
		{"cron(0 17-8 * * ? *)", `cron hours: range "17-8" runs backwards (wrap-around ranges are not supported)`},
		{"cron(0 10 ? * FRI-MON *)", `cron day-of-week: range "FRI-MON" runs backwards`},
		// increments
		{"cron(0/0 * * * ? *)", `cron minutes: increment "0" in "0/0": want an integer 1-59`},
		{"cron(0/60 * * * ? *)", `cron minutes: increment "60" in "0/60": want an integer 1-59`},
		{"cron(0/x * * * ? *)", `cron minutes: increment "x" in "0/x"`},
		{"cron(0 10 ? * 2/2 *)", "cron day-of-week: `/` increments are not allowed in day-of-week (got \"2/2\")"},
		// L, W, #
		{"cron(0 10 LW * ? *)", "cron day-of-month: `LW` is not supported (AWS documents `L` and `nW`)"},
		{"cron(0 10 32W * ? *)", `cron day-of-month: value 32 out of range 1-31`},
		{"cron(0 10 1-5W * ? *)", "cron day-of-month: `W` takes a single day, alone in the field, e.g. 15W (got \"1-5W\")"},
		{"cron(0 10 L,15 * ? *)", "cron day-of-month: `L` and `W` must stand alone in the field"},
		{"cron(0 10 ? * 2#6 *)", `cron day-of-week: week number "6" in "2#6": want 1-5`},
		{"cron(0 10 ? * 2#0 *)", `cron day-of-week: week number "0" in "2#0": want 1-5`},
		{"cron(0 10 ? * 8#1 *)", `cron day-of-week: value 8 out of range 1-7`},
		{"cron(0 10 ? * 3#1,6#3 *)", "cron day-of-week: `#` takes one day and one week number, alone in the field"},
		{"cron(0 10 ? * 1-2L *)", "cron day-of-week: `L` takes a single day, alone in the field, e.g. 6L (got \"1-2L\")"},
		{"cron(0 10 ? * 9L *)", `cron day-of-week: value 9 out of range 1-7`},
		{"cron(0 10 ? * 5W *)", `cron day-of-week: invalid value "5W": want 1-7 or SUN-SAT`},
		{"cron(0 L * * ? *)", `cron hours: invalid value "L": want 0-23`},
	} {
		_, err := Parse(tc.expr)
		if err == nil {
			t.Errorf("Parse(%q): no error, want %q", tc.expr, tc.want)
			continue
		}
		if !errors.Is(err, ErrInvalidExpression) {
			t.Errorf("Parse(%q): %v does not wrap ErrInvalidExpression", tc.expr, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q):\n got  %v\n want …%s…", tc.expr, err, tc.want)
		}
	}
}

func TestParseErrorFormat(t *testing.T) {
	t.Parallel()
	_, err := Parse("cron(0 10 ? * 8 *)")
	want := `schedule: invalid expression "cron(0 10 ? * 8 *)": cron day-of-week: value 8 out of range 1-7`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestCronTranslation pins the day-of-week shift (AWS 1–7 = SUN–SAT, cronexpr 0–6).
func TestCronTranslation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, line string }{
		{"cron(0 9 ? * 2#1 *)", "0 0 9 ? * 1#1 *"},
		{"cron(0 9 ? * MON#1 *)", "0 0 9 ? * 1#1 *"},
		{"cron(0 18 ? * MON-FRI *)", "0 0 18 ? * 1-5 *"},
		{"cron(0 18 ? * 1,7 *)", "0 0 18 ? * 0,6 *"},
		{"cron(0 18 ? * SUN-SAT *)", "0 0 18 ? * * *"},
		{"cron(0 18 ? * 5L *)", "0 0 18 ? * 4L *"},
		{"cron(0 18 ? * L *)", "0 0 18 ? * 6 *"},
		{"cron(0 18 ? * 7#5 *)", "0 0 18 ? * 6#5 *"},
		{"cron(0/15 * 3W JAN-MAR ? 2098-2101)", "0 0-59/15 * 3W 1-3 ? 2098,2099"},
		{"cron(5-50/5 1,2 * * ? *)", "0 5-50/5 1,2 * * ? *"},
	} {
		if got := mustParse(t, tc.expr).cron.line; got != tc.line {
			t.Errorf("%s → %q, want %q", tc.expr, got, tc.line)
		}
	}
}

func TestNextCron(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, after, want string // want "" means ok=false
	}{
		// AWS's documented examples (UTC).
		{"cron(0 10 * * ? *)", "2026-01-14T12:00:00Z", "2026-01-15T10:00:00Z"},
		{"cron(0 10 * * ? *)", "2026-01-14T09:59:59Z", "2026-01-14T10:00:00Z"},
		{"cron(15 12 * * ? *)", "2026-01-14T12:00:00Z", "2026-01-14T12:15:00Z"},
		{"cron(0 18 ? * MON-FRI *)", "2026-01-16T18:00:00Z", "2026-01-19T18:00:00Z"}, // Fri → Mon, strictly after
		{"cron(0 18 ? * MON-FRI *)", "2026-01-14T17:00:00Z", "2026-01-14T18:00:00Z"},
		{"cron(0 8 1 * ? *)", "2026-01-14T12:00:00Z", "2026-02-01T08:00:00Z"},
		{"cron(0/15 * * * ? *)", "2026-01-14T12:07:30Z", "2026-01-14T12:15:00Z"},
		{"cron(0/15 * * * ? *)", "2026-01-14T12:45:00Z", "2026-01-14T13:00:00Z"},
		{"cron(0/10 * ? * MON-FRI *)", "2026-01-16T23:55:00Z", "2026-01-19T00:00:00Z"},
		{"cron(0/5 8-17 ? * MON-FRI *)", "2026-01-16T17:55:00Z", "2026-01-19T08:00:00Z"},
		{"cron(0/5 8-17 ? * MON-FRI *)", "2026-01-19T10:02:00Z", "2026-01-19T10:05:00Z"},
		{"cron(0 9 ? * 2#1 *)", "2026-01-14T12:00:00Z", "2026-02-02T09:00:00Z"}, // first Monday
		{"cron(0 9 ? * 1#1 *)", "2026-01-14T12:00:00Z", "2026-02-01T09:00:00Z"}, // first Sunday
		// Day-of-week numbers: 1 = SUN, 7 = SAT; L alone = Saturday.
		{"cron(0 0 ? * 1 *)", "2026-01-14T12:00:00Z", "2026-01-18T00:00:00Z"},
		{"cron(0 0 ? * 7 *)", "2026-01-14T12:00:00Z", "2026-01-17T00:00:00Z"},
		{"cron(0 0 ? * SAT *)", "2026-01-14T12:00:00Z", "2026-01-17T00:00:00Z"},
		{"cron(0 0 ? * L *)", "2026-01-14T12:00:00Z", "2026-01-17T00:00:00Z"},
		{"cron(0 0 ? * 5-7 *)", "2026-01-14T12:00:00Z", "2026-01-15T00:00:00Z"}, // THU
		// L and W.
		{"cron(0 0 L * ? *)", "2026-02-10T00:00:00Z", "2026-02-28T00:00:00Z"},
		{"cron(0 0 L * ? *)", "2028-02-10T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"cron(0 0 15W * ? *)", "2026-02-01T00:00:00Z", "2026-02-16T00:00:00Z"}, // 15th is a Sunday
		{"cron(0 0 1W * ? *)", "2026-07-15T00:00:00Z", "2026-08-03T00:00:00Z"},  // 1st is a Saturday: month not crossed
		{"cron(0 0 ? * 6L *)", "2026-01-14T12:00:00Z", "2026-01-30T00:00:00Z"},  // last Friday
		{"cron(0 0 ? * FRIL *)", "2026-01-14T12:00:00Z", "2026-01-30T00:00:00Z"},
		{"cron(0 0 ? * 5#5 *)", "2026-01-14T12:00:00Z", "2026-01-29T00:00:00Z"}, // fifth Thursday
		{"cron(0 0 ? * 5#5 *)", "2026-01-29T12:00:00Z", "2026-04-30T00:00:00Z"}, // skips months without one
		// Months and years.
		{"cron(0 0 1 JAN,JUL ? *)", "2026-01-14T12:00:00Z", "2026-07-01T00:00:00Z"},
		{"cron(0 0 1 1 ? 2030)", "2026-01-14T12:00:00Z", "2030-01-01T00:00:00Z"},
		{"cron(0 0 1 1 ? 2030)", "2030-01-01T00:00:00Z", ""},
		{"cron(0 0 31 2 ? *)", "2026-01-14T12:00:00Z", ""}, // never
	} {
		e := mustParse(t, tc.expr)
		got, ok := e.Next(utc(tc.after), nil, time.Time{})
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s after %s = %s, want none", tc.expr, tc.after, got.Format(time.RFC3339))
		case tc.want != "" && (!ok || !got.Equal(utc(tc.want))):
			t.Errorf("%s after %s = %s, %v; want %s", tc.expr, tc.after, got.Format(time.RFC3339), ok, tc.want)
		}
	}
}

func TestNextTimeZone(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	e := mustParse(t, "cron(0 9 * * ? *)")
	got, ok := e.Next(utc("2026-01-14T00:00:00Z"), ny, time.Time{})
	if !ok || !got.Equal(utc("2026-01-14T14:00:00Z")) || got.Location() != ny {
		t.Fatalf("got %v %v, want 2026-01-14T09:00 in New York", got, ok)
	}
	// Summer: EDT.
	got, _ = e.Next(utc("2026-07-14T00:00:00Z"), ny, time.Time{})
	if !got.Equal(utc("2026-07-14T13:00:00Z")) {
		t.Fatalf("summer: got %v", got)
	}
}

// TestNextDST checks EventBridge Scheduler's documented daylight-saving behaviour: a wall-clock
// time skipped when clocks go forward has no occurrence; one repeated when they go back occurs
// once, at its first instant.
func TestNextDST(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")  // 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST
	berlin := mustLoc(t, "Europe/Berlin") // 2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET
	for _, tc := range []struct {
		name, expr string
		loc        *time.Location
		after      string
		want       string // "" means ok=false
	}{
		{"ny spring: skipped 02:30", "cron(30 2 * * ? *)", ny, "2026-03-07T08:00:00Z", "2026-03-09T06:30:00Z"},
		{"ny spring: day before", "cron(30 2 * * ? *)", ny, "2026-03-07T06:00:00Z", "2026-03-07T07:30:00Z"},
		{"ny spring: every 30 min jumps the gap", "cron(0/30 * * * ? *)", ny, "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z"},
		{"ny spring: 03:00 exists", "cron(0 3 * * ? *)", ny, "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z"},
		{"ny fall: first 01:30 (EDT)", "cron(30 1 * * ? *)", ny, "2026-11-01T04:00:00Z", "2026-11-01T05:30:00Z"},
		{"ny fall: no second 01:30 (EST)", "cron(30 1 * * ? *)", ny, "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		{"ny fall: after in the repeated hour", "cron(30 1 * * ? *)", ny, "2026-11-01T06:10:00Z", "2026-11-02T06:30:00Z"},
		{"ny fall: every 30 min runs once", "cron(0/30 * * * ? *)", ny, "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"},
		{"ny fall: 02:00 EST after the first hour", "cron(0 2 * * ? *)", ny, "2026-11-01T05:50:00Z", "2026-11-01T07:00:00Z"},
		{"ny fall: minute earlier on the wall, later in time", "cron(40 1 * * ? *)", ny, "2026-11-01T05:50:00Z", "2026-11-02T06:40:00Z"},
		{"ny fall: 00:59 wall before a repeated hour", "cron(10 1 * * ? *)", ny, "2026-11-01T05:00:00Z", "2026-11-01T05:10:00Z"},
		{"berlin spring: skipped 02:30", "cron(30 2 * * ? *)", berlin, "2026-03-28T12:00:00Z", "2026-03-30T00:30:00Z"},
		{"berlin spring: 03:30 exists", "cron(30 3 * * ? *)", berlin, "2026-03-28T12:00:00Z", "2026-03-29T01:30:00Z"},
		{"berlin fall: first 02:30 (CEST)", "cron(30 2 * * ? *)", berlin, "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
		{"berlin fall: no second 02:30 (CET)", "cron(30 2 * * ? *)", berlin, "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		{"berlin fall: weekly on the day", "cron(30 2 ? * SUN *)", berlin, "2026-10-25T00:30:00Z", "2026-11-01T01:30:00Z"},
		{"ny at: skipped", "at(2026-03-08T02:30:00)", ny, "2026-01-01T00:00:00Z", ""},
		{"ny at: repeated, first", "at(2026-11-01T01:30:00)", ny, "2026-01-01T00:00:00Z", "2026-11-01T05:30:00Z"},
		{"ny at: repeated, once", "at(2026-11-01T01:30:00)", ny, "2026-11-01T05:30:00Z", ""},
		{"berlin at: skipped", "at(2026-03-29T02:00:00)", berlin, "2026-01-01T00:00:00Z", ""},
		{"berlin at: repeated, first", "at(2026-10-25T02:00:00)", berlin, "2026-01-01T00:00:00Z", "2026-10-25T00:00:00Z"},
	} {
		e := mustParse(t, tc.expr)
		got, ok := e.Next(utc(tc.after), tc.loc, time.Time{})
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s: %s after %s = %s, want none", tc.name, tc.expr, tc.after, got)
		case tc.want != "" && (!ok || !got.Equal(utc(tc.want))):
			t.Errorf("%s: %s after %s = %s (%s), %v; want %s", tc.name, tc.expr, tc.after,
				got.UTC().Format(time.RFC3339), got, ok, tc.want)
		}
	}
}

// TestNextDSTSequence walks an every-15-minutes schedule through both New York transitions:
// each wall-clock time that exists fires exactly once.
func TestNextDSTSequence(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	e := mustParse(t, "cron(0/15 * * * ? *)")
	for _, tc := range []struct {
		from, to string
		n        int // occurrences in (from, to]
	}{
		// 00:00 EST – 04:00 EDT is 3 real hours: all 12 quarter-hours fire (wall 00:15–01:45,
		// 03:00–04:00); the 02:xx wall times do not exist.
		{"2026-03-08T05:00:00Z", "2026-03-08T08:00:00Z", 12},
		// 00:00 EDT – 03:00 EST is 4 real hours, but the repeated 01:xx EST do not fire again.
		{"2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z", 16 - 4},
		{"2026-06-01T00:00:00Z", "2026-06-01T04:00:00Z", 16}, // ordinary
	} {
		seen := map[string]bool{}
		n := 0
		for at := utc(tc.from); ; {
			next, ok := e.Next(at, ny, time.Time{})
			if !ok {
				t.Fatalf("no occurrence after %v", at)
			}
			if !next.After(at) {
				t.Fatalf("Next(%v) = %v, not after", at, next)
			}
			if next.After(utc(tc.to)) {
				break
			}
			wall := next.Format("2006-01-02T15:04")
			if seen[wall] {
				t.Errorf("wall clock %s fired twice", wall)
			}
			seen[wall] = true
			n++
			at = next
		}
		if n != tc.n {
			t.Errorf("(%s, %s]: %d occurrences, want %d", tc.from, tc.to, n, tc.n)
		}
	}
}

func TestNextYearBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, after, want string }{
		{"cron(0 0 1 1 ? *)", "2098-06-01T00:00:00Z", "2099-01-01T00:00:00Z"},
		{"cron(0 0 1 1 ? *)", "2099-01-01T00:00:00Z", ""}, // 2100 is past LastComputableYear
		{"cron(59 23 31 12 ? *)", "2099-12-31T23:58:00Z", "2099-12-31T23:59:00Z"},
		{"cron(59 23 31 12 ? *)", "2099-12-31T23:59:00Z", ""},
		{"cron(0 0 1 1 ? 2150)", "2026-01-01T00:00:00Z", ""}, // accepted (AWS allows it), never computed
		{"cron(0 0 1 1 ? 2099-2199)", "2026-01-01T00:00:00Z", "2099-01-01T00:00:00Z"},
		{"cron(0 0 1 1 ? 2099-2199)", "2099-01-01T00:00:00Z", ""},
		{"cron(0 0 1 1 ? 1970)", "1969-06-01T00:00:00Z", "1970-01-01T00:00:00Z"},
		{"cron(0 0 1 1 ? 1970/50)", "2026-01-01T00:00:00Z", "2070-01-01T00:00:00Z"},
	} {
		e := mustParse(t, tc.expr)
		got, ok := e.Next(utc(tc.after), nil, time.Time{})
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s after %s = %s, want none", tc.expr, tc.after, got)
		case tc.want != "" && (!ok || !got.Equal(utc(tc.want))):
			t.Errorf("%s after %s = %s, %v; want %s", tc.expr, tc.after, got, ok, tc.want)
		}
	}
}

func TestNextRate(t *testing.T) {
	t.Parallel()
	ny := mustLoc(t, "America/New_York")
	anchor := utc("2026-01-14T10:00:00Z")
	for _, tc := range []struct {
		expr   string
		anchor time.Time
		after  string
		want   string
	}{
		{"rate(5 minutes)", anchor, "2026-01-14T09:00:00Z", "2026-01-14T10:00:00Z"}, // first firing at the start date
		{"rate(5 minutes)", anchor, "2026-01-14T09:59:59.999Z", "2026-01-14T10:00:00Z"},
		{"rate(5 minutes)", anchor, "2026-01-14T10:00:00Z", "2026-01-14T10:05:00Z"},
		{"rate(5 minutes)", anchor, "2026-01-14T10:07:00Z", "2026-01-14T10:10:00Z"},
		{"rate(5 minutes)", anchor, "2026-01-14T10:09:59.999999999Z", "2026-01-14T10:10:00Z"},
		{"rate(1 minute)", utc("2026-01-14T10:00:00.5Z"), "2026-01-14T10:03:00.5Z", "2026-01-14T10:04:00.5Z"},
		{"rate(1 minute)", utc("2026-01-14T10:00:00.5Z"), "2026-01-14T10:03:00.4Z", "2026-01-14T10:03:00.5Z"},
		{"rate(2 hours)", anchor, "2026-01-15T09:00:00Z", "2026-01-15T10:00:00Z"},
		{"rate(7 days)", anchor, "2126-01-14T10:00:00Z", "2126-01-16T10:00:00Z"},      // 5,218 weeks on: past 2099 and Duration's range
		{"rate(1 hour)", time.Time{}, "2026-01-14T10:20:00Z", "2026-01-14T11:20:00Z"}, // zero anchor counts from after
		// Periods are fixed: rate(1 day) across New York's spring-forward moves by 24 h, so the
		// local time shifts from 09:00 EST to 10:00 EDT.
		{"rate(1 day)", utc("2026-03-07T14:00:00Z"), "2026-03-07T14:00:00Z", "2026-03-08T14:00:00Z"},
	} {
		e := mustParse(t, tc.expr)
		got, ok := e.Next(utc(tc.after), ny, tc.anchor)
		if !ok || !got.Equal(utc(tc.want)) || got.Location() != ny {
			t.Errorf("%s anchor %v after %s = %v, %v; want %s in New York", tc.expr, tc.anchor, tc.after, got, ok, tc.want)
		}
	}
}

func TestNextAt(t *testing.T) {
	t.Parallel()
	e := mustParse(t, "at(2026-05-01T09:30:00)")
	tokyo := mustLoc(t, "Asia/Tokyo")
	for _, tc := range []struct {
		loc   *time.Location
		after string
		want  string
	}{
		{nil, "2026-04-30T00:00:00Z", "2026-05-01T09:30:00Z"},
		{time.UTC, "2026-05-01T09:29:59.999Z", "2026-05-01T09:30:00Z"},
		{nil, "2026-05-01T09:30:00Z", ""}, // not strictly after
		{nil, "2027-01-01T00:00:00Z", ""}, // past
		{tokyo, "2026-04-30T00:00:00Z", "2026-05-01T00:30:00Z"},
	} {
		got, ok := e.Next(utc(tc.after), tc.loc, utc("2020-01-01T00:00:00Z"))
		switch {
		case tc.want == "" && ok:
			t.Errorf("after %s in %v = %v, want none", tc.after, tc.loc, got)
		case tc.want != "" && (!ok || !got.Equal(utc(tc.want))):
			t.Errorf("after %s in %v = %v, %v; want %s", tc.after, tc.loc, got, ok, tc.want)
		}
	}
	// At round-trips through Parse and Next.
	now := utc("2026-05-01T09:30:00.75Z")
	s := At(now, tokyo)
	if s != "at(2026-05-01T18:30:00)" {
		t.Fatalf("At = %q", s)
	}
	got, ok := mustParse(t, s).Next(now.Add(-time.Minute), tokyo, time.Time{})
	if !ok || !got.Equal(now.Truncate(time.Second)) {
		t.Fatalf("At round trip: %v %v", got, ok)
	}
}

func TestNextZeroExpression(t *testing.T) {
	t.Parallel()
	if _, ok := (Expression{}).Next(time.Now(), nil, time.Time{}); ok {
		t.Fatal("zero Expression has an occurrence")
	}
}

// TestNextConcurrent: cronexpr's Next mutates its receiver; Expression must hide that (-race).
func TestNextConcurrent(t *testing.T) {
	t.Parallel()
	e := mustParse(t, "cron(0 9 ? * 2#1 *)")
	ny := mustLoc(t, "America/New_York")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			copyOfE := e
			at := utc("2026-01-01T00:00:00Z").AddDate(0, g, 0)
			for i := 0; i < 50; i++ {
				next, ok := copyOfE.Next(at, ny, time.Time{})
				if !ok || !next.After(at) || next.Weekday() != time.Monday || next.Day() > 7 {
					t.Errorf("Next(%v) = %v, %v", at, next, ok)
					return
				}
				at = next
			}
		}(g)
	}
	wg.Wait()
}
