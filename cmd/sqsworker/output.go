package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqsworker/sqsworker/internal/termsafe"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Output formats (--output).
const (
	outputTable = "table"
	outputJSON  = "json"
)

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// newTable returns a tabwriter for aligned columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// jsonTime is a time in JSON documents: RFC 3339 in UTC with milliseconds (the envelope's
// layout), or null when zero.
type jsonTime time.Time

func (t jsonTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + tt.UTC().Format(jobs.TimeLayout) + `"`), nil
}

// UnmarshalJSON reads what MarshalJSON writes (any RFC 3339 time, or null).
func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = jsonTime{}
		return nil
	}
	var tt time.Time
	if err := json.Unmarshal(b, &tt); err != nil {
		return err
	}
	*t = jsonTime(tt)
	return nil
}

// showTime formats a time for tables (fixed width), "-" when zero.
func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(jobs.TimeLayout)
}

// Every text and table output prints job data (ids, keys, kinds, errors, attributes, bodies,
// names read from AWS) through safe, orDash, oneLine or textLines: each escapes what a terminal
// would act on (internal/termsafe), and escaping what is already escaped changes nothing. JSON
// output prints the data as it is.

// safe returns s with its control and bidi characters escaped visibly (termsafe.Escape).
func safe(s string) string { return termsafe.Escape(s) }

// orDash returns s escaped, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return termsafe.Escape(s)
}

// oneLine keeps the first line of s, escaped, at most n runes, marking a cut with "…"
// (termsafe.Line: the cut is made after escaping, never inside an escape or a character).
func oneLine(s string, n int) string { return termsafe.Line(s, n) }

// textLines splits multi-line text (an error with its stack, a body) into escaped lines, tabs
// shown as four spaces.
func textLines(s string) []string {
	return termsafe.Lines(strings.ReplaceAll(strings.TrimRight(s, "\r\n"), "\t", "    "))
}

// jobJSON is a job record in JSON output (status, jobs): every key is always present.
type jobJSON struct {
	JobID          string          `json:"job_id"`
	Kind           string          `json:"kind"`
	Key            string          `json:"key"`
	State          string          `json:"state"`
	Runs           int             `json:"runs"`
	Reason         string          `json:"reason"`
	LastError      string          `json:"last_error"`
	Result         json.RawMessage `json:"result,omitempty"`
	FirstAttemptAt jsonTime        `json:"first_attempt_at"`
	LastAttemptAt  jsonTime        `json:"last_attempt_at"`
	UpdatedAt      jsonTime        `json:"updated_at"`
	LeaseUntil     jsonTime        `json:"lease_until"`
	RunAt          jsonTime        `json:"run_at"`
	ExpiresAt      jsonTime        `json:"expires_at"`
	Expired        bool            `json:"expired"`
	// Progress is the run's last progress report (jobs.Progress), null when none.
	Progress *progressJSON `json:"progress"`
	// CancelRequestedAt is when a cancellation of the running job was requested (null: none);
	// CancelReason the reason given with it.
	CancelRequestedAt jsonTime `json:"cancel_requested_at"`
	CancelReason      string   `json:"cancel_reason"`
	// Payload is the S3 object of a job too large for an SQS message, while it exists (status
	// only).
	Payload *dlqPayloadJSON `json:"payload,omitempty"`
}

// progressJSON is a job's last progress report in JSON output.
type progressJSON struct {
	Fraction float64  `json:"fraction"`
	Message  string   `json:"message"`
	At       jsonTime `json:"at"`
}

func toJobJSON(j status.Job) jobJSON {
	out := jobJSON{
		JobID: j.JobID, Kind: j.Kind, Key: j.Key, State: string(j.State), Runs: j.Runs,
		Reason: j.Reason, LastError: j.LastError,
		FirstAttemptAt: jsonTime(j.FirstAttemptAt), LastAttemptAt: jsonTime(j.LastAttemptAt),
		UpdatedAt: jsonTime(j.UpdatedAt), RunAt: jsonTime(j.RunAt), ExpiresAt: jsonTime(j.ExpiresAt),
		Expired: j.Expired, CancelRequestedAt: jsonTime(j.CancelRequestedAt), CancelReason: j.CancelReason,
	}
	if !j.Progress.IsZero() {
		out.Progress = &progressJSON{Fraction: j.Progress.Fraction, Message: j.Progress.Message, At: jsonTime(j.Progress.At)}
	}
	if j.State == idempotency.StateRunning {
		out.LeaseUntil = jsonTime(j.LeaseUntil)
	}
	if j.Result != "" && json.Valid([]byte(j.Result)) {
		out.Result = json.RawMessage(j.Result)
	}
	return out
}

// colours paints states on a terminal. Every code has the same length, so that tabwriter (which
// counts the escape bytes) still aligns a column whose cells are all painted.
type colours struct{ on bool }

const colourReset = "\x1b[0m"

// colourFor returns the colours of stdout: on only for a terminal, and not when NO_COLOR is set
// (https://no-color.org).
func colourFor(w io.Writer) colours {
	return colours{on: isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"}
}

// state paints a state name (or a header cell, in the default colour), escaped: a record's
// state is data like any other.
func (c colours) state(s string) string {
	s = termsafe.Escape(s)
	if !c.on {
		return s
	}
	code := "\x1b[39m" // default
	switch idempotency.State(s) {
	case idempotency.StateSucceeded:
		code = "\x1b[32m" // green
	case idempotency.StateRetrying, idempotency.StateRunning:
		code = "\x1b[33m" // yellow
	case idempotency.StateDead:
		code = "\x1b[31m" // red
	case idempotency.StateScheduled, idempotency.StateQueued:
		code = "\x1b[36m" // cyan
	case idempotency.StateCancelled:
		code = "\x1b[35m" // magenta
	}
	return code + s + colourReset
}

// isTerminal reports whether w is a character device (a terminal), without a dependency.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// plural returns "1 job" or "2 jobs".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
