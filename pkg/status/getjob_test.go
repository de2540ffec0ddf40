package status

import (
	"context"
	"errors"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// TestGetJobReadsWhereTheLayoutPutsIt: a job without a key of its own is read under its id, one
// with a key under kind and key (whose record may be another job's), with one read each.
func TestGetJobReadsWhereTheLayoutPutsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tbl, _, _ := emulatorTable(t)
	const id, other = "01JDGETJOB0000000000000001", "01JDGETJOB0000000000000002"
	if err := tbl.RecordEnqueued(ctx, "email.send", id, id, "h", testNow); err != nil {
		t.Fatal(err)
	}
	if err := tbl.RecordEnqueued(ctx, "email.send", "order-7", other, "h", testNow); err != nil {
		t.Fatal(err)
	}
	j, err := tbl.GetJob(ctx, "email.send", id, id)
	if err != nil || j.JobID != id || j.State != idempotency.StateQueued {
		t.Fatalf("GetJob(id): %+v, %v", j, err)
	}
	j, err = tbl.GetJob(ctx, "email.send", "order-7", "01JDSOMEONEELSE00000000000")
	if err != nil || j.JobID != other {
		t.Fatalf("GetJob(key) of a record another job holds: %+v, %v; want that job's record", j, err)
	}
	if _, err := tbl.GetJob(ctx, "email.send", "nope", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJob of nothing: %v, want ErrNotFound", err)
	}
	if _, err := tbl.GetJob(ctx, "email.send", "k", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetJob without a job id: %v, want ErrInvalid", err)
	}
}
