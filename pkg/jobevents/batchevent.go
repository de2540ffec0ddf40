package jobevents

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// BatchDetailType is the detail-type of a batch's completion event.
const BatchDetailType = "Batch Finished"

// BatchEvent is the detail of a batch's completion event: a batch of pkg/batch finished (every
// child succeeded, was dead-lettered or cancelled, and the batch was sealed), which is when its
// callback was put into the outbox. Its JSON is the documented schema (docs/JOB-CONTROL.md).
type BatchEvent struct {
	// V is SchemaVersion.
	V int `json:"v"`
	// ID is stable for the batch's completion: EventID of its item's key, "done" and the time it
	// finished. Deduplicate on it.
	ID string `json:"event_id"`
	// BatchID and Description are the batch's.
	BatchID     string `json:"batch_id"`
	Description string `json:"description"`
	// State is "done".
	State string `json:"state"`
	// Total is the children counted; Succeeded, Dead and Cancelled how they finished, as the
	// callback's summary has them (a child redriven later moves the batch's counts, not the
	// event's). Absent (nil) only for an item written without counts.
	Total     *int `json:"total,omitempty"`
	Succeeded *int `json:"succeeded,omitempty"`
	Dead      *int `json:"dead,omitempty"`
	Cancelled *int `json:"cancelled,omitempty"`
	// CallbackJobID and CallbackKind are the callback's ("" for a batch without one); the
	// callback job has its own Job Finished event when it ends.
	CallbackJobID string `json:"callback_job_id"`
	CallbackKind  string `json:"callback_kind"`
	// CreatedAt is when the batch was started, SealedAt when it was sealed, FinishedAt when its
	// last child finished (or the seal found every child finished).
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	SealedAt   *time.Time `json:"sealed_at,omitempty"`
	FinishedAt time.Time  `json:"finished_at"`
	// CancelledAt and CancelReason say the batch was cancelled before it finished.
	CancelledAt  *time.Time `json:"cancelled_at,omitempty"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	// Table is the job table, from the stream's ARN ("" when unknown).
	Table string `json:"table"`
}

// The batch item's shape in the job table (docs/TABLE.md, "Batches and chains"; pkg/batch writes
// it): its partition key is "batch:" + id, its state st is "done" once it finished, and these
// attributes carry what the event reports. pkg/batch's tests read a real finished batch through
// batchFromRecord, so a change there that this does not follow fails them.
const (
	batchKeyPrefix   = "batch:"
	batchStateDone   = "done"
	batchAttrDesc    = "desc"
	batchAttrTotal   = "tot"
	batchAttrOK      = "ok"
	batchAttrDead    = "dead"
	batchAttrCxl     = "cxl"
	batchAttrCB      = "cb"
	batchAttrCBKind  = "cbk"
	batchAttrCreated = "cat"
	batchAttrSealed  = "sat"
	batchAttrDone    = "dat"
	batchAttrCancel  = "cancel"
)

// batchItemKey reports whether pk is a batch's own item ("batch:<id>"; its parts, callback and
// other items have a further ":" suffix).
func batchItemKey(pk string) bool {
	id, ok := strings.CutPrefix(pk, batchKeyPrefix)
	return ok && id != "" && !strings.Contains(id, ":")
}

// BatchFromRecord returns the completion event of a job table stream record that finished a
// batch (its item entered st "done"), or ok false when the record is anything else.
func BatchFromRecord(r *events.DynamoDBEventRecord) (ev BatchEvent, ok bool, err error) {
	if r.EventName != string(events.DynamoDBOperationTypeInsert) && r.EventName != string(events.DynamoDBOperationTypeModify) {
		return BatchEvent{}, false, nil
	}
	img := r.Change.NewImage
	pk, _ := stringAttr(img, idempotency.AttrPK)
	if st, _ := stringAttr(img, idempotency.AttrState); st != batchStateDone || !batchItemKey(pk) {
		return BatchEvent{}, false, nil
	}
	if r.EventName == string(events.DynamoDBOperationTypeModify) {
		if r.Change.OldImage == nil {
			return BatchEvent{}, false, fmt.Errorf("%w: %s has no old image (the stream must be NEW_AND_OLD_IMAGES)", ErrMalformed, pk)
		}
		if prev, _ := stringAttr(r.Change.OldImage, idempotency.AttrState); prev == batchStateDone {
			return BatchEvent{}, false, nil // a later write to a finished batch (a redriven child's count)
		}
	}
	done, ok, err := msAttr(img, batchAttrDone)
	if err != nil || !ok {
		return BatchEvent{}, false, fmt.Errorf("%w: batch %s is done without a valid %s: %v", ErrMalformed, pk, batchAttrDone, err)
	}
	ev = BatchEvent{V: SchemaVersion, ID: EventID(pk, batchStateDone, done), BatchID: pk[len(batchKeyPrefix):], State: batchStateDone,
		FinishedAt: done, Table: tableOf(r.EventSourceArn)}
	ev.Description, _ = stringAttr(img, batchAttrDesc)
	ev.CallbackJobID, _ = stringAttr(img, batchAttrCB)
	ev.CallbackKind, _ = stringAttr(img, batchAttrCBKind)
	ev.CancelReason, _ = stringAttr(img, idempotency.AttrReason)
	for _, t := range []struct {
		name string
		to   **time.Time
	}{{batchAttrCreated, &ev.CreatedAt}, {batchAttrSealed, &ev.SealedAt}, {batchAttrCancel, &ev.CancelledAt}} {
		v, ok, err := msAttr(img, t.name)
		if err != nil {
			return BatchEvent{}, false, fmt.Errorf("%w: batch %s: %v", ErrMalformed, pk, err)
		}
		if ok {
			*t.to = &v
		}
	}
	if _, ok := img[batchAttrTotal]; !ok {
		return ev, true, nil
	}
	for _, c := range []struct {
		name string
		to   **int
	}{{batchAttrTotal, &ev.Total}, {batchAttrOK, &ev.Succeeded}, {batchAttrDead, &ev.Dead}, {batchAttrCxl, &ev.Cancelled}} {
		n, ok, err := intAttr(img, c.name)
		if err != nil {
			return BatchEvent{}, false, fmt.Errorf("%w: batch %s: %v", ErrMalformed, pk, err)
		}
		if !ok {
			n = 0
		}
		*c.to = &n
	}
	return ev, true, nil
}

// intAttr reads a number attribute of img as an int.
func intAttr(img map[string]events.DynamoDBAttributeValue, name string) (int, bool, error) {
	v, ok := img[name]
	if !ok {
		return 0, false, nil
	}
	if v.DataType() != events.DataTypeNumber {
		return 0, false, fmt.Errorf("attribute %s is not a number", name)
	}
	n, err := strconv.ParseInt(v.Number(), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("attribute %s: %v", name, err)
	}
	return int(n), true, nil
}

// msAttr reads a unix-milliseconds attribute of img.
func msAttr(img map[string]events.DynamoDBAttributeValue, name string) (time.Time, bool, error) {
	n, ok, err := intAttr(img, name)
	if err != nil || !ok {
		return time.Time{}, ok, err
	}
	return time.UnixMilli(int64(n)).UTC(), true, nil
}
