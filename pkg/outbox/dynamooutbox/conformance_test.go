package dynamooutbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/outboxtest"
)

// The shared conformance suite against the emulator's DynamoDB, a fresh table per case: sent
// jobs deleted (the default), and sent jobs kept with a TTL.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, keep := range []time.Duration{0, time.Hour} {
		name := "DeleteSent"
		if keep > 0 {
			name = "KeepSent"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
				o, _ := newOutbox(t, dynamooutbox.Config{KeepSent: keep})
				return outboxtest.Harness{Store: o, Inspector: o, Insert: func(ctx context.Context, entries []outbox.Entry) error {
					return insert(ctx, o, entries)
				}}
			})
		})
	}
}
