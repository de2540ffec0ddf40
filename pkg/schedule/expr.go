package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/cronexpr"
)

// ExprKind is the kind of a schedule expression.
type ExprKind int

// The expression kinds.
const (
	KindAt   ExprKind = iota + 1 // at(yyyy-mm-ddThh:mm:ss): one time
	KindRate                     // rate(n unit): every n minutes, hours or days
	KindCron                     // cron(min hour day-of-month month day-of-week year)
)

// String returns "at", "rate" or "cron" ("invalid" for anything else).
func (k ExprKind) String() string {
	switch k {
	case KindAt:
		return "at"
	case KindRate:
		return "rate"
	case KindCron:
		return "cron"
	}
	return "invalid"
}

// ErrInvalidExpression is wrapped by every Parse error; the message names the field and the
// problem.
var ErrInvalidExpression = errors.New("schedule: invalid expression")

// LastComputableYear is the last year in which Next finds cron occurrences. AWS accepts cron
// years 1970–2199 and so does Parse, but the cron engine used here (github.com/hashicorp/cronexpr)
// stops at 2099: for an occurrence after 2099-12-31 Next reports ok=false, exactly as if the
// schedule had ended. at() and rate() expressions have no such limit.
const LastComputableYear = 2099

// Expression is a parsed schedule expression. The zero value is invalid. Expressions are
// immutable and safe for concurrent use.
type Expression struct {
	kind ExprKind
	raw  string

	at   wallClock     // KindAt
	rate time.Duration // KindRate: the period
	cron *cronSpec     // KindCron
}

// wallClock is a local date and time without a zone.
type wallClock struct {
	year                      int
	month                     time.Month
	day, hour, minute, second int
}

// cronSpec is a validated cron expression translated to cronexpr's dialect.
type cronSpec struct {
	line string // cronexpr's 7-field line (seconds first), for tests and debugging
	// never is set when no year in the year field is at or before LastComputableYear.
	never bool

	mu   sync.Mutex // cronexpr.Expression.Next mutates its receiver
	expr *cronexpr.Expression
}

// Parse parses and validates an expression with EventBridge Scheduler's syntax and rules:
//
//   - at(yyyy-mm-ddThh:mm:ss): a wall-clock date and time (seconds precision) in the
//     schedule's time zone.
//   - rate(value unit): value a positive integer; unit minute, hour or day when value is 1,
//     minutes, hours or days otherwise ("rate(1 minutes)" and "rate(5 minute)" are rejected, as
//     EventBridge's rate reference requires).
//   - cron(minutes hours day-of-month month day-of-week year): six fields separated by single
//     spaces. Minutes 0–59, hours 0–23, day-of-month 1–31, month 1–12 or JAN–DEC, day-of-week
//     1–7 or SUN–SAT (1 = SUN), year 1970–2199. Every field takes `,` lists and `-` ranges
//     (ascending); all but day-of-week take `*` and `/` increments (`*/n`, `a/n`, `a-b/n`).
//     Exactly one of day-of-month and day-of-week must be `?`. Day-of-month also takes `L`
//     (last day) and `nW` (weekday nearest day n); day-of-week takes `L` (Saturday, the last day
//     of the week), `nL` (last day n of the month) and `n#k` (k-th day n of the month, k 1–5).
//     `L`, `W` and `#` items must stand alone in their field. Names and letters are
//     case-insensitive.
//
// Errors wrap ErrInvalidExpression and name the field and the problem, e.g.
// `cron day-of-week: value 8 out of range 1-7`.
func Parse(expr string) (Expression, error) {
	open := strings.IndexByte(expr, '(')
	if open < 0 || !strings.HasSuffix(expr, ")") {
		return Expression{}, invalid(expr, "want at(...), rate(...) or cron(...)")
	}
	body := expr[open+1 : len(expr)-1]
	switch expr[:open] {
	case "at":
		return parseAt(expr, body)
	case "rate":
		return parseRate(expr, body)
	case "cron":
		return parseCron(expr, body)
	}
	return Expression{}, invalid(expr, fmt.Sprintf("unknown expression type %q: want at, rate or cron", expr[:open]))
}

func invalid(expr, detail string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidExpression, expr, detail)
}

// Kind returns the expression's kind.
func (e Expression) Kind() ExprKind { return e.kind }

// String returns the expression as written.
func (e Expression) String() string { return e.raw }

// Next returns the first occurrence strictly after after, evaluated in loc (at and cron
// expressions are wall-clock times in loc; nil means UTC); a rate counts whole periods from
// anchor (the schedule's start date, or its creation time). ok is false when there is no later
// occurrence.
//
// Rates: the occurrences are anchor, anchor+period, anchor+2·period, … (a rate schedule first
// fires at its start date, or at once when it has none, as EventBridge Scheduler documents);
// periods are fixed durations, so "rate(1 day)" is every 24 hours across daylight-saving
// changes. A zero anchor counts from after (the result is after+period).
//
// Daylight saving, as EventBridge Scheduler documents it for cron schedules and applied here
// to at() as well: a wall-clock time that does not exist in loc (skipped when clocks go forward)
// has no occurrence, and one that happens twice (clocks go back) occurs once, at its first
// instant. So cron(30 2 * * ? *) in America/New_York does not fire on the day clocks jump from
// 02:00 to 03:00, and cron(30 1 * * ? *) fires at 01:30 EDT, not again at 01:30 EST; an at()
// for a skipped time never fires. Prefer UTC for one-time schedules made from an instant (see
// At).
//
// Cron occurrences after LastComputableYear (2099) are not computed: ok is false.
func (e Expression) Next(after time.Time, loc *time.Location, anchor time.Time) (next time.Time, ok bool) {
	if loc == nil {
		loc = time.UTC
	}
	switch e.kind {
	case KindAt:
		t, exists := firstInstant(e.at, loc)
		if !exists || !t.After(after) {
			return time.Time{}, false
		}
		return t, true
	case KindRate:
		return nextRate(e.rate, after, anchor, loc)
	case KindCron:
		return e.cron.next(after, loc)
	}
	return time.Time{}, false
}

// At returns the at() expression for t, in loc's wall clock (seconds precision). With a loc
// that observes daylight saving, an instant in the repeated hour after clocks go back maps to a
// wall clock that Next resolves to its first (earlier) occurrence; pass UTC (or nil) to pin the
// instant exactly.
func At(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	return "at(" + t.In(loc).Format("2006-01-02T15:04:05") + ")"
}

// ---- at ----

const atLayout = "2006-01-02T15:04:05"

func parseAt(expr, body string) (Expression, error) {
	// time.Parse also accepts a fractional second after the seconds; AWS does not.
	t, err := time.Parse(atLayout, body)
	if err != nil || len(body) != len(atLayout) {
		return Expression{}, invalid(expr, fmt.Sprintf("at date-time: want yyyy-mm-ddThh:mm:ss, got %q", body))
	}
	return Expression{kind: KindAt, raw: expr, at: wallOf(t)}, nil
}

func wallOf(t time.Time) wallClock {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return wallClock{year: y, month: mo, day: d, hour: h, minute: mi, second: s}
}

// firstInstant returns the first instant at which loc's clocks show w, and false when they never
// do (w falls in a gap when clocks go forward).
func firstInstant(w wallClock, loc *time.Location) (time.Time, bool) {
	t := time.Date(w.year, w.month, w.day, w.hour, w.minute, w.second, 0, loc)
	if wallOf(t) != w {
		return time.Time{}, false // normalised out of a gap
	}
	// If clocks went back when t's zone period began, the same wall clock may have happened
	// already in the previous period: take that earlier instant.
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t, true
	}
	_, off := t.Zone()
	_, prevOff := start.Add(-time.Nanosecond).Zone()
	if prevOff > off {
		if e := t.Add(-time.Duration(prevOff-off) * time.Second); wallOf(e) == w {
			return e, true
		}
	}
	return t, true
}

// ---- rate ----

func parseRate(expr, body string) (Expression, error) {
	value, unit, found := strings.Cut(body, " ")
	if !found || value == "" || unit == "" || strings.Contains(unit, " ") {
		return Expression{}, invalid(expr, fmt.Sprintf("rate: want \"value unit\" separated by one space, got %q", body))
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 1 || value[0] < '0' || value[0] > '9' {
		return Expression{}, invalid(expr, fmt.Sprintf("rate value: want a positive integer, got %q", value))
	}
	var per time.Duration
	switch unit {
	case "minute", "minutes":
		per = time.Minute
	case "hour", "hours":
		per = time.Hour
	case "day", "days":
		per = 24 * time.Hour
	default:
		return Expression{}, invalid(expr, fmt.Sprintf("rate unit: want minute(s), hour(s) or day(s), got %q", unit))
	}
	plural := strings.HasSuffix(unit, "s")
	if n == 1 && plural {
		return Expression{}, invalid(expr, fmt.Sprintf("rate unit: value 1 takes the singular %q, got %q", strings.TrimSuffix(unit, "s"), unit))
	}
	if n > 1 && !plural {
		return Expression{}, invalid(expr, fmt.Sprintf("rate unit: value %d takes the plural %q, got %q", n, unit+"s", unit))
	}
	if n > int64(math.MaxInt64/per) {
		return Expression{}, invalid(expr, fmt.Sprintf("rate value: %d %s is too long a period", n, unit))
	}
	return Expression{kind: KindRate, raw: expr, rate: time.Duration(n) * per}, nil
}

func nextRate(period time.Duration, after, anchor time.Time, loc *time.Location) (time.Time, bool) {
	if anchor.IsZero() {
		anchor = after
	}
	if after.Before(anchor) {
		return anchor.In(loc), true
	}
	// k = floor((after-anchor)/period) + 1, in whole seconds (periods are whole minutes), which
	// avoids time.Duration's ±292-year range.
	ds := after.Unix() - anchor.Unix()
	if after.Nanosecond() < anchor.Nanosecond() {
		ds--
	}
	ps := int64(period / time.Second)
	k := ds/ps + 1
	if k > math.MaxInt64/ps {
		return time.Time{}, false
	}
	sec := anchor.Unix() + k*ps
	if sec < anchor.Unix() { // overflow
		return time.Time{}, false
	}
	return time.Unix(sec, int64(anchor.Nanosecond())).In(loc), true
}

// ---- cron ----

type cronField struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
	// step is the largest `/` increment (cronexpr's own limit: the field's maximum).
	step int
}

var (
	monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	dayNames   = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

	fMinutes = cronField{name: "minutes", min: 0, max: 59, step: 59}
	fHours   = cronField{name: "hours", min: 0, max: 23, step: 23}
	fDom     = cronField{name: "day-of-month", min: 1, max: 31, step: 31}
	fMonth   = cronField{name: "month", min: 1, max: 12, names: monthNames, step: 12}
	fDow     = cronField{name: "day-of-week", min: 1, max: 7, names: dayNames}
	fYear    = cronField{name: "year", min: 1970, max: 2199, step: 229}
)

// fieldError is a problem in one cron field.
type fieldError struct {
	field  string
	detail string
}

func (f cronField) errorf(format string, args ...any) *fieldError {
	return &fieldError{field: f.name, detail: fmt.Sprintf(format, args...)}
}

func parseCron(expr, body string) (Expression, error) {
	fields := strings.Split(body, " ")
	if len(fields) != 6 {
		return Expression{}, invalid(expr, fmt.Sprintf("cron: want 6 fields (minutes hours day-of-month month day-of-week year) separated by single spaces, got %d", len(fields)))
	}
	spec, ferr := translateCron(fields)
	if ferr != nil {
		return Expression{}, invalid(expr, "cron "+ferr.field+": "+ferr.detail)
	}
	return Expression{kind: KindCron, raw: expr, cron: spec}, nil
}

func translateCron(f []string) (*cronSpec, *fieldError) {
	for i, fd := range []cronField{fMinutes, fHours, fDom, fMonth, fDow, fYear} {
		if f[i] == "" {
			return nil, fd.errorf("empty (fields are separated by single spaces)")
		}
	}
	domQ, dowQ := f[2] == "?", f[4] == "?"
	switch {
	case domQ && dowQ:
		return nil, fDow.errorf("`?` may be used in only one of day-of-month and day-of-week")
	case !domQ && !dowQ:
		return nil, fDow.errorf("one of day-of-month and day-of-week must be `?` (got %q and %q)", f[2], f[4])
	}

	minutes, err := fMinutes.translate(f[0])
	if err != nil {
		return nil, err
	}
	hours, err := fHours.translate(f[1])
	if err != nil {
		return nil, err
	}
	dom := "?"
	if !domQ {
		if dom, err = translateDom(f[2]); err != nil {
			return nil, err
		}
	}
	month, err := fMonth.translate(f[3])
	if err != nil {
		return nil, err
	}
	dow := "?"
	if !dowQ {
		if dow, err = translateDow(f[4]); err != nil {
			return nil, err
		}
	}
	years, err := fYear.values(f[5])
	if err != nil {
		return nil, err
	}
	var ys []string
	for _, y := range years {
		if y <= LastComputableYear {
			ys = append(ys, strconv.Itoa(y))
		}
	}
	spec := &cronSpec{never: len(ys) == 0}
	year := strings.Join(ys, ",")
	switch {
	case f[5] == "*":
		year = "*" // cronexpr's 1970–2099
	case spec.never:
		year = strconv.Itoa(LastComputableYear) // placeholder, never evaluated
	}
	spec.line = strings.Join([]string{"0", minutes, hours, dom, month, dow, year}, " ")
	ce, perr := cronexpr.Parse(spec.line)
	if perr != nil {
		// Unreachable: the line above is built from validated values.
		return nil, &fieldError{field: "expression", detail: "internal translation error: " + perr.Error()}
	}
	spec.expr = ce
	return spec, nil
}

// number parses one value (digits, or a name when the field has names).
func (f cronField) number(s string) (int, *fieldError) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	if s == "" {
		return 0, f.errorf("missing value")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			if f.names != nil {
				return 0, f.errorf("invalid value %q: want %d-%d or %s-%s", s, f.min, f.max, f.names[0], f.names[len(f.names)-1])
			}
			return 0, f.errorf("invalid value %q: want %d-%d", s, f.min, f.max)
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < f.min || v > f.max {
		return 0, f.errorf("value %s out of range %d-%d", s, f.min, f.max)
	}
	return v, nil
}

// item is one parsed list item: the values first..last (inclusive) every step, or every value
// for `*`.
type item struct {
	first, last, step int
}

// items parses a list of `*`, `v`, `a-b`, `*/n`, `a/n` and `a-b/n` items.
func (f cronField) items(s string) ([]item, *fieldError) {
	var out []item
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			return nil, f.errorf("empty item in list %q", s)
		}
		if part == "?" {
			return nil, f.errorf("`?` is only allowed in day-of-month or day-of-week, alone")
		}
		rng, stepStr, hasStep := strings.Cut(part, "/")
		it := item{step: 1}
		if hasStep {
			if f.step == 0 {
				return nil, f.errorf("`/` increments are not allowed in %s (got %q)", f.name, part)
			}
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 || n > f.step || stepStr[0] < '0' || stepStr[0] > '9' {
				return nil, f.errorf("increment %q in %q: want an integer 1-%d", stepStr, part, f.step)
			}
			it.step = n
		}
		switch {
		case rng == "*":
			it.first, it.last = f.min, f.max
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err *fieldError
			if it.first, err = f.number(a); err != nil {
				return nil, err
			}
			if it.last, err = f.number(b); err != nil {
				return nil, err
			}
			if it.first > it.last {
				return nil, f.errorf("range %q runs backwards (wrap-around ranges are not supported)", rng)
			}
		default:
			v, err := f.number(rng)
			if err != nil {
				return nil, err
			}
			it.first, it.last = v, v
			if hasStep {
				it.last = f.max // `a/n`: from a to the end of the field
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// values expands a field to its sorted distinct values.
func (f cronField) values(s string) ([]int, *fieldError) {
	its, err := f.items(s)
	if err != nil {
		return nil, err
	}
	seen := make([]bool, f.max-f.min+1)
	for _, it := range its {
		for v := it.first; v <= it.last; v += it.step {
			seen[v-f.min] = true
		}
	}
	var vs []int
	for i, ok := range seen {
		if ok {
			vs = append(vs, f.min+i)
		}
	}
	return vs, nil
}

// translate renders a plain field (no L, W, #) in cronexpr's syntax, numbers only.
func (f cronField) translate(s string) (string, *fieldError) {
	its, err := f.items(s)
	if err != nil {
		return "", err
	}
	return renderItems(its, f, 0), nil
}

// renderItems writes items as cronexpr list items, adding shift to every value.
func renderItems(its []item, f cronField, shift int) string {
	parts := make([]string, len(its))
	for i, it := range its {
		var p string
		switch {
		case it.first == f.min && it.last == f.max && it.step == 1:
			p = "*"
		case it.first == it.last:
			p = strconv.Itoa(it.first + shift)
		default:
			p = strconv.Itoa(it.first+shift) + "-" + strconv.Itoa(it.last+shift)
		}
		if it.step != 1 {
			p += "/" + strconv.Itoa(it.step)
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

func translateDom(s string) (string, *fieldError) {
	u := strings.ToUpper(s)
	switch {
	case u == "L":
		return "L", nil
	case strings.HasSuffix(u, "W"):
		n := u[:len(u)-1]
		if n == "L" {
			return "", fDom.errorf("`LW` is not supported (AWS documents `L` and `nW`)")
		}
		if strings.ContainsAny(n, ",-*/LW") {
			return "", fDom.errorf("`W` takes a single day, alone in the field, e.g. 15W (got %q)", s)
		}
		v, err := fDom.number(n)
		if err != nil {
			return "", err
		}
		return strconv.Itoa(v) + "W", nil
	case strings.ContainsAny(u, "LW"):
		return "", fDom.errorf("`L` and `W` must stand alone in the field, as L or nW (got %q)", s)
	}
	return fDom.translate(s)
}

// translateDow maps AWS's day-of-week (1–7 = SUN–SAT) to cronexpr's (0–6 = SUN–SAT).
func translateDow(s string) (string, *fieldError) {
	u := strings.ToUpper(s)
	if day, nth, ok := strings.Cut(u, "#"); ok {
		if strings.ContainsAny(day, ",-*/L") || strings.ContainsAny(nth, ",-*/L#") {
			return "", fDow.errorf("`#` takes one day and one week number, alone in the field, e.g. 2#1 (got %q)", s)
		}
		d, err := fDow.number(day)
		if err != nil {
			return "", err
		}
		k, cerr := strconv.Atoi(nth)
		if cerr != nil || k < 1 || k > 5 || nth[0] < '0' || nth[0] > '9' {
			return "", fDow.errorf("week number %q in %q: want 1-5", nth, s)
		}
		return strconv.Itoa(d-1) + "#" + strconv.Itoa(k), nil
	}
	if u == "L" {
		return "6", nil // the last day of the week: Saturday
	}
	if strings.HasSuffix(u, "L") {
		day := u[:len(u)-1]
		if strings.ContainsAny(day, ",-*/L") {
			return "", fDow.errorf("`L` takes a single day, alone in the field, e.g. 6L (got %q)", s)
		}
		d, err := fDow.number(day)
		if err != nil {
			return "", err
		}
		return strconv.Itoa(d-1) + "L", nil
	}
	its, err := fDow.items(s)
	if err != nil {
		return "", err
	}
	return renderItems(its, fDow, -1), nil
}

// next finds the first occurrence after after. It searches wall-clock times (cronexpr evaluating
// them in UTC, where no clock jumps) and maps each to its first instant in loc, skipping wall
// clocks that do not exist there.
func (c *cronSpec) next(after time.Time, loc *time.Location) (time.Time, bool) {
	if c.never {
		return time.Time{}, false
	}
	a := after.In(loc)
	w := wallOf(a)
	from := time.Date(w.year, w.month, w.day, w.hour, w.minute, w.second, 0, time.UTC)
	// A wall clock earlier than a's can still be later in time if clocks go back before it:
	// start that much earlier.
	if _, end := a.ZoneBounds(); !end.IsZero() {
		_, off := a.Zone()
		_, nextOff := end.Zone()
		if off > nextOff {
			from = from.Add(-time.Duration(off-nextOff) * time.Second)
		}
	}
	from = from.Add(-time.Second)

	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		cand := c.expr.Next(from)
		if cand.IsZero() {
			return time.Time{}, false // no occurrence at or before LastComputableYear
		}
		if t, ok := firstInstant(wallOf(cand), loc); ok && t.After(after) {
			return t, true
		}
		from = cand
	}
}
