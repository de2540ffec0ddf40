package pgoutbox

import (
	"context"

	"github.com/sqsworker/sqsworker/pkg/outbox"
)

// InsertEntries is insert, for the conformance suite's Harness (entries with set times).
func (o *Outbox) InsertEntries(ctx context.Context, tx Tx, entries []outbox.Entry) error {
	return o.insert(ctx, tx, entries)
}
