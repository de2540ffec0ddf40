package console

import (
	"strconv"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/longjob"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// longJobView is the job page's "Long job" section: what the record says of a job that saves a
// cursor (jobs.Checkpoint), was continued in new runs, or ran for a while (longjob.Summarize).
// The cursor's value is the job's own data: shown, escaped, with Config.ShowArgs only (as args
// are), and only when the record holds it (one kept in S3 is named, not read).
type longJobView struct {
	Cursor        string // what the cursor is: size, number, age (longjob.Summary.CursorText)
	SavedAt       when
	Continuations int
	RunTime       string
	Object        string // the S3 object of a large cursor
	Value         string // the cursor's JSON, when shown
	ValueHidden   string // why it is not shown ("" when it is)
	WakeAt        when   // a sleeping job's wake time (its record's run_at)
	Sleeping      bool   // it sleeps (jobs.Sleep): shown with WakeAt
}

// toLongJobView returns the section of j, or nil when the record shows no long job.
func (c *Console) toLongJobView(j status.Job) *longJobView {
	s, ok := longjob.Summarize(j.Record, c.cfg.Now())
	if !ok {
		return nil
	}
	v := &longJobView{Cursor: clean(s.CursorText()), SavedAt: c.when(s.CursorAt), Continuations: s.Continuations,
		RunTime: longjob.Age(s.RunTime), Object: clean(s.Object), WakeAt: c.when(j.RunAt),
		Sleeping: j.State == idempotency.StateScheduled && j.Continuations > 0 && !j.RunAt.IsZero()}
	switch {
	case !s.Saved:
	case j.Cursor.Value == "":
		v.ValueHidden = "kept in S3 (" + longjob.Bytes(s.CursorBytes) + "): sqsworker cursor reads it"
	case c.cfg.ShowArgs:
		v.Value = clean(clip(j.Cursor.Value, maxCursorShown))
	default:
		v.ValueHidden = "hidden (" + strconv.Itoa(len(j.Cursor.Value)) + " bytes): job data is shown with ShowArgs"
	}
	return v
}

// maxCursorShown bounds the cursor text a page shows (a record holds up to 16 KiB).
const maxCursorShown = 4096
