package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// Job control on the Job page: a running job's progress and cancellation request, and the Stop
// action (pkg/status's CancelJob: a running job is asked to stop, a retrying one is cancelled at
// once), the same call `sqsworker cancel` makes.

// JobCanceller cancels a job of the job table, a running one by a request its worker honours.
// *status.Table implements it; the console offers Stop when Config.Status implements it too.
type JobCanceller interface {
	CancelJob(ctx context.Context, kind, key, reason string) (status.CancelResult, error)
}

var _ JobCanceller = (*status.Table)(nil)

// controlView is the job control section of the Job page: every text in it is cleaned (hostile).
type controlView struct {
	// Progress: the run's last report (Percent "" when there is none).
	Percent, Message string
	Width            int // the bar's width in percent, 0-100
	ProgressAt       when
	// The cancellation request, when there is one.
	Requested       when
	RequestedReason string
	Running         bool // the job runs: the worker has yet to stop it
	// CanStop offers the Stop action; StopLabel says what it does in this state.
	CanStop   bool
	StopLabel string
}

// toControlView returns the job control section of a record, nil when it has nothing to show or
// offer.
func (c *Console) toControlView(j status.Job) *controlView {
	cv := &controlView{Running: j.State == idempotency.StateRunning}
	if p := j.Progress; !p.IsZero() {
		// Stores keep 4 decimal places: a percentage with at most 2, rounded so that binary
		// floating point does not show 0.29 as 28.999999999999996%.
		cv.Percent = strconv.FormatFloat(math.Round(p.Fraction*1e4)/100, 'f', -1, 64) + "%"
		cv.Width = int(math.Round(p.Fraction * 100))
		cv.Message, cv.ProgressAt = clean(p.Message), c.when(p.At)
	}
	if !j.CancelRequestedAt.IsZero() {
		cv.Requested, cv.RequestedReason = c.when(j.CancelRequestedAt), clean(j.CancelReason)
	}
	_, canCancel := c.cfg.Status.(JobCanceller)
	if canCancel && !j.Expired {
		switch {
		case j.State == idempotency.StateRunning && j.CancelRequestedAt.IsZero() && j.LeaseUntil.After(c.cfg.Now()):
			cv.CanStop, cv.StopLabel = true, "Request cancellation"
		case j.State == idempotency.StateRunning && j.CancelRequestedAt.IsZero(), j.State == idempotency.StateRetrying:
			cv.CanStop, cv.StopLabel = true, "Cancel"
		}
	}
	if cv.Percent == "" && cv.Requested.ISO == "" && !cv.CanStop {
		return nil
	}
	return cv
}

// stopJobAction cancels a running or retrying job (status CancelJob): a running one gets a
// cancellation request, a waiting one is cancelled at once.
func (c *Console) stopJobAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	kind, key, id, reason := r.PostFormValue("kind"), r.PostFormValue("key"), r.PostFormValue("id"), r.PostFormValue("reason")
	al.add("job_id", clip(id, 200), "kind", clip(kind, 128), "key", clip(key, 200))
	canceller, ok := c.cfg.Status.(JobCanceller)
	if !ok {
		al.fail(errors.New("no job table that cancels"))
		c.refuse(w, r, http.StatusNotFound, "This console cannot cancel jobs (it needs the job table).")
		return
	}
	switch {
	case !utf8.ValidString(reason):
		al.fail(errors.New("reason not UTF-8"))
		c.refuse(w, r, http.StatusBadRequest, "The reason is not valid UTF-8.")
		return
	case len(reason) > idempotency.MaxCancelReasonBytes:
		al.fail(errors.New("reason too long"))
		c.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("The reason is %d bytes: at most %d.", len(reason), idempotency.MaxCancelReasonBytes))
		return
	}
	res, err := canceller.CancelJob(r.Context(), kind, key, reason)
	switch {
	case errors.Is(err, status.ErrNotFound) || errors.Is(err, status.ErrInvalid):
		al.fail(err)
		c.refuse(w, r, http.StatusNotFound, "No such job in the job table.")
		return
	case errors.Is(err, status.ErrFinished):
		al.fail(err)
		c.refuse(w, r, http.StatusConflict, "The job has finished: nothing to cancel. "+clean(err.Error()))
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, "The cancel failed: "+clean(err.Error()))
		return
	}
	back := url.Values{"kind": {kind}, "key": {key}, "id": {id}}
	switch {
	case res.AlreadyRequested:
		al.add("outcome", "already_requested")
		c.done(w, r, "/job", back, "requested", "A cancellation of job "+clip(id, 200)+" was already requested: its worker stops it.")
	case res.Requested:
		al.add("outcome", "requested")
		c.done(w, r, "/job", back, "requested", "Cancellation of job "+clip(id, 200)+
			" requested: its worker stops it within about "+(idempotency.DefaultCancelCheck+time.Second).String()+" (the worker's CancelCheck), and it ends cancelled.")
	default:
		al.add("outcome", "cancelled")
		c.done(w, r, "/job", back, "cancelled", "Cancelled job "+clip(id, 200)+" (it was "+clean(string(res.Was))+"): a delivery of it is acknowledged without running.")
	}
}
