package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sqsworker/sqsworker/pkg/batch"
)

// BatchesAPI is the part of *batch.Client the console uses: the Batches page lists batches and
// chains with their progress, shows one with its children or steps, and cancels it.
type BatchesAPI interface {
	List(ctx context.Context, q batch.ListQuery) ([]batch.Info, error)
	Get(ctx context.Context, id string, children int) (batch.Detail, error)
	Cancel(ctx context.Context, id, reason string) (batch.CancelResult, error)
	ListChains(ctx context.Context, q batch.ListQuery) ([]batch.ChainInfo, error)
	GetChain(ctx context.Context, id string) (batch.ChainDetail, error)
	CancelChain(ctx context.Context, id, reason string) error
}

var _ BatchesAPI = (*batch.Client)(nil)

// batchRow is a batch, cleaned for display.
type batchRow struct {
	ID, Href, State, Description, CallbackKind, Callback, CancelReason string
	Total, Running, Succeeded, Dead, Cancelled, Percent                int
	CounterShards                                                      int // > 1: the counts are the shards' sums
	WasCancelled                                                       bool
	Created, Sealed, Done, CancelledAt                                 when
}

// chainRow is a chain, cleaned for display.
type chainRow struct {
	ID, Href, State, Description, CurrentJob, CurrentHref, Reason string
	Steps, Current, FailedStep                                    int
	Created, Done                                                 when
}

type batchesData struct {
	Batches []batchRow
	Chains  []chainRow
}

func (c *Console) batchRow(i batch.Info) batchRow {
	return batchRow{
		ID: clean(i.ID), Href: c.link("/batch", url.Values{"id": {i.ID}}), State: clean(i.State), Description: clip(i.Description, 120),
		CallbackKind: clean(i.CallbackKind), Callback: clean(i.Callback), CancelReason: clip(i.CancelReason, 200),
		Total: i.Total, Running: i.Remaining, Succeeded: i.Succeeded, Dead: i.Dead, Cancelled: i.Cancelled,
		Percent: int(i.Progress()*100 + 1e-9), WasCancelled: !i.CancelledAt.IsZero(), CounterShards: i.CounterShards,
		Created: c.when(i.CreatedAt), Sealed: c.when(i.SealedAt), Done: c.when(i.DoneAt), CancelledAt: c.when(i.CancelledAt),
	}
}

func (c *Console) chainRow(ci batch.ChainInfo) chainRow {
	r := chainRow{
		ID: clean(ci.ID), Href: c.link("/chain", url.Values{"id": {ci.ID}}), State: clean(ci.State), Description: clip(ci.Description, 120),
		CurrentJob: clean(ci.CurrentJob), Reason: clip(ci.Reason, 200), Steps: ci.Steps, Current: ci.Current, FailedStep: ci.FailedStep,
		Created: c.when(ci.CreatedAt), Done: c.when(ci.DoneAt),
	}
	if ci.CurrentJob != "" {
		r.CurrentHref = c.link("/find", url.Values{"q": {ci.CurrentJob}})
	}
	return r
}

// batchesPage lists the newest batches and chains.
func (c *Console) batchesPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(r, "batches", "Batches")
	data := batchesData{}
	v.Data = &data
	if c.cfg.Batches == nil {
		v.Error = "This console has no batch client (give Config.Batches; `sqsworker ui` uses the stack's job table)."
		c.render(w, r, http.StatusOK, v)
		return
	}
	ctx := r.Context()
	code := http.StatusOK
	list, err := c.cfg.Batches.List(ctx, batch.ListQuery{Limit: c.cfg.PageSize})
	if err != nil {
		v.Error, code = c.backendError("Listing the batches failed", err), http.StatusBadGateway
	}
	for _, i := range list {
		data.Batches = append(data.Batches, c.batchRow(i))
	}
	chains, err := c.cfg.Batches.ListChains(ctx, batch.ListQuery{Limit: c.cfg.PageSize})
	if err != nil && v.Error == "" {
		v.Error, code = c.backendError("Listing the chains failed", err), http.StatusBadGateway
	}
	for _, ci := range chains {
		data.Chains = append(data.Chains, c.chainRow(ci))
	}
	c.render(w, r, code, v)
}

// childRow is one child of a batch.
type childRow struct {
	ID, Href, Kind, Key, State, Counted, Reason string
	Runs                                        int
	Updated                                     when
}

type batchData struct {
	B            batchRow
	IDValue      string
	NotSucceeded []childLink
	More         int
	Children     []childRow
	MoreChildren bool
	AllHref      string
	CanCancel    bool
}

type childLink struct{ ID, Href string }

// batchPage shows one batch with its children (the first PageSize, or all with ?all=1).
func (c *Console) batchPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if c.cfg.Batches == nil {
		c.refuse(w, r, http.StatusNotFound, "This console has no batch client.")
		return
	}
	if err := batch.ValidateID(id); err != nil {
		c.refuse(w, r, http.StatusNotFound, "No such batch: the id is not a batch id.")
		return
	}
	limit := c.cfg.PageSize
	if r.URL.Query().Get("all") == "1" {
		limit = 10000
	}
	d, err := c.cfg.Batches.Get(r.Context(), id, limit)
	switch {
	case errors.Is(err, batch.ErrNotFound):
		c.refuse(w, r, http.StatusNotFound, "No such batch in the job table (never created, or expired).")
		return
	case err != nil:
		c.refuse(w, r, http.StatusBadGateway, c.backendError("Reading the batch failed", err))
		return
	}
	v := c.newView(r, "batch", "Batch "+clip(id, 40))
	data := batchData{B: c.batchRow(d.Info), IDValue: raw(id), MoreChildren: d.MoreChildren,
		AllHref: c.link("/batch", url.Values{"id": {id}, "all": {"1"}}), CanCancel: d.State != batch.StateDone}
	for _, x := range d.NotSucceeded {
		data.NotSucceeded = append(data.NotSucceeded, childLink{ID: clean(x), Href: c.link("/find", url.Values{"q": {x}})})
	}
	data.More = d.Dead + d.Cancelled - len(d.NotSucceeded)
	for _, ch := range d.Children {
		row := childRow{ID: clean(ch.ID), Href: c.link("/find", url.Values{"q": {ch.ID}}), Kind: clean(ch.Kind), Key: clip(ch.Key, 80),
			State: clean(string(ch.State)), Counted: clean(ch.Counted), Reason: clip(ch.Reason, 80), Runs: ch.Runs, Updated: c.when(ch.UpdatedAt)}
		if ch.Key == ch.ID {
			row.Key = ""
		}
		if row.State == "" {
			row.State = "not started"
		}
		data.Children = append(data.Children, row)
	}
	v.Data = &data
	c.render(w, r, http.StatusOK, v)
}

// stepRow is one step of a chain.
type stepRow struct {
	Step                                        int
	JobID, Href, Kind, State, Result, LastError string
	Runs                                        int
	Updated                                     when
}

type chainData struct {
	C         chainRow
	IDValue   string
	Steps     []stepRow
	CanCancel bool
}

// chainPage shows one chain with its steps.
func (c *Console) chainPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if c.cfg.Batches == nil {
		c.refuse(w, r, http.StatusNotFound, "This console has no batch client.")
		return
	}
	if err := batch.ValidateID(id); err != nil {
		c.refuse(w, r, http.StatusNotFound, "No such chain: the id is not a chain id.")
		return
	}
	d, err := c.cfg.Batches.GetChain(r.Context(), id)
	switch {
	case errors.Is(err, batch.ErrNotFound):
		c.refuse(w, r, http.StatusNotFound, "No such chain in the job table (never created, or expired).")
		return
	case err != nil:
		c.refuse(w, r, http.StatusBadGateway, c.backendError("Reading the chain failed", err))
		return
	}
	v := c.newView(r, "chain", "Chain "+clip(id, 40))
	data := chainData{C: c.chainRow(d.ChainInfo), IDValue: raw(id), CanCancel: d.State == batch.ChainRunning}
	for _, s := range d.Steps {
		row := stepRow{Step: s.Step, JobID: clean(s.JobID), Href: c.link("/find", url.Values{"q": {s.JobID}}), Kind: clean(s.Kind),
			State: clean(string(s.State)), Result: clip(s.Result, 120), LastError: clip(s.LastError, 120), Runs: s.Runs, Updated: c.when(s.UpdatedAt)}
		if !c.cfg.ShowArgs && s.Result != "" {
			row.Result = "hidden (" + strconv.Itoa(len(s.Result)) + " bytes)"
		}
		if row.State == "" {
			row.State = "not started"
		}
		data.Steps = append(data.Steps, row)
	}
	v.Data = &data
	c.render(w, r, http.StatusOK, v)
}

// cancelBatchAction cancels a batch (batch.Client.Cancel).
func (c *Console) cancelBatchAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	id, reason := r.PostFormValue("id"), r.PostFormValue("reason")
	al.add("batch", clip(id, 200))
	if c.cfg.Batches == nil || batch.ValidateID(id) != nil || len(reason) > 1024 {
		al.fail(errors.New("no batch client, or a bad id or reason"))
		c.refuse(w, r, http.StatusBadRequest, "This console cannot cancel that batch (no batch client, or a bad id or reason).")
		return
	}
	res, err := c.cfg.Batches.Cancel(r.Context(), id, reason)
	switch {
	case errors.Is(err, batch.ErrNotFound):
		al.fail(err)
		c.refuse(w, r, http.StatusNotFound, "No such batch in the job table.")
		return
	case errors.Is(err, batch.ErrFinished):
		al.fail(err)
		c.refuse(w, r, http.StatusConflict, "The batch has finished already: there is nothing to cancel.")
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, c.backendError("The cancel failed", err))
		return
	}
	c.done(w, r, "/batch", url.Values{"id": {id}}, "cancelled", fmt.Sprintf("Cancelled batch %s: %d children that had not started are cancelled; %d running will finish and be counted.",
		clip(id, 200), res.Cancelled, res.Running))
}

// cancelChainAction cancels a chain (batch.Client.CancelChain).
func (c *Console) cancelChainAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	id, reason := r.PostFormValue("id"), r.PostFormValue("reason")
	al.add("chain", clip(id, 200))
	if c.cfg.Batches == nil || batch.ValidateID(id) != nil || len(reason) > 1024 {
		al.fail(errors.New("no batch client, or a bad id or reason"))
		c.refuse(w, r, http.StatusBadRequest, "This console cannot cancel that chain (no batch client, or a bad id or reason).")
		return
	}
	err := c.cfg.Batches.CancelChain(r.Context(), id, reason)
	switch {
	case errors.Is(err, batch.ErrNotFound):
		al.fail(err)
		c.refuse(w, r, http.StatusNotFound, "No such chain in the job table.")
		return
	case errors.Is(err, batch.ErrFinished):
		al.fail(err)
		c.refuse(w, r, http.StatusConflict, "The chain has finished already: there is nothing to cancel.")
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, c.backendError("The cancel failed", err))
		return
	}
	c.done(w, r, "/chain", url.Values{"id": {id}}, "cancelled", "Cancelled chain "+clip(id, 200)+": no further step will be enqueued.")
}
