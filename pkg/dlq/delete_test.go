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
