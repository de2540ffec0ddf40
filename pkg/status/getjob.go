package status

import (
	"context"
	"fmt"
)

// GetJob returns the record of one job, read where the table's layout puts it
// (the layout's ItemKey(kind, key, jobID): under the job's id when its key is its id,
// else under kind and key): one strongly consistent GetItem, unlike Get, which cannot tell a key
// from an id and reads both places. key is the job's effective key (its id when it has none of
// its own). The record under kind and key may belong to another job of that key (Job.JobID
// says); an expired record is returned with Expired set. No record: an error wrapping
// ErrNotFound.
func (t *Table) GetJob(ctx context.Context, kind, key, jobID string) (Job, error) {
	if err := validKindKey(kind, key); err != nil {
		return Job{}, err
	}
	if jobID == "" {
		return Job{}, fmt.Errorf("%w: job id is empty", ErrInvalid)
	}
	pk := t.layout.ItemKey(kind, key, jobID)
	item, err := t.getItem(ctx, pk)
	if err != nil {
		return Job{}, fmt.Errorf("status: get job %s (%s/%s): %w", jobID, kind, key, err)
	}
	if item == nil {
		return Job{}, fmt.Errorf("%w: job %s (kind %q, key %q)", ErrNotFound, jobID, kind, key)
	}
	return jobFromItem(item, t.now())
}
