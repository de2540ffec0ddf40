package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// FieldError is the error of [CheckRecurring]: one field of a [Recurring] is invalid. It wraps
// [ErrInvalid]. A caller that names its inputs otherwise (a command's flags, a form's labels)
// writes its own label before Problem; Error uses the field's plain name.
type FieldError struct {
	// Schedule is the schedule's name, as given ("" when the name itself is missing).
	Schedule string
	// Field is the invalid field, named as in [Recurring]: "Name", "Expression", "Timezone",
	// "Start", "FlexibleWindow", "Kind", "Args", "MaxAttempts", "GroupID" or "Description".
	Field string
	// Problem says what is wrong, to be read after the field's label: it starts with the value
	// when the value helps (`"Mars/Olympus" is not an IANA time zone name (such as UTC or
	// Europe/Paris)`, `is empty: …`).
	Problem string
}

// fieldLabels are the plain names Error gives the fields.
var fieldLabels = map[string]string{
	"Name": "name", "Expression": "expression", "Timezone": "time zone", "Start": "start",
	"FlexibleWindow": "flexible window", "Kind": "kind", "Args": "args", "MaxAttempts": "max attempts",
	"GroupID": "message group id", "Description": "description",
}

// Error returns "schedule: invalid: recurring schedule NAME: LABEL PROBLEM".
func (e *FieldError) Error() string {
	label := fieldLabels[e.Field]
	if label == "" {
		label = e.Field
	}
	if e.Schedule == "" || e.Field == "Name" {
		return fmt.Sprintf("%v: recurring schedule %s %s", ErrInvalid, label, e.Problem)
	}
	return fmt.Sprintf("%v: recurring schedule %s: %s %s", ErrInvalid, e.Schedule, label, e.Problem)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// CheckName checks a recurring schedule's name, as Upsert, Get and Delete do before any AWS
// call: 1-64 characters of letters, digits, '-', '_' and '.', not starting with "sqsworker-"
// (the one-time schedules of delayed jobs). The error is a *[FieldError].
func CheckName(name string) error {
	bad := func(format string, a ...any) error {
		return &FieldError{Schedule: name, Field: "Name", Problem: fmt.Sprintf(format, a...)}
	}
	switch {
	case name == "":
		return bad("is empty: want 1-%d characters of letters, digits, '-', '_' and '.'", MaxNameLength)
	case len(name) > MaxNameLength:
		return bad("%.32q… is %d characters long, the limit is %d", name, len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !nameChar(name[i]) {
			return bad("%q: character %q at %d is not allowed (want letters, digits, '-', '_' and '.')", name, name[i], i)
		}
	}
	if strings.HasPrefix(name, reservedPrefix) {
		return bad("%q: names starting with %q are one-time schedules of delayed jobs, not recurring schedules (the prefix is reserved)", name, reservedPrefix)
	}
	return nil
}

// CheckRecurring validates r and fills its defaults, as Upsert does before any AWS call: the
// `sqsworker schedules put` command and the console check what they were given with it, so
// that all three accept and refuse the same schedules. It checks every field but the ones that
// depend on the queue (a FIFO queue needs GroupID: Upsert checks that), and fills in Timezone
// ("UTC"), Args (compacted; "{}" when empty) and Expression (as Parse reads it). The error is a
// *[FieldError] naming the first invalid field; it wraps [ErrInvalid].
func CheckRecurring(r *Recurring) error {
	bad := func(field, format string, a ...any) error {
		return &FieldError{Schedule: r.Name, Field: field, Problem: fmt.Sprintf(format, a...)}
	}
	if err := CheckName(r.Name); err != nil {
		return err
	}
	expr := strings.TrimSpace(r.Expression)
	if expr == "" {
		return bad("Expression", "is empty: want cron(…), rate(…) or at(…), such as 'cron(0 2 * * ? *)' or 'rate(1 hour)'")
	}
	e, err := Parse(expr)
	if err != nil {
		// Parse says `schedule: invalid expression "EXPR": DETAIL`: keep the quoted value and the detail.
		return bad("Expression", "%s", strings.TrimPrefix(err.Error(), ErrInvalidExpression.Error()+" "))
	}
	r.Expression = e.String()
	if r.Timezone == "" {
		r.Timezone = "UTC"
	}
	switch {
	case len(r.Timezone) > 50:
		return bad("Timezone", "%.32q… is longer than 50 characters", r.Timezone)
	case r.Timezone == "Local":
		return bad("Timezone", "%q: want an IANA time zone name, such as UTC or Europe/Paris", r.Timezone)
	}
	if _, err := time.LoadLocation(r.Timezone); err != nil {
		return bad("Timezone", "%q is not an IANA time zone name (such as UTC or Europe/Paris)", r.Timezone)
	}
	if !r.Start.IsZero() && !r.End.IsZero() && !r.Start.Before(r.End) {
		return bad("Start", "%s is not before the end, %s", r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339))
	}
	if w := r.FlexibleWindow; w != 0 && (w < time.Minute || w > MaxFlexibleWindow || w%time.Minute != 0) {
		return bad("FlexibleWindow", "%v: want whole minutes between 1m and 24h", w)
	}
	if r.Kind == "" {
		return bad("Kind", "is empty: want the kind of the job each occurrence enqueues, such as report.build")
	}
	if err := jobs.ValidateKind(r.Kind); err != nil {
		// ValidateKind says `kind "X": …` or `kind "X…" is N characters long…`.
		return bad("Kind", "%s", strings.TrimPrefix(err.Error(), "kind "))
	}
	args := bytes.TrimSpace(r.Args)
	if len(args) == 0 {
		args = []byte(`{}`)
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return bad("Args", "is not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return bad("Args", "is a JSON %s: want a JSON object, such as '{\"period\":\"day\"}'", jsonKind(v))
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, args) // valid: unmarshalled above
	r.Args = compact.Bytes()
	if r.MaxAttempts < 0 {
		return bad("MaxAttempts", "%d is negative: want at least 1, or 0 for the kind's", r.MaxAttempts)
	}
	if g := r.GroupID; g != "" {
		if len(g) > MaxGroupIDLength {
			return bad("GroupID", "%.32q… is %d characters long, the limit is %d", g, len(g), MaxGroupIDLength)
		}
		for i := 0; i < len(g); i++ {
			if g[i] < '!' || g[i] > '~' {
				return bad("GroupID", "%q: character %q at %d is not allowed (printable ASCII only)", g, g[i], i)
			}
		}
	}
	if n := len([]rune(r.Description)); n > MaxDescriptionLength {
		return bad("Description", "is %d characters long, the limit is %d", n, MaxDescriptionLength)
	}
	if n := len(recurringInput(r)); n > MaxInputBytes {
		return bad("Args", "makes the job template %d bytes, above EventBridge Scheduler's target input limit of %d bytes (256 KB)", n, MaxInputBytes)
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}
