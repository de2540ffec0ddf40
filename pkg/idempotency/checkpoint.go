package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// CursorStore keeps the cursors larger than MaxCursorBytes (jobs.Checkpoint) in S3, one object
// per checkpoint, the record holding its pointer. *payload.Store implements it: the objects are
// written under the key of the job's payload (Key) followed by "/cursor/<number>-<claim>", so
// that a worker that lost its claim never overwrites the object of a newer cursor; an object a
// newer cursor replaced, and the last one once the job succeeded or restarts, is marked done
// (MarkDone) for the bucket's lifecycle rule.
type CursorStore interface {
	// Put writes body under key and returns its pointer.
	Put(ctx context.Context, key string, body []byte) (payload.Pointer, error)
	// Get reads the object a pointer names.
	Get(ctx context.Context, p payload.Pointer) ([]byte, error)
	// MarkDone marks an object no record points to any more.
	MarkDone(ctx context.Context, p payload.Pointer) error
	// Key returns the key of a job's payload, derived from its id.
	Key(jobID string) string
	// MaxSize is the largest object Put writes.
	MaxSize() int64
}

var _ CursorStore = (*payload.Store)(nil)

// cursorState is the part of a control that keeps the job's cursor: what the claim returned and
// what this run saved. mu serializes the checkpoint writes, so that their numbers are written in
// order.
type cursorState struct {
	mu     sync.Mutex
	rec    Cursor // the record's cursor: as the claim returned it, then as this run saved it
	value  []byte // rec's JSON, once read (from the record, S3 or a save)
	loaded bool   // value is rec's
	saves  int    // checkpoints this run saved
}

// SaveCheckpoint implements jobs.Checkpointer: one Store.Touch with the cursor under the claim
// (after a PutObject for a cursor above MaxCursorBytes), whose returned record also carries a
// cancellation request. It runs on the store call's own budget, not the job's context, so that
// a job whose slice ended can still save its cursor.
func (c *control) SaveCheckpoint(_ context.Context, data []byte) error {
	cfg := &c.m.cfg
	c.mu.Lock()
	ended := c.ended
	c.mu.Unlock()
	if ended {
		return fmt.Errorf("%w: the job %s has returned", jobs.ErrNoCheckpointer, c.job.ID)
	}
	large := len(data) > MaxCursorBytes
	switch {
	case !utf8.Valid(data):
		return fmt.Errorf("idempotency: checkpoint of job %s: the cursor is not valid UTF-8 JSON", c.job.ID)
	case large && cfg.Cursors == nil:
		return fmt.Errorf("%w: the cursor is %d bytes of JSON, and a job record holds at most %d (idempotency.MaxCursorBytes); keep it smaller, or give the middleware a cursor store (MiddlewareConfig.Cursors, S3) for larger ones",
			jobs.ErrCursorTooLarge, len(data), MaxCursorBytes)
	case large && int64(len(data)) > cfg.Cursors.MaxSize():
		return fmt.Errorf("%w: the cursor is %d bytes of JSON, above the cursor store's limit of %d",
			jobs.ErrCursorTooLarge, len(data), cfg.Cursors.MaxSize())
	}
	cs := &c.cursor
	cs.mu.Lock()
	defer cs.mu.Unlock()
	now := cfg.Now()
	cur := Cursor{Seq: cs.rec.Seq + 1, Bytes: len(data), At: now}
	var ptr payload.Pointer
	if large {
		ctx, cancel := context.WithTimeout(c.base, storeCallTimeout)
		key := cfg.Cursors.Key(c.job.ID) + "/cursor/" + strconv.FormatInt(cur.Seq, 10) + "-" + c.token
		var err error
		ptr, err = cfg.Cursors.Put(ctx, key, data)
		cancel()
		if err != nil {
			return fmt.Errorf("idempotency: checkpoint of job %s: write the cursor to S3: %w", c.job.ID, err)
		}
		cur.Pointer = ptr.Body()
	} else {
		cur.Value = string(data)
	}
	ctx, cancel := context.WithTimeout(c.base, storeCallTimeout)
	rec, err := cfg.Store.Touch(ctx, Touch{Kind: c.job.Kind, Key: c.job.Key, JobID: c.job.ID, Token: c.token, Now: now, Cursor: &cur})
	cancel()
	switch {
	case errors.Is(err, ErrLeaseLost):
		c.m.stats.leaseLost.Add(1)
		cfg.Logger.ErrorContext(c.base, "sqsworker: the job's checkpoint was refused: its claim is no longer held; cancelling the job",
			"job_id", c.job.ID, "kind", c.job.Kind, "key", c.job.Key)
		c.cancel(fmt.Errorf("idempotency: lease lost: %w", err))
		return fmt.Errorf("idempotency: checkpoint of job %s: %w", c.job.ID, err)
	case err != nil:
		return fmt.Errorf("idempotency: checkpoint of job %s: %w", c.job.ID, err)
	}
	old := cs.rec.Pointer
	cs.rec, cs.value, cs.loaded = normalizeCursor(cur, now), data, true
	cs.saves++
	c.m.stats.checkpoints.Add(1)
	if old != "" {
		c.retireCursor(old)
	}
	c.see(&rec)
	return nil
}

// LoadCheckpoint implements jobs.Checkpointer: this run's last saved cursor, else the one the
// claim returned (read from S3 once when it is kept there).
func (c *control) LoadCheckpoint(ctx context.Context) ([]byte, error) {
	cs := &c.cursor
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.loaded {
		return cs.value, nil
	}
	switch {
	case cs.rec.Value != "":
		cs.value = []byte(cs.rec.Value)
	case cs.rec.Pointer != "":
		p, err := payload.ParsePointer(cs.rec.Pointer)
		if err != nil {
			return nil, fmt.Errorf("idempotency: the cursor of job %s: its S3 pointer: %w", c.job.ID, err)
		}
		if c.m.cfg.Cursors == nil {
			return nil, fmt.Errorf("idempotency: the cursor of job %s is kept in S3 (%s), and the middleware has no cursor store (MiddlewareConfig.Cursors)", c.job.ID, p)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		body, err := c.m.cfg.Cursors.Get(rctx, p)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("idempotency: read the cursor of job %s: %w", c.job.ID, err)
		}
		cs.value = body
	}
	cs.loaded = true
	return cs.value, nil
}

// retireCursor marks the S3 object of a cursor no record points to any more (best effort: the
// bucket's lifecycle rule expires it anyway).
func (c *control) retireCursor(pointer string) {
	p, err := payload.ParsePointer(pointer)
	if err != nil || c.m.cfg.Cursors == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.base, storeCallTimeout)
	defer cancel()
	if err := c.m.cfg.Cursors.MarkDone(ctx, p); err != nil {
		c.m.cfg.Logger.WarnContext(c.base, "sqsworker: could not mark a replaced cursor's object done", "job_id", c.job.ID, "object", p.String(), "error", err)
	}
}

// savedCursor returns the record's cursor as the run leaves it.
func (c *control) savedCursor() Cursor {
	c.cursor.mu.Lock()
	defer c.cursor.mu.Unlock()
	return c.cursor.rec
}
