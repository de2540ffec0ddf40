package dynamooutbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

// A page token is an entry's commit-order key, the by_state index's sort key: one longer than
// DynamoDB's 1,024-byte sort keys is no entry's, and is refused before it reaches DynamoDB (which
// would answer with a ValidationException). One of the right shape and length is taken.
func TestListRefusesAPageTokenLongerThanASortKey(t *testing.T) {
	t.Parallel()
	ob, _ := newOutbox(t, dynamooutbox.Config{})
	ctx := context.Background()
	prefix := "1764410400000000000#"
	long := prefix + strings.Repeat("j", 1025-len(prefix))
	if _, err := ob.List(ctx, outbox.ListQuery{State: outbox.StateDead, PageToken: long}); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("List with a %d-byte token: %v, want ErrInvalid", len(long), err)
	}
	fits := prefix + strings.Repeat("j", 1024-len(prefix))
	if _, err := ob.List(ctx, outbox.ListQuery{State: outbox.StateDead, PageToken: fits}); err != nil {
		t.Errorf("List with a %d-byte token: %v, want an (empty) page", len(fits), err)
	}
}
