package dlq_test

import (
	"context"
	"errors"
	"sort"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// TestDeleteMessage: DeleteMessage deletes the one dead letter with that message id (a body that
// is no job, which no redrive heals), leaves every other one in the DLQ and visible, says
// ErrNotFound for an id it no longer finds, and deletes the S3 object of a pointer dead letter
// with it.
func TestDeleteMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEmu(t, false, false)
	st := payloadStore(t, e.stack.Name)
	d := e.dlq(func(c *dlq.Config) { c.Payload = st })
	e.seedDead(0, 3)
	e.send(e.stack.DLQURL, "hello from a shell script \u202e", nil)
	ptr, err := st.Put(ctx, st.Key("big-1"), []byte(body(envelope(9))))
	if err != nil {
		t.Fatal(err)
	}
	e.send(e.stack.DLQURL, ptr.Body(), nil)

	msgs, err := d.Peek(ctx, 10)
	if err != nil || len(msgs) != 5 {
		t.Fatalf("Peek: %d messages, %v; want 5", len(msgs), err)
	}
	var malformed, pointer string
	for _, m := range msgs {
		switch {
		case m.Payload != nil:
			pointer = m.MessageID
		case m.JobID == "":
			malformed = m.MessageID
		}
	}
	if malformed == "" || pointer == "" {
		t.Fatalf("no malformed or pointer dead letter among %+v", msgs)
	}

	if err := d.DeleteMessage(ctx, malformed); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteMessage(ctx, malformed); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if err := d.DeleteMessage(ctx, ""); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("an empty id: %v, want ErrInvalid", err)
	}
	if err := d.DeleteMessage(ctx, pointer); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, ptr); !errors.Is(err, payload.ErrNotFound) {
		t.Errorf("the pointer's object after DeleteMessage: %v, want ErrNotFound", err)
	}
	// The others are still there, and visible at once.
	left := e.receive(e.stack.DLQURL, 3, within)
	left = append(left, e.receiveOnce(e.stack.DLQURL, 60)...)
	ids := jobIDs(left)
	sort.Strings(ids)
	if len(ids) != 3 || ids[0] != "job-000" || ids[1] != "job-001" || ids[2] != "job-002" {
		t.Errorf("left in the DLQ: %q, want the three jobs", ids)
	}
}
