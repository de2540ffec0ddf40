package outbox_test

import (
	"context"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/outboxtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		s := outbox.NewMemoryStore()
		return outboxtest.Harness{Store: s, Inspector: s, Insert: func(_ context.Context, entries []outbox.Entry) error {
			return s.Add(entries...)
		}}
	})
}
