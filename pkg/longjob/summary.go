package longjob

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// Summary is what a job's record says of it as a long job: its cursor, how often it was
// continued and how long it ran. `sqsworker status`, `sqsworker cursor` and the console's job
// page show it.
type Summary struct {
	// Checkpoints is the number of the job's last checkpoint (0: it never saved one).
	Checkpoints int64
	// CursorBytes is the size of the cursor's JSON; CursorAt when it was saved, CursorAge how long
	// before now.
	CursorBytes int
	CursorAt    time.Time
	CursorAge   time.Duration
	// Saved reports whether the cursor is still kept (a success or a restart removes it).
	Saved bool
	// Object is the S3 object holding a cursor larger than the record holds ("" when the record
	// holds it): s3://bucket/key.
	Object string
	// Continuations counts the runs that ended without ending the job (slices, sleeps).
	Continuations int
	// RunTime is the job's total run time over all its runs.
	RunTime time.Duration
}

// Summarize returns rec's summary at now, and whether there is anything to show: a checkpoint,
// a continuation, or a run time.
func Summarize(rec idempotency.Record, now time.Time) (Summary, bool) {
	s := Summary{Checkpoints: rec.Cursor.Seq, CursorBytes: rec.Cursor.Bytes, CursorAt: rec.Cursor.At, Saved: rec.Cursor.Saved(),
		Continuations: rec.Continuations, RunTime: rec.RunTime}
	if !s.CursorAt.IsZero() {
		s.CursorAge = max(now.Sub(s.CursorAt), 0)
	}
	if rec.Cursor.Pointer != "" {
		if p, err := payload.ParsePointer(rec.Cursor.Pointer); err == nil {
			s.Object = p.String()
		} else {
			s.Object = "(an unreadable S3 pointer)"
		}
	}
	return s, s.Checkpoints > 0 || s.Continuations > 0 || s.RunTime > 0
}

// CursorText says what the cursor is, in a line: "612 B, checkpoint #41, saved 3m10s ago", with
// "in S3 (s3://…)" for one kept there, "removed (the job finished or restarted)" once its value
// is gone, "none" when the job never saved one.
func (s Summary) CursorText() string {
	if s.Checkpoints == 0 {
		return "none"
	}
	text := Bytes(s.CursorBytes) + ", checkpoint #" + strconv.FormatInt(s.Checkpoints, 10)
	if !s.CursorAt.IsZero() {
		text += ", saved " + Age(s.CursorAge) + " ago"
	}
	switch {
	case !s.Saved:
		text += "; removed (the job finished, or restarted)"
	case s.Object != "":
		text += ", in S3 (" + s.Object + ")"
	}
	return text
}

// Bytes writes n as "612 B", "1.2 KiB", "3.4 MiB".
func Bytes(n int) string {
	switch {
	case n < 1<<10:
		return strconv.Itoa(n) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

// Age writes d to the second (to the millisecond below a second): "0.25s", "3m10s", "26h0m0s".
func Age(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

// CursorObjects reads cursors kept in S3; *payload.Store implements it.
type CursorObjects interface {
	Get(ctx context.Context, p payload.Pointer) ([]byte, error)
}

// ErrNoCursor is returned by LoadCursor for a record without a saved cursor.
var ErrNoCursor = errors.New("longjob: the job has no saved cursor")

// LoadCursor returns the JSON of the cursor rec holds: its value, or the object it points to,
// read with objects (nil when the stack has no payload bucket: an error for a cursor in S3).
func LoadCursor(ctx context.Context, rec idempotency.Record, objects CursorObjects) ([]byte, error) {
	switch {
	case rec.Cursor.Value != "":
		return []byte(rec.Cursor.Value), nil
	case rec.Cursor.Pointer == "":
		return nil, ErrNoCursor
	}
	p, err := payload.ParsePointer(rec.Cursor.Pointer)
	if err != nil {
		return nil, fmt.Errorf("longjob: the cursor's S3 pointer: %w", err)
	}
	if objects == nil {
		return nil, fmt.Errorf("longjob: the cursor is kept in S3 (%s) and no payload store was given to read it", p)
	}
	return objects.Get(ctx, p)
}
