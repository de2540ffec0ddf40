package batch

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Store is the worker's idempotency store for jobs that belong to batches and chains: an
// idempotency.DynamoDBStore whose finishing write of such a job (its outcome final: succeeded,
// dead, cancelled) is one DynamoDB transaction with its batch's counters or its chain's state, so
// that the child is counted exactly once, whatever the duplicate deliveries, retries, redrives and
// crashes. The transaction that finishes a batch (its last child, sealed) also puts the callback
// into the outbox; the one of a chain's step that succeeded puts the next step there, with the
// step's result. Everything else (claims, renewals, the outcome of jobs in no batch or chain, a
// retrying outcome) is the wrapped store's, unchanged: one UpdateItem.
//
// Give it to the idempotency middleware (idempotency.MiddlewareConfig.Store). A child counted in
// no batch (the batch is gone, or never counted it) is recorded as any job, and logged.
type Store struct {
	*idempotency.DynamoDBStore
	c *Client
}

var _ idempotency.Store = (*Store)(nil)

// WrapStore returns the Store that counts s's jobs in their batches and chains. s must write to
// the Client's table with its layout and shards.
func (c *Client) WrapStore(s *idempotency.DynamoDBStore) (*Store, error) {
	switch {
	case s == nil:
		return nil, fmt.Errorf("%w: WrapStore of a nil store", ErrInvalid)
	case s.Table() != c.cfg.Table:
		return nil, fmt.Errorf("%w: the store writes to table %s, the batch client to %s", ErrInvalid, s.Table(), c.cfg.Table)
	case s.Layout() != c.cfg.Layout || s.Shards() != c.cfg.Shards:
		return nil, fmt.Errorf("%w: the store's layout (%v, %d shards) is not the batch client's (%v, %d): set Config.Layout and Shards as the store's",
			ErrInvalid, s.Layout(), s.Shards(), c.cfg.Layout, c.cfg.Shards)
	}
	return &Store{DynamoDBStore: s, c: c}, nil
}

// member returns the batch or chain a job's meta names; a job whose meta names one badly is
// logged and counted nowhere.
func (s *Store) member(ctx context.Context, meta map[string]string, jobID string) (group, bool) {
	g, ok, err := groupOf(meta)
	if err != nil {
		s.c.cfg.Logger.WarnContext(ctx, "sqsworker: the job's batch or chain meta is invalid; it is counted nowhere", "job_id", jobID, "error", err)
	}
	return g, ok
}

// Finish implements idempotency.Store: a final outcome of a child of a batch or chain is one
// transaction with its group's update (see Store); anything else is the wrapped store's Finish.
func (s *Store) Finish(ctx context.Context, f idempotency.Finish) error {
	o := outcomeOf(f.State)
	g, ok := s.member(ctx, f.Meta, f.JobID)
	if !ok {
		return s.DynamoDBStore.Finish(ctx, f)
	}
	if min := f.Now.Add(s.c.cfg.ChildTTL); !f.ExpiresAt.IsZero() && f.ExpiresAt.Before(min) {
		f.ExpiresAt = min // duplicates must find the record for as long as they can come
	}
	if o == "" {
		// A retry, counted nowhere; but a failure of a job whose cancellation was requested
		// while it ran (status.CancelJob wrote cxl_at) is recorded as cancelled instead, alone
		// (ErrRecordedCancelled): count that cancellation now. Its message is dead-lettered, not
		// delivered again, so nothing else would. A crash between the two writes leaves the
		// message to come back: its claim is refused as cancelled, and Claim counts it.
		err := s.DynamoDBStore.Finish(ctx, f)
		if errors.Is(err, idempotency.ErrRecordedCancelled) {
			s.countFinal(ctx, g, f.Kind, f.Key, f.JobID, idempotency.StateCancelled, jobs.ReasonCancelled)
		}
		return err
	}
	w := &finishWriter{s: s, f: f, o: o, g: g}
	err := s.c.settle(ctx, g, o, f.Result, f.Reason, w)
	switch {
	case err == nil, errors.Is(err, errAlreadyDone):
		return nil
	case errors.Is(err, errNoChange):
		return s.DynamoDBStore.Finish(ctx, f)
	case errors.Is(err, errNoGroup), errors.Is(err, errNotCounted):
		s.c.cfg.Logger.WarnContext(ctx, "sqsworker: the job's "+g.String()+" cannot count it; its outcome is recorded alone",
			"job_id", f.JobID, "kind", f.Kind, "state", f.State, "error", err)
		return s.DynamoDBStore.Finish(ctx, f)
	case errors.Is(err, idempotency.ErrLeaseLost), ctx.Err() != nil:
		return err
	}
	// The transaction keeps failing (throttling or conflicts beyond the retries, an error): record
	// the outcome alone, so that the job's status is right; Client.Repair counts it later, once.
	s.c.cfg.Logger.ErrorContext(ctx, "sqsworker: could not count the job in its "+g.String()+"; its outcome is recorded alone (count it with Repair, or RepairChain)",
		"job_id", f.JobID, "kind", f.Kind, "state", f.State, "error", err)
	if ferr := s.DynamoDBStore.Finish(ctx, f); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

// MarkDead implements idempotency.Store: a child of a batch or chain dead-lettered without a
// claim (an unknown kind, a payload mismatch, a middleware's dead letter) is marked dead and
// counted in one transaction.
func (s *Store) MarkDead(ctx context.Context, d idempotency.DeadMark) (bool, error) {
	g, ok := s.member(ctx, d.Meta, d.JobID)
	if !ok || d.JobID == "" {
		return s.DynamoDBStore.MarkDead(ctx, d)
	}
	if min := d.Now.Add(s.c.cfg.ChildTTL); !d.ExpiresAt.IsZero() && d.ExpiresAt.Before(min) {
		d.ExpiresAt = min
	}
	w := &markWriter{s: s, d: d}
	err := s.c.settle(ctx, g, countedDead, "", d.Reason, w)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errSkip), errors.Is(err, errAlreadyDone):
		return false, nil
	case errors.Is(err, errNoChange), errors.Is(err, errNoGroup), errors.Is(err, errNotCounted):
		return s.DynamoDBStore.MarkDead(ctx, d)
	case errors.Is(err, errExpired):
		// The store replaces an expired record with a dead one; count that one next.
		marked, err := s.DynamoDBStore.MarkDead(ctx, d)
		if marked && err == nil {
			s.countFinal(ctx, g, d.Kind, d.Key, d.JobID, idempotency.StateDead, d.Reason)
		}
		return marked, err
	case ctx.Err() != nil:
		return false, err
	}
	s.c.cfg.Logger.ErrorContext(ctx, "sqsworker: could not count the dead job in its "+g.String()+"; it is marked dead alone (count it with Repair, or RepairChain)",
		"job_id", d.JobID, "kind", d.Kind, "error", err)
	marked, merr := s.DynamoDBStore.MarkDead(ctx, d)
	if merr != nil {
		return marked, errors.Join(err, merr)
	}
	return marked, nil
}

// Claim implements idempotency.Store with the wrapped store's claim. A child whose claim is
// refused because its record is cancelled (status.Cancel, `sqsworker cancel`, outside its
// batch) is counted as cancelled in its group, once.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	res, err := s.DynamoDBStore.Claim(ctx, req)
	if err != nil || res.Claimed || res.Record.State != idempotency.StateCancelled {
		return res, err
	}
	if g, ok := s.member(ctx, req.Meta, req.JobID); ok && req.JobID != "" {
		s.countFinal(ctx, g, req.Kind, req.Key, req.JobID, idempotency.StateCancelled, res.Record.Reason)
	}
	return res, nil
}

// countFinal counts a child whose record is already in a final state (cancelled outside its
// batch, or made dead by the store) and was never counted. Failures are logged: the next
// delivery of the child tries again.
func (s *Store) countFinal(ctx context.Context, g group, kind, key, jobID string, st idempotency.State, reason string) {
	pk := s.Layout().ItemKey(kind, key, jobID)
	raw, err := s.c.get(ctx, pk)
	if err != nil || raw == nil || getS(raw, attrCounted) != "" || getS(raw, idempotency.AttrState) != string(st) {
		return
	}
	w := &countWriter{c: s.c, pk: pk, id: jobID, state: st}
	if err := s.c.settle(ctx, g, outcomeOf(st), "", reason, w); err != nil && !errors.Is(err, errSkip) && !errors.Is(err, errNoChange) {
		s.c.cfg.Logger.WarnContext(ctx, "sqsworker: could not count the job in its "+g.String(), "job_id", jobID, "state", st, "error", err)
	}
}

// finishWriter is a claim's finishing write.
type finishWriter struct {
	s *Store
	f idempotency.Finish
	o string
	g group
}

func (w *finishWriter) jobID() string { return w.f.JobID }

func (w *finishWriter) action(x idempotency.Extra) (types.TransactWriteItem, error) {
	return w.s.FinishAction(w.f, x)
}

func (w *finishWriter) refused(ctx context.Context) (string, error) {
	pk := w.s.Layout().ItemKey(w.f.Kind, w.f.Key, w.f.JobID)
	raw, err := w.s.c.get(ctx, pk)
	if err != nil {
		return "", err
	}
	if raw == nil {
		return "", idempotency.ErrLeaseLost
	}
	st, tok, counted := getS(raw, idempotency.AttrState), getS(raw, idempotency.AttrToken), getS(raw, attrCounted)
	switch {
	case st == string(idempotency.StateRunning) && tok == w.f.Token:
		return counted, nil // the claim holds: the record was counted before (a redriven child)
	case st == string(w.f.State) && tok == "" && counted == w.o && getN(raw, idempotency.AttrUpdated) == w.f.Now.UnixMilli():
		return "", errAlreadyDone // this very write, whose answer was lost
	case st == string(idempotency.StateCancelled) && counted == "":
		// Cancelled while it ran (status.Cancel took the claim): count the cancellation.
		w.s.countFinal(ctx, w.g, w.f.Kind, w.f.Key, w.f.JobID, idempotency.StateCancelled, getS(raw, idempotency.AttrReason))
	}
	return "", idempotency.ErrLeaseLost
}

// markWriter is a dead mark's write.
type markWriter struct {
	s *Store
	d idempotency.DeadMark
}

func (w *markWriter) jobID() string { return w.d.JobID }

func (w *markWriter) action(x idempotency.Extra) (types.TransactWriteItem, error) {
	return w.s.MarkDeadAction(w.d, x)
}

func (w *markWriter) refused(ctx context.Context) (string, error) {
	raw, err := w.s.c.get(ctx, w.s.Layout().ItemKey(w.d.Kind, w.d.Key, w.d.JobID))
	if err != nil {
		return "", err
	}
	if raw == nil {
		return "", nil // deleted meanwhile: the next write creates the dead record
	}
	rec, err := idempotency.RecordFromItem(raw)
	if err != nil {
		return "", err
	}
	if rec.Expired(w.d.Now) {
		return "", errExpired
	}
	ours := rec.JobID == w.d.JobID || w.d.PayloadHash != "" && rec.PayloadHash == w.d.PayloadHash
	waiting := rec.State == idempotency.StateQueued || rec.State == idempotency.StateScheduled || rec.State == idempotency.StateRetrying ||
		rec.State == idempotency.StateRunning && !rec.LeaseUntil.After(w.d.Now)
	if !ours || !waiting {
		return "", errSkip // not this job's, or it does not wait for a run: MarkDead would leave it too
	}
	return getS(raw, attrCounted), nil
}

// countWriter marks a record that is already final as counted.
type countWriter struct {
	c     *Client
	pk    string
	id    string
	state idempotency.State
}

func (w *countWriter) jobID() string { return w.id }

func (w *countWriter) action(x idempotency.Extra) (types.TransactWriteItem, error) {
	names := map[string]string{"#x_st": idempotency.AttrState}
	values := map[string]types.AttributeValue{":x_st": avS(string(w.state))}
	for k, v := range x.Names {
		names[k] = v
	}
	for k, v := range x.Values {
		values[k] = v
	}
	set := "SET " + x.Set[0]
	for _, a := range x.Set[1:] {
		set += ", " + a
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(w.c.cfg.Table), Key: avKey(w.pk),
		UpdateExpression: aws.String(set), ConditionExpression: aws.String("#x_st = :x_st AND (" + x.Condition + ")"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}}, nil
}

func (w *countWriter) refused(ctx context.Context) (string, error) {
	raw, err := w.c.get(ctx, w.pk)
	if err != nil {
		return "", err
	}
	if raw == nil || getS(raw, idempotency.AttrState) != string(w.state) {
		return "", errSkip
	}
	return getS(raw, attrCounted), nil
}
