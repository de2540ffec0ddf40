package jobevents

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsworker/sqsworker/internal/streamimage"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// SchemaVersion is the version of Event's JSON (its "v"). Fields may be added without a new
// version; a change of meaning gets one.
const SchemaVersion = 1

// Defaults of an event's envelope on EventBridge.
const (
	// DefaultSource is the events' source (Config.Source).
	DefaultSource = "sqsworker"
	// DetailType is the events' detail-type.
	DetailType = "Job Finished"
)

// Event is the detail of a completion event: a job's record entered a final state (succeeded,
// dead or cancelled). Its JSON is the documented schema (docs/JOB-CONTROL.md): every field but
// those marked omitempty is always present.
type Event struct {
	// V is SchemaVersion.
	V int `json:"v"`
	// ID is stable for one state change: the hex SHA-256 (first 32 digits) of the record's
	// partition key, its new state and the time of the write that set it. A redelivered stream
	// record (at-least-once) yields the same ID: deduplicate on it.
	ID string `json:"event_id"`
	// JobID, Kind and Key identify the job (Kind is "" for the dead record of a message that
	// named no valid kind).
	JobID string `json:"job_id"`
	Kind  string `json:"kind"`
	Key   string `json:"key"`
	// State is "succeeded", "dead" or "cancelled"; PreviousState the state before the write ("" for
	// a record the write created: a dead letter without a record, a cancellation before any).
	State         string `json:"state"`
	PreviousState string `json:"previous_state"`
	// Reason is the dead-letter reason of a dead job, the reason of a cancelled one ("cancelled",
	// or the one given to Cancel), "" for a success.
	Reason string `json:"reason"`
	// Runs is the record's run count.
	Runs int `json:"runs"`
	// FinishedAt is when the record entered State (the write's time, unix ms precision).
	FinishedAt time.Time `json:"finished_at"`
	// FirstAttemptAt and LastAttemptAt are the first and latest claims (absent when it never ran).
	FirstAttemptAt *time.Time `json:"first_attempt_at,omitempty"`
	LastAttemptAt  *time.Time `json:"last_attempt_at,omitempty"`
	// CancelRequestedAt is when a cancellation of the running job was requested, if it was.
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`
	// ResultBytes is the size of the result a succeeded job stored (idempotency.SetResult); read
	// the result itself with pkg/status (it may hold data the bus should not carry).
	ResultBytes int `json:"result_bytes"`
	// Table is the job table, from the stream's ARN ("" when unknown).
	Table string `json:"table"`
}

// FilterPattern is the filter criteria pattern of the event source mapping that feeds the events
// function: inserts and modifications whose new image is in a final state (a job's succeeded,
// dead or cancelled; a batch's done). Lambda filters before invoking (filtered records cost no
// invocation); the function still drops records whose state did not change (FromRecord,
// BatchFromRecord). ddbstream runs the same filter locally with Filter.
const FilterPattern = `{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"st":{"S":["succeeded","dead","cancelled","done"]}}}}`

// Filter is FilterPattern as a ddbstream.Config.Filter.
func Filter(r *events.DynamoDBEventRecord) bool {
	if r.EventName != string(events.DynamoDBOperationTypeInsert) && r.EventName != string(events.DynamoDBOperationTypeModify) {
		return false
	}
	st, ok := r.Change.NewImage[idempotency.AttrState]
	return ok && st.DataType() == events.DataTypeString && (finalState(st.String()) || st.String() == batchStateDone)
}

func finalState(s string) bool {
	switch idempotency.State(s) {
	case idempotency.StateSucceeded, idempotency.StateDead, idempotency.StateCancelled:
		return true
	}
	return false
}

// ErrMalformed is wrapped by FromRecord's error for a record it cannot read.
var ErrMalformed = errors.New("jobevents: malformed stream record")

// FromRecord returns the completion event of a job table's stream record, or ok false when the
// record is no change to a final state: another event name, another state, an item that is not
// a job record (another item shape in the table), or a write that left the state as it was. The
// stream must carry new and old images (NEW_AND_OLD_IMAGES).
func FromRecord(r *events.DynamoDBEventRecord) (ev Event, ok bool, err error) {
	if !Filter(r) {
		return Event{}, false, nil
	}
	newImg := r.Change.NewImage
	pk, _ := stringAttr(newImg, idempotency.AttrPK)
	if st, _ := stringAttr(newImg, idempotency.AttrState); !finalState(st) || !jobItemKey(pk) {
		return Event{}, false, nil
	}
	prev := ""
	if r.EventName == string(events.DynamoDBOperationTypeModify) {
		if r.Change.OldImage == nil {
			return Event{}, false, fmt.Errorf("%w: %s has no old image (the stream must be NEW_AND_OLD_IMAGES)", ErrMalformed, pk)
		}
		prev, _ = stringAttr(r.Change.OldImage, idempotency.AttrState)
	}
	item, err := streamimage.ToItem(newImg)
	if err != nil {
		return Event{}, false, fmt.Errorf("%w: %s: %v", ErrMalformed, pk, err)
	}
	rec, err := idempotency.RecordFromItem(item)
	if err != nil {
		return Event{}, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if prev == string(rec.State) {
		return Event{}, false, nil // no state change
	}
	if rec.UpdatedAt.IsZero() {
		return Event{}, false, fmt.Errorf("%w: %s in state %s has no update time", ErrMalformed, pk, rec.State)
	}
	ev = Event{
		V: SchemaVersion, ID: EventID(pk, rec.State, rec.UpdatedAt), JobID: rec.JobID, Kind: rec.Kind, Key: rec.Key,
		State: string(rec.State), PreviousState: prev, Reason: rec.Reason, Runs: rec.Runs, FinishedAt: rec.UpdatedAt,
		ResultBytes: len(rec.Result), Table: tableOf(r.EventSourceArn),
	}
	ev.FirstAttemptAt = timePtr(rec.FirstAttemptAt)
	ev.LastAttemptAt = timePtr(rec.LastAttemptAt)
	ev.CancelRequestedAt = timePtr(rec.CancelRequestedAt)
	return ev, true, nil
}

// EventID returns the stable id of the state change of the record pk to state at upd.
func EventID(pk string, state idempotency.State, upd time.Time) string {
	sum := sha256.Sum256([]byte(pk + "\x00" + string(state) + "\x00" + strconv.FormatInt(upd.UnixMilli(), 10)))
	return hex.EncodeToString(sum[:16])
}

// jobItemKey reports whether pk has the shape of a job record's partition key (kind#key, or
// # + id). Items of other shapes that share the table (limit#…, batch#…) pass it too: they are
// told apart by the filter, which wants a job's final state in the attribute st, an attribute
// those items must not use with these values (docs/TABLE.md).
func jobItemKey(pk string) bool {
	return pk != "" && (strings.HasPrefix(pk, idempotency.IDKeyPrefix) || strings.Contains(pk, "#"))
}

// tableOf returns the table name of a stream ARN (arn:aws:dynamodb:…:table/NAME/stream/…).
func tableOf(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func stringAttr(img map[string]events.DynamoDBAttributeValue, name string) (string, bool) {
	v, ok := img[name]
	if !ok || v.DataType() != events.DataTypeString {
		return "", false
	}
	return v.String(), true
}
