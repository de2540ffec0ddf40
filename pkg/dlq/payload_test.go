package dlq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

func payloadStore(t *testing.T, stack string) *payload.Store {
	t.Helper()
	b := awslocaltest.Backend(t)
	bucket, err := awslocal.ProvisionBucket(context.Background(), b.S3(), stack)
	if err != nil {
		t.Fatal(err)
	}
	st, err := payload.New(payload.Config{S3: b.S3(), Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPayloadDeadLetterShowRedrivePurge follows a job larger than SQS allows: the producer sends
// it through S3, the worker dead-letters it after its attempts (keeping the object), Show says
// where its payload is, a redrive runs it again with its payload (which is then deleted), and
// PurgePayloads deletes the objects of the dead letters it purges.
func TestPayloadDeadLetterShowRedrivePurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEmu(t, false, true)
	st := payloadStore(t, e.stack.Name)
	p, err := producer.New(producer.Config{SQS: e.client, QueueURL: e.stack.QueueURL, Payload: st})
	if err != nil {
		t.Fatal(err)
	}
	type bigArgs = testArgs
	res, err := p.EnqueueRaw(ctx, testKind, []byte(`{"n":7,"pad":"`+strings.Repeat("x", 2<<20)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var fail atomic.Bool
	fail.Store(true)
	var ranWith atomic.Int64
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[bigArgs](func(_ context.Context, j *jobs.Job[bigArgs]) error {
		ranWith.Store(int64(len(j.RawArgs)))
		if fail.Load() {
			return errors.New("not yet")
		}
		return nil
	}), jobs.WithMaxAttempts(2), jobs.WithPolicy(jobs.PolicyFunc(func(int) time.Duration { return 0 })))
	h, err := worker.New(worker.Config{Registry: reg, SQS: e.client, QueueURL: e.stack.QueueURL, DLQURL: e.stack.DLQURL,
		Payload: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	key := payload.Pointer{Bucket: st.Bucket(), Key: st.Key(res.ID)}
	for attempt := 1; attempt <= 2; attempt++ {
		msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
		if len(msgs) != 1 {
			t.Fatalf("attempt %d: received %d", attempt, len(msgs))
		}
		e.deliver(h, msgs)
	}
	if _, err := st.Get(ctx, key); err != nil {
		t.Fatalf("the dead letter's object: %v", err)
	}

	d := e.dlq(func(c *dlq.Config) { c.Payload = st })
	m, err := d.Show(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Payload == nil || m.Payload.Bucket != st.Bucket() || m.Payload.Key != st.Key(res.ID) || m.Payload.Size < 2<<20 || m.Reason != jobs.ReasonExhausted {
		t.Fatalf("Show = %+v (payload %+v)", m, m.Payload)
	}

	fail.Store(false)
	ranWith.Store(0)
	if err := d.RedriveJob(ctx, res.ID, false); err != nil {
		t.Fatal(err)
	}
	msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("after the redrive the queue has %d messages", len(msgs))
	}
	redriven, err := payload.ParsePointer(aws.ToString(msgs[0].Body))
	if err != nil || !strings.HasPrefix(redriven.Key, key.Key+".redrive-") {
		t.Fatalf("the redriven copy's body %s (%v), want a pointer to a rewritten envelope", aws.ToString(msgs[0].Body), err)
	}
	if failed := e.deliver(h, msgs); len(failed) != 0 {
		t.Fatalf("the redriven job failed: %v", failed)
	}
	if ranWith.Load() < 2<<20 {
		t.Fatalf("the redriven job ran with %d bytes of args, want its payload", ranWith.Load())
	}
	if _, err := st.Get(ctx, redriven); !errors.Is(err, payload.ErrNotFound) {
		t.Fatalf("after success the redriven object: %v, want it deleted", err)
	}
	if _, err := st.Get(ctx, key); err != nil {
		t.Fatalf("the dead letter's own object: %v, want it left for the lifecycle rule", err)
	}

	// A pointer SQS moved itself (no failure attribute): Show finds its job through S3.
	moved := bigEnvelopeObject(t, st, "moved-1")
	e.send(e.stack.DLQURL, moved.Body(), map[string]sqstypes.MessageAttributeValue{
		payload.LegacySizeAttribute: {DataType: aws.String("Number"), StringValue: aws.String("20")},
	})
	if m, err := d.Show(ctx, "moved-1"); err != nil || m.Reason != dlq.ReasonMaxReceiveCount || m.Kind != testKind || m.Payload.Size != 20 {
		t.Fatalf("Show of a moved pointer = %+v, %v", m, err)
	}
	n, err := d.PurgePayloads(ctx, dlq.QueueName(e.stack.DLQURL))
	if err != nil || n != 1 {
		t.Fatalf("PurgePayloads = %d, %v; want 1 object deleted", n, err)
	}
	if _, err := st.Get(ctx, moved); !errors.Is(err, payload.ErrNotFound) {
		t.Fatalf("purged dead letter's object: %v, want it deleted", err)
	}
}

// bigEnvelopeObject writes a test job's envelope to S3 and returns its pointer.
func bigEnvelopeObject(t *testing.T, st *payload.Store, id string) payload.Pointer {
	t.Helper()
	env := jobs.Envelope{V: 1, ID: id, Kind: testKind, Args: []byte(`{"n":1}`)}
	p, err := st.Put(context.Background(), st.Key(id), []byte(body(env)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPayloadRedriveFreshBudget: redriving a pointer dead letter resets the attempts_before kept in
// its S3 object, as an inline redrive does: the envelope is rewritten under a key of its own
// (<job key>.redrive-<hash>), a fresh object for the lifecycle rule, the size attribute updated and
// the job's own attributes kept. With KeepAttempts it is rewritten too (fresh object), keeping the
// count.
func TestPayloadRedriveFreshBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, keep := range []bool{false, true} {
		e := newEmu(t, false, false)
		st := payloadStore(t, e.stack.Name)
		env := jobs.Envelope{V: 1, ID: "resent-1", Kind: testKind, Args: []byte(`{"n":1}`), AttemptsBefore: 4, MaxAttempts: 5}
		old, err := st.Put(ctx, st.Key(env.ID)+".resend-0123456789abcdef", []byte(body(env)))
		if err != nil {
			t.Fatal(err)
		}
		attrs := failureAttr(env)
		attrs[payload.LegacySizeAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(payload.SizeValue(len(body(env))))}
		e.send(e.stack.DLQURL, old.Body(), attrs)
		d := e.dlq(func(c *dlq.Config) { c.Payload = st })
		if _, err := d.RedriveAll(ctx, dlq.RedriveOptions{NoMoveTask: true, KeepAttempts: keep}); err != nil {
			t.Fatal(err)
		}
		msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
		if len(msgs) != 1 {
			t.Fatalf("keep=%v: the queue has %d messages", keep, len(msgs))
		}
		p, err := payload.ParsePointer(aws.ToString(msgs[0].Body))
		if err != nil || p == old || !strings.HasPrefix(p.Key, st.Key(env.ID)+".redrive-") {
			t.Fatalf("keep=%v: redriven body %s (%v), want a pointer to a new object", keep, aws.ToString(msgs[0].Body), err)
		}
		data, err := st.Get(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := jobs.DecodeEnvelope(data)
		want := 0
		if keep {
			want = 4
		}
		if err != nil || got.AttemptsBefore != want || got.ID != env.ID || got.MaxAttempts != 5 {
			t.Fatalf("keep=%v: redriven envelope %+v, %v; want attempts_before %d", keep, got, err, want)
		}
		a := msgs[0].MessageAttributes
		if aws.ToString(a[st.SizeAttribute()].StringValue) != payload.SizeValue(len(data)) || a[payload.LegacySizeAttribute].StringValue != nil ||
			aws.ToString(a["tenant"].StringValue) != "acme" || a[worker.FailureAttribute].StringValue != nil {
			t.Errorf("keep=%v: attributes %v, want the new size, the job's own, no failure", keep, a)
		}
	}
}

// TestPointerDeadLetterIdentifiedThroughS3: a large job dead-lettered by a worker that could not
// read S3 (no Config.Payload: reason malformed, a failure attribute without its id or kind) is
// listed, shown and redriven by its id like any other job once the DLQ has the payload store;
// without one, every tool says plainly why the job cannot be identified.
func TestPointerDeadLetterIdentifiedThroughS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEmu(t, false, true)
	st := payloadStore(t, e.stack.Name)
	p, err := producer.New(producer.Config{SQS: e.client, QueueURL: e.stack.QueueURL, Payload: st})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.EnqueueRaw(ctx, testKind, []byte(`{"n":7,"pad":"`+strings.Repeat("x", 1<<20)+`"}`))
	if err != nil || res.Payload == nil {
		t.Fatalf("enqueue: %+v, %v; want the job in S3", res, err)
	}
	var ran atomic.Int64
	blind := e.handler(func(context.Context, *jobs.Job[testArgs]) error { return nil }) // no Config.Payload: the job is malformed to it
	msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("received %d", len(msgs))
	}
	e.deliver(blind, msgs)

	// Without a payload store: listed without an id, and RedriveJob says why it cannot find it.
	bare := e.dlq(nil)
	listed, err := bare.Peek(ctx, 10)
	if err != nil || len(listed) != 1 {
		t.Fatalf("Peek without a store = %+v, %v", listed, err)
	}
	if m := listed[0]; m.JobID != "" || m.Reason != jobs.ReasonMalformed || m.Payload == nil || !errors.Is(m.Payload.Err, dlq.ErrNoPayloadStore) {
		t.Fatalf("Peek without a store = %+v (payload %+v): want no id, reason malformed, Payload.Err wrapping ErrNoPayloadStore", m, m.Payload)
	}
	err = bare.RedriveJob(ctx, res.ID, false)
	var nf *dlq.NotFoundError
	if !errors.As(err, &nf) || nf.Unresolved != 1 || !errors.Is(err, dlq.ErrNotFound) || !errors.Is(err, dlq.ErrNoPayloadStore) {
		t.Fatalf("RedriveJob without a store = %v; want a NotFoundError counting 1 unresolved dead letter, wrapping ErrNoPayloadStore", err)
	}

	// With the store: listed, shown and redriven by its id.
	d := e.dlq(func(c *dlq.Config) { c.Payload = st })
	listed, err = d.Peek(ctx, 10)
	if err != nil || len(listed) != 1 || listed[0].JobID != res.ID || listed[0].Kind != testKind || listed[0].Payload == nil || listed[0].Payload.Err != nil {
		t.Fatalf("Peek = %+v, %v; want job %s of kind %s", listed, err, res.ID, testKind)
	}
	if m, err := d.Show(ctx, res.ID); err != nil || m.MessageID != listed[0].MessageID || m.Kind != testKind {
		t.Fatalf("Show = %+v, %v", m, err)
	}
	if err := d.RedriveJob(ctx, res.ID, false); err != nil {
		t.Fatalf("RedriveJob = %v", err)
	}
	reg := jobs.NewRegistry() // a worker that reads S3 this time
	jobs.MustRegister(reg, jobs.WorkFunc[testArgs](func(_ context.Context, j *jobs.Job[testArgs]) error {
		ran.Store(int64(len(j.RawArgs)))
		return nil
	}))
	h, err := worker.New(worker.Config{Registry: reg, SQS: e.client, QueueURL: e.stack.QueueURL, DLQURL: e.stack.DLQURL,
		Payload: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	msgs = e.receive(e.stack.QueueURL, 1, 10*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("after the redrive the queue has %d messages", len(msgs))
	}
	if failed := e.deliver(h, msgs); len(failed) != 0 || ran.Load() < 1<<20 {
		t.Fatalf("the redriven job: failed %v, ran with %d bytes of args", failed, ran.Load())
	}
	if left, err := d.Peek(ctx, 10); err != nil || len(left) != 0 {
		t.Fatalf("the DLQ after the redrive: %+v, %v", left, err)
	}
}
