package producer

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustShared(t *testing.T) *awslocal.Backend {
	t.Helper()
	backend := awslocaltest.Backend(t)
	return backend
}

// emulatorQueue provisions a queue on the shared embedded emulator.
func emulatorQueue(t *testing.T, fifo bool) (*sqs.Client, *awslocal.Stack) {
	t.Helper()
	client := sqs.NewFromConfig(mustShared(t).Config)
	stack, err := awslocal.Provision(context.Background(), client, awslocal.StackOptions{Name: awslocal.UniqueName(t.Name()), FIFO: fifo})
	if err != nil {
		t.Fatal(err)
	}
	return client, stack
}

// recordingSQS passes calls to a real client and records their inputs.
type recordingSQS struct {
	SQSAPI
	mu      sync.Mutex
	sends   []sentEntry
	batches [][]sentEntry
}

func (r *recordingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.mu.Lock()
	r.sends = append(r.sends, sentEntry{Body: aws.ToString(in.MessageBody), Group: aws.ToString(in.MessageGroupId),
		Dedup: aws.ToString(in.MessageDeduplicationId), Delay: in.DelaySeconds, Attrs: in.MessageAttributes})
	r.mu.Unlock()
	return r.SQSAPI.SendMessage(ctx, in, opts...)
}

func (r *recordingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	entries := make([]sentEntry, len(in.Entries))
	for i, e := range in.Entries {
		entries[i] = sentEntry{ID: aws.ToString(e.Id), Body: aws.ToString(e.MessageBody), Group: aws.ToString(e.MessageGroupId),
			Dedup: aws.ToString(e.MessageDeduplicationId), Delay: e.DelaySeconds, Attrs: e.MessageAttributes}
	}
	r.mu.Lock()
	r.batches = append(r.batches, entries)
	r.mu.Unlock()
	return r.SQSAPI.SendMessageBatch(ctx, in, opts...)
}

// receive reads n messages (fewer if two polls in a row find none), deleting none.
func receive(t *testing.T, client *sqs.Client, queueURL string, n int) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var msgs []types.Message
	for empty := 0; len(msgs) < n && empty < 2; {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			MaxNumberOfMessages:         int32(min(10, n-len(msgs))),
			WaitTimeSeconds:             1,
			VisibilityTimeout:           60,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(out.Messages) == 0 {
			empty++
		}
		msgs = append(msgs, out.Messages...)
	}
	return msgs
}

func TestEmulatorEnqueueGolden(t *testing.T) {
	t.Parallel()
	client, stack := emulatorQueue(t, false)
	p := newTestProducer(t, client, stack.QueueURL, func(c *Config) {
		c.IDs = jobs.IDSource{Rand: func() uint64 { return 0x0123456789abcdef }}
	})
	ctx := jobs.WithTraceParent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	res, err := p.Enqueue(ctx, emailArgs{To: "a@b.c", Subject: "Welcome <new> \"user\""},
		WithKey("order-42-welcome"), WithMaxAttempts(5), WithMeta("tenant", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := receive(t, client, stack.QueueURL, 1)
	if len(msgs) != 1 {
		t.Fatalf("received %d messages", len(msgs))
	}
	if aws.ToString(msgs[0].MessageId) != res.MessageID || res.ID == "" || res.Key != "order-42-welcome" {
		t.Errorf("result %+v, message id %q", res, aws.ToString(msgs[0].MessageId))
	}
	body := aws.ToString(msgs[0].Body)
	golden := filepath.Join("testdata", "enqueue.golden.json")
	if *update {
		if err := os.WriteFile(golden, []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if body+"\n" != string(want) {
		t.Errorf("body differs from %s (run with -update to accept)\n got %s\nwant %s", golden, body, want)
	}
	decodeBody(t, body)
}

func TestEmulatorBatchOf25(t *testing.T) {
	t.Parallel()
	client, stack := emulatorQueue(t, false)
	rec := &recordingSQS{SQSAPI: client}
	p := newTestProducer(t, rec, stack.QueueURL)
	results, err := p.EnqueueBatch(context.Background(), emailRequests(25))
	if err != nil {
		t.Fatal(err)
	}
	if err := JoinErrors(results); err != nil {
		t.Fatal(err)
	}
	if got := entryCounts(rec.batches); len(got) != 3 || got[0] != 10 || got[1] != 10 || got[2] != 5 {
		t.Fatalf("SendMessageBatch calls with %v entries, want [10 10 5]", got)
	}
	want := map[string]string{} // message id -> job id
	for _, r := range results {
		want[r.MessageID] = r.ID
	}
	msgs := receive(t, client, stack.QueueURL, 25)
	if len(msgs) != 25 {
		t.Fatalf("received %d messages, want 25", len(msgs))
	}
	for _, m := range msgs {
		env := decodeBody(t, aws.ToString(m.Body))
		if id, ok := want[aws.ToString(m.MessageId)]; !ok || id != env.ID {
			t.Errorf("message %s carries job %s, want %s", aws.ToString(m.MessageId), env.ID, id)
		}
		delete(want, aws.ToString(m.MessageId))
	}
}

func TestEmulatorFIFO(t *testing.T) {
	t.Parallel()
	client, stack := emulatorQueue(t, true)
	rec := &recordingSQS{SQSAPI: client}
	p := newTestProducer(t, rec, stack.QueueURL)
	ctx := context.Background()
	var reqs []Request
	for _, key := range []string{"a", "b", "c"} {
		reqs = append(reqs, Request{Args: emailArgs{To: key}, Options: []Option{WithGroupID("customer-1"), WithKey(key)}})
	}
	results, err := p.EnqueueBatch(ctx, reqs)
	if err != nil || JoinErrors(results) != nil {
		t.Fatal(err, JoinErrors(results))
	}
	single, err := p.Enqueue(ctx, emailArgs{To: "d"}, WithGroupID("customer-1"), WithKey("order 42 (d)"))
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, single)
	// The same operation again (same kind and key, new job id) is deduplicated by SQS. The
	// emulator answers a deduplicated send with the first copy's body MD5, which the SDK's
	// checksum validation rejects, so this send skips that validation.
	noChecksum := sqs.NewFromConfig(mustShared(t).Config, func(o *sqs.Options) { o.DisableMessageChecksumValidation = true })
	dup, err := newTestProducer(t, noChecksum, stack.QueueURL).Enqueue(ctx, emailArgs{To: "b"}, WithGroupID("customer-1"), WithKey("b"))
	if err != nil {
		t.Fatal(err)
	}
	if dup.MessageID != results[1].MessageID || dup.ID == results[1].ID {
		t.Errorf("duplicate got message %s (job %s), want the first copy's %s", dup.MessageID, dup.ID, results[1].MessageID)
	}
	for _, r := range results {
		if r.SequenceNumber == "" {
			t.Errorf("result %+v has no sequence number", r)
		}
	}
	// The emulator does not return MessageGroupId/MessageDeduplicationId on receive: check what
	// was sent.
	for i, key := range []string{"a", "b", "c"} {
		if e := rec.batches[0][i]; e.Group != "customer-1" || e.Dedup != "email.send:"+key {
			t.Errorf("batch entry %d: group %q, dedup %q", i, e.Group, e.Dedup)
		}
	}
	if e := rec.sends[0]; e.Group != "customer-1" || e.Dedup != sha256Hex("email.send:order 42 (d)") {
		t.Errorf("single send: group %q, dedup %q", e.Group, e.Dedup)
	}
	msgs := receive(t, client, stack.QueueURL, 4)
	if len(msgs) != 4 {
		t.Fatalf("received %d messages, want 4", len(msgs))
	}
	for i, m := range msgs {
		if env := decodeBody(t, aws.ToString(m.Body)); env.ID != results[i].ID {
			t.Errorf("message %d is job %s, want %s (FIFO order)", i, env.ID, results[i].ID)
		}
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &stack.QueueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &stack.QueueURL, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 0 {
		t.Errorf("after the 4 jobs: %d more messages (the duplicate was delivered?), %v", len(out.Messages), err)
	}
}

func TestEmulatorAttributesAndDelay(t *testing.T) {
	t.Parallel()
	client, stack := emulatorQueue(t, false)
	rec := &recordingSQS{SQSAPI: client}
	p := newTestProducer(t, rec, stack.QueueURL)
	attrs := map[string]types.MessageAttributeValue{
		"tenant":       strAttr("acme"),
		"priority":     {DataType: aws.String("Number"), StringValue: aws.String("7")},
		"blob":         {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 0xff}},
		"content.type": {DataType: aws.String("String.mime"), StringValue: aws.String("application/json")},
	}
	ctx := context.Background()
	res, err := p.Enqueue(ctx, emailArgs{To: "a"}, WithAttributes(attrs), WithGroupID("tenant-acme"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, emailArgs{To: "later"}, WithDelay(4500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueBatch(ctx, []Request{{Args: emailArgs{To: "later2"}, Options: []Option{WithDelay(10 * time.Minute)}}}); err != nil {
		t.Fatal(err)
	}
	if d := rec.sends[1].Delay; d != 5 {
		t.Errorf("SendMessage DelaySeconds = %d, want 5", d)
	}
	if d := rec.batches[0][0].Delay; d != 600 {
		t.Errorf("SendMessageBatch DelaySeconds = %d, want 600", d)
	}
	msgs := receive(t, client, stack.QueueURL, 1) // the delayed ones stay hidden
	if len(msgs) != 1 || aws.ToString(msgs[0].MessageId) != res.MessageID {
		t.Fatalf("received %d messages: %v", len(msgs), msgs)
	}
	got := msgs[0].MessageAttributes
	var names []string
	for k := range got {
		names = append(names, k)
	}
	sort.Strings(names)
	if !equalAttrs(got, attrs) {
		t.Errorf("attributes %v differ from %v", names, attrs)
	}
}

// queueMaxSize reads a queue's MaximumMessageSize, as a producer's configuration would.
func queueMaxSize(t *testing.T, client *sqs.Client, url string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out.Attributes["MaximumMessageSize"])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEmulatorQueueMaxMessageSize: the queues awslocal provisions take the producer's largest
// job (1 MiB less 8 KiB), which arrives whole; a queue created smaller, given to the producer as
// Config.QueueMaxMessageSize, gets no job above its limit (the emulator itself would take it:
// SQS would not) and the jobs within it; a Number attribute SQS would refuse is never sent.
func TestEmulatorQueueMaxMessageSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, stack := emulatorQueue(t, false)
	size := queueMaxSize(t, client, stack.QueueURL)
	if size != 1<<20 {
		t.Fatalf("the provisioned queue's MaximumMessageSize is %d, want 1048576", size)
	}
	p := newTestProducer(t, client, stack.QueueURL, func(c *Config) { c.QueueMaxMessageSize = size })
	if _, err := p.Enqueue(ctx, blobArgs{}, WithID("probe")); err != nil {
		t.Fatal(err)
	}
	probe := receive(t, client, stack.QueueURL, 1)
	if len(probe) != 1 {
		t.Fatalf("received %d messages", len(probe))
	}
	fill := MaxMessageSize - len(aws.ToString(probe[0].Body))
	res, err := p.Enqueue(ctx, blobArgs{Data: strings.Repeat("x", fill)}, WithID("probe"))
	if err != nil {
		t.Fatalf("a job of exactly %d bytes: %v", MaxMessageSize, err)
	}
	var got string
	for _, m := range receive(t, client, stack.QueueURL, 2) {
		if aws.ToString(m.MessageId) == res.MessageID {
			got = aws.ToString(m.Body)
		}
	}
	if len(got) != MaxMessageSize {
		t.Fatalf("the largest job arrived with %d bytes, want %d", len(got), MaxMessageSize)
	}

	// A queue of 64 KiB.
	small, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awslocal.UniqueName("small")),
		Attributes: map[string]string{"MaximumMessageSize": "65536"}})
	if err != nil {
		t.Fatal(err)
	}
	smallURL := aws.ToString(small.QueueUrl)
	size = queueMaxSize(t, client, smallURL)
	sp := newTestProducer(t, client, smallURL, func(c *Config) { c.QueueMaxMessageSize = size })
	_, err = sp.Enqueue(ctx, blobArgs{Data: strings.Repeat("x", 70_000)})
	mustContain(t, err, "args are 70011 bytes and attributes 0: the message would exceed 57344 bytes: the queue's MaximumMessageSize of 65536 bytes (producer.Config.QueueMaxMessageSize) less 8 KiB kept for the worker")
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v does not wrap ErrTooLarge", err)
	}
	results, err := sp.EnqueueBatch(ctx, []Request{{Args: blobArgs{Data: strings.Repeat("x", 60_000)}}, {Args: blobArgs{Data: strings.Repeat("y", 40_000)}}})
	if err != nil || results[0].Err == nil || results[1].Err != nil {
		t.Fatalf("batch: %+v, %v; want the 60 KB job refused and the 40 KB one sent", results, err)
	}
	// Number attributes: one SQS refuses is never sent; a valid one arrives.
	num := func(v string) Option {
		return WithAttributes(map[string]types.MessageAttributeValue{"price": {DataType: aws.String("Number"), StringValue: aws.String(v)}})
	}
	for _, v := range []string{"abc", "1e200", "123456789012345678901234567890123456789"} {
		if _, err := sp.Enqueue(ctx, emailArgs{To: "a@b.c"}, num(v)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Number %q: %v, want ErrInvalid", v, err)
		}
	}
	valid, err := sp.Enqueue(ctx, emailArgs{To: "a@b.c"}, num("6.02E23"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := receive(t, client, smallURL, 3)
	if len(msgs) != 2 {
		t.Fatalf("the small queue holds %d messages, want 2: the 40 KB job and the valid Number", len(msgs))
	}
	for _, m := range msgs {
		if body := aws.ToString(m.Body); len(body) > 57344 {
			t.Errorf("a %d-byte message reached the 64 KiB queue", len(body))
		}
		if aws.ToString(m.MessageId) == valid.MessageID && aws.ToString(m.MessageAttributes["price"].StringValue) != "6.02E23" {
			t.Errorf("the Number attribute arrived as %v", m.MessageAttributes["price"])
		}
	}
}
