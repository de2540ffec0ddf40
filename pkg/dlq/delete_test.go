package dlq_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// TestDeleteMessage deletes one dead letter by its message id, a body that is not an envelope
// among them: the others stay, visible at once; an unknown id is a NotFoundError; with
// DeletePayload a job kept in S3 loses its object too.
func TestDeleteMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEmu(t, false, false)
	e.seedDead(0, 3)
	e.send(e.stack.DLQURL, "not an envelope", nil)
	d := e.dlq(nil)
	all, err := d.Peek(ctx, 10)
	if err != nil || len(all) != 4 {
		t.Fatalf("Peek = %d, %v", len(all), err)
	}
	var malformed, job1 dlq.Message
	for _, m := range all {
		switch m.JobID {
		case "":
			malformed = m
		case "job-001":
			job1 = m
		}
	}
	for _, victim := range []dlq.Message{malformed, job1} {
		got, err := d.DeleteMessage(ctx, victim.MessageID, dlq.DeleteOptions{})
		if err != nil || got.MessageID != victim.MessageID || got.Body != victim.Body {
			t.Fatalf("DeleteMessage(%s) = %+v, %v", victim.MessageID, got, err)
		}
	}
	// What is left is visible at once (no receive held it): a peek sees exactly the two others.
	left, err := d.Peek(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range left {
		ids = append(ids, m.JobID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "job-000,job-002" {
		t.Fatalf("after deleting two, the DLQ holds %v; want job-000 and job-002", ids)
	}
	_, err = d.DeleteMessage(ctx, malformed.MessageID, dlq.DeleteOptions{})
	var nf *dlq.NotFoundError
	if !errors.As(err, &nf) || nf.MessageID != malformed.MessageID || !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("deleting it again = %v; want a NotFoundError", err)
	}
	if _, err := d.DeleteMessage(ctx, "", dlq.DeleteOptions{}); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("an empty id = %v, want ErrInvalid", err)
	}
	if _, err := d.DeleteMessage(ctx, left[0].MessageID, dlq.DeleteOptions{DeletePayload: true}); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("DeletePayload without Config.Payload = %v, want ErrInvalid", err)
	}

	// A job kept in S3: its object goes with it when asked.
	st := payloadStore(t, e.stack.Name)
	ptr := bigEnvelopeObject(t, st, "big-1")
	e.send(e.stack.DLQURL, ptr.Body(), nil)
	dp := e.dlq(func(c *dlq.Config) { c.Payload = st })
	var big dlq.Message
	msgs, err := dp.Peek(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.JobID == "big-1" {
			big = m
		}
	}
	if big.MessageID == "" {
		t.Fatalf("the pointer dead letter is not listed as big-1: %+v", msgs)
	}
	if got, err := dp.DeleteMessage(ctx, big.MessageID, dlq.DeleteOptions{DeletePayload: true}); err != nil || got.JobID != "big-1" {
		t.Fatalf("DeleteMessage with its payload = %+v, %v", got, err)
	}
	if _, err := st.Get(ctx, ptr); !errors.Is(err, payload.ErrNotFound) {
		t.Fatalf("its object after the delete: %v, want it deleted", err)
	}
}

// TestDeleteMessageNonJobAndPointer: DeleteMessage deletes the one dead letter with that message id (a body that
// is no job, which no redrive heals), leaves every other one in the DLQ and visible, says
// ErrNotFound for an id it no longer finds, and, with DeletePayload, deletes the S3 object of a
// pointer dead letter with it.
func TestDeleteMessageNonJobAndPointer(t *testing.T) {
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

	if _, err := d.DeleteMessage(ctx, malformed, dlq.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteMessage(ctx, malformed, dlq.DeleteOptions{}); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if _, err := d.DeleteMessage(ctx, "", dlq.DeleteOptions{}); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("an empty id: %v, want ErrInvalid", err)
	}
	if _, err := d.DeleteMessage(ctx, pointer, dlq.DeleteOptions{DeletePayload: true}); err != nil {
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
