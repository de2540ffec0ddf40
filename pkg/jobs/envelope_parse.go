package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/sqsworker/sqsworker/internal/jsonscan"
)

// ParseEnvelope parses and validates an envelope, the body of an SQS message, without copying:
// the strings of the result alias body when they hold no escapes, and Args is a view of body's
// bytes. Args must not be modified (body is a string: its bytes are immutable); copy it first,
// e.g. with bytes.Clone, to change it. A typical envelope (no escapes, no meta) parses without
// allocating; meta allocates its map only when present.
//
// It accepts the same bodies as [DecodeEnvelope] always did with encoding/json, with the same
// result: the whole body must be valid JSON (args included, checked but not decoded), args a JSON
// object, times RFC 3339 as time.Parse(time.RFC3339Nano) reads them; unknown fields are ignored,
// a duplicated key's last value wins, null leaves a field unchanged (except "v": null, which
// counts as missing, and "meta": null, which clears meta), invalid UTF-8 in strings reads as
// U+FFFD. One difference: keys match exactly, as the envelope's documentation and JSON Schema
// spell them, where encoding/json also matched struct fields case-insensitively ("ID", "Kind").
//
// Every error wraps [ErrMalformed] and says what is wrong; syntax errors give the byte offset.
func ParseEnvelope(body string) (Envelope, error) {
	var e Envelope
	s := body
	i := jsonscan.SkipSpace(s, 0)
	if i >= len(s) {
		return Envelope{}, syntaxError(jsonscan.EOF(i))
	}
	switch s[i] {
	case '{':
	case 'n':
		// encoding/json reads null as an empty envelope: no version.
		end, err := jsonscan.Literal(s, i, "null")
		if err == nil {
			err = jsonscan.End(s, end)
		}
		if err != nil {
			return Envelope{}, syntaxError(err)
		}
		return Envelope{}, malformed("v is missing")
	default:
		end, err := jsonscan.SkipValue(s, i, 0)
		if err == nil {
			err = jsonscan.End(s, end)
		}
		if err == nil {
			err = jsonscan.Errorf(i, "the body is %s, want a JSON object", jsonscan.Kind(s[i]))
		}
		return Envelope{}, syntaxError(err)
	}

	var (
		hasV              bool
		enqueuedAt, runAt string
		err               error
	)
	i = jsonscan.SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		i++
	} else {
		for {
			if i >= len(s) || s[i] != '"' {
				return Envelope{}, syntaxError(jsonscan.Unexpected(s, i, "looking for beginning of object key string"))
			}
			end, unquote, err := jsonscan.String(s, i)
			if err != nil {
				return Envelope{}, syntaxError(err)
			}
			key := s[i+1 : end-1]
			if unquote {
				key = string(jsonscan.Unquote(nil, key))
			}
			i = jsonscan.SkipSpace(s, end)
			if i >= len(s) || s[i] != ':' {
				return Envelope{}, syntaxError(jsonscan.Unexpected(s, i, "after object key"))
			}
			if i = jsonscan.SkipSpace(s, i+1); i >= len(s) {
				return Envelope{}, syntaxError(jsonscan.EOF(i))
			}
			switch key {
			case "v":
				if s[i] == 'n' {
					i, err = jsonscan.Literal(s, i, "null")
					hasV = false // encoding/json sets the *int to nil
				} else {
					i, err = intField(s, i, key, &e.V)
					hasV = true
				}
			case "id":
				i, err = stringField(s, i, "", key, &e.ID)
			case "kind":
				i, err = stringField(s, i, "", key, &e.Kind)
			case "key":
				i, err = stringField(s, i, "", key, &e.Key)
			case "args":
				start := i
				if i, err = jsonscan.SkipValue(s, i, 1); err == nil {
					e.Args = readOnlyBytes(s[start:i])
				}
			case "enqueued_at":
				i, err = stringField(s, i, "", key, &enqueuedAt)
			case "run_at":
				i, err = stringField(s, i, "", key, &runAt)
			case "max_attempts":
				i, err = intField(s, i, key, &e.MaxAttempts)
			case "attempts_before":
				i, err = intField(s, i, key, &e.AttemptsBefore)
			case "meta":
				i, err = metaField(s, i, &e.Meta)
			default:
				i, err = jsonscan.SkipValue(s, i, 1)
			}
			if err != nil {
				return Envelope{}, syntaxError(err)
			}
			i = jsonscan.SkipSpace(s, i)
			if i < len(s) && s[i] == ',' {
				i = jsonscan.SkipSpace(s, i+1)
				continue
			}
			if i < len(s) && s[i] == '}' {
				i++
				break
			}
			return Envelope{}, syntaxError(jsonscan.Unexpected(s, i, "after object key:value pair"))
		}
	}
	if err := jsonscan.End(s, i); err != nil {
		return Envelope{}, syntaxError(err)
	}

	if !hasV {
		return Envelope{}, malformed("v is missing")
	}
	if enqueuedAt != "" {
		if e.EnqueuedAt, err = parseTime(enqueuedAt); err != nil {
			return Envelope{}, malformed("enqueued_at: %v", err)
		}
	}
	if runAt != "" {
		if e.RunAt, err = parseTime(runAt); err != nil {
			return Envelope{}, malformed("run_at: %v", err)
		}
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// syntaxError wraps a *jsonscan.Error (syntax or type, with its offset) as malformed.
func syntaxError(err error) error {
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

// readOnlyBytes returns the bytes of s without copying them. They must not be modified.
func readOnlyBytes(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// stringValue reads the string at s[i] (quote included) and returns the index after it.
func stringValue(s string, i int) (string, int, error) {
	end, unquote, err := jsonscan.String(s, i)
	if err != nil {
		return "", 0, err
	}
	v := s[i+1 : end-1]
	if unquote {
		v = string(jsonscan.Unquote(make([]byte, 0, len(v)), v))
	}
	return v, end, nil
}

// stringField reads the string or null at s[i] into *dst; null leaves *dst unchanged. prefix+name
// names the field in errors.
func stringField(s string, i int, prefix, name string, dst *string) (int, error) {
	switch s[i] {
	case '"':
		v, end, err := stringValue(s, i)
		if err != nil {
			return 0, err
		}
		*dst = v
		return end, nil
	case 'n':
		return jsonscan.Literal(s, i, "null")
	}
	return 0, typeError(s, i, prefix+name, "a string")
}

// intField reads the integer or null at s[i] into *dst; null leaves *dst unchanged.
func intField(s string, i int, name string, dst *int) (int, error) {
	c := s[i]
	if c == 'n' {
		return jsonscan.Literal(s, i, "null")
	}
	if c != '-' && (c < '0' || c > '9') {
		return 0, typeError(s, i, name, "an integer")
	}
	end, integer, err := jsonscan.Number(s, i)
	if err != nil {
		return 0, err
	}
	if !integer {
		return 0, jsonscan.Errorf(i, "%s: number %s is not an integer", name, s[i:end])
	}
	n, err := strconv.ParseInt(s[i:end], 10, strconv.IntSize)
	if err != nil {
		return 0, jsonscan.Errorf(i, "%s: number %s is out of range", name, s[i:end])
	}
	*dst = int(n)
	return end, nil
}

// typeError reports that the value at s[i] of the field name is not of type want (or null),
// after checking its syntax: a syntax error inside it comes first, as in encoding/json.
func typeError(s string, i int, name, want string) error {
	if _, err := jsonscan.SkipValue(s, i, 1); err != nil {
		return err
	}
	return jsonscan.Errorf(i, "%s is %s, want %s or null", name, jsonscan.Kind(s[i]), want)
}

// metaField reads the meta object or null at s[i] into *meta: an object adds its members to the
// map (made when nil), null sets it to nil, as encoding/json does.
func metaField(s string, i int, meta *map[string]string) (int, error) {
	switch s[i] {
	case '{':
	case 'n':
		*meta = nil
		return jsonscan.Literal(s, i, "null")
	default:
		return 0, typeError(s, i, "meta", "an object")
	}
	if *meta == nil {
		*meta = make(map[string]string)
	}
	m := *meta
	i = jsonscan.SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return 0, jsonscan.Unexpected(s, i, "looking for beginning of object key string")
		}
		k, end, err := stringValue(s, i)
		if err != nil {
			return 0, err
		}
		i = jsonscan.SkipSpace(s, end)
		if i >= len(s) || s[i] != ':' {
			return 0, jsonscan.Unexpected(s, i, "after object key")
		}
		if i = jsonscan.SkipSpace(s, i+1); i >= len(s) {
			return 0, jsonscan.EOF(i)
		}
		var v string
		if i, err = stringField(s, i, "meta.", k, &v); err != nil {
			return 0, err
		}
		m[k] = v
		i = jsonscan.SkipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i = jsonscan.SkipSpace(s, i+1)
			continue
		}
		if i < len(s) && s[i] == '}' {
			return i + 1, nil
		}
		return 0, jsonscan.Unexpected(s, i, "after object key:value pair")
	}
}

// parseTime is time.Parse(time.RFC3339Nano, s), with a faster path for the UTC form producers
// write ("2006-01-02T15:04:05.000Z", any number of fraction digits). Neither allocates; the fast
// path accepts a subset of what time.Parse accepts, with the same result, and leaves the rest
// (offsets, odd forms, errors) to time.Parse.
func parseTime(s string) (time.Time, error) {
	if t, ok := parseUTC(s); ok {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

func parseUTC(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	ok := true
	num := func(s string, lo, hi int) int {
		n := 0
		for _, c := range []byte(s) {
			if c < '0' || c > '9' {
				ok = false
			}
			n = n*10 + int(c-'0')
		}
		if n < lo || n > hi {
			ok = false
		}
		return n
	}
	year := num(s[0:4], 0, 9999)
	month := num(s[5:7], 1, 12)
	hour := num(s[11:13], 0, 23)
	minute := num(s[14:16], 0, 59)
	sec := num(s[17:19], 0, 59)
	if !ok {
		return time.Time{}, false
	}
	day := num(s[8:10], 1, daysIn(month, year))
	nsec := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		if len(frac) < 2 || frac[0] != '.' {
			return time.Time{}, false
		}
		digits := 0
		for _, c := range []byte(frac[1:]) {
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
			if digits < 9 { // time.Parse ignores the digits past nanoseconds
				nsec = nsec*10 + int(c-'0')
				digits++
			}
		}
		for ; digits < 9; digits++ {
			nsec *= 10
		}
	}
	if !ok {
		return time.Time{}, false
	}
	secs := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(secs, int64(nsec)).UTC(), true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch returns the days from 1970-01-01 to the date (proleptic Gregorian calendar,
// year ≥ 0), after Howard Hinnant's days_from_civil.
func daysSinceEpoch(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := int64((month + 9) % 12) // March is 0
	doy := (153*mp+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
