package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// fakeS3 keeps the objects a payload.Store writes; putErr fails every PutObject.
type fakeS3 struct {
	mu     sync.Mutex
	objs   map[string][]byte // key → content
	puts   []string          // keys, in order
	putErr error
}

func (f *fakeS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.putErr != nil {
		return nil, f.putErr
	}
	b, _ := io.ReadAll(in.Body)
	if f.objs == nil {
		f.objs = map[string][]byte{}
	}
	f.objs[aws.ToString(in.Key)] = b
	f.puts = append(f.puts, aws.ToString(in.Key))
	return &s3.PutObjectOutput{}, nil
}

func (f *fakeS3) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, errors.New("not used")
}

func (f *fakeS3) DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	return nil, errors.New("not used")
}

func newPayloadProducer(t *testing.T, api SQSAPI, s3api *fakeS3, mod ...func(*Config)) *Producer {
	t.Helper()
	st, err := payload.New(payload.Config{S3: s3api, Bucket: "jobs-payloads"})
	if err != nil {
		t.Fatal(err)
	}
	return newTestProducer(t, api, stdURL, append([]func(*Config){func(c *Config) { c.Payload = st }}, mod...)...)
}

func bigBlob(n int) blobArgs { return blobArgs{Data: strings.Repeat("d", n)} }

// TestPayloadMessageIsWhatTheExtendedClientReads checks, field by field, that the message the
// producer sends for a job larger than SQS allows is what the Amazon SQS Extended Client
// Library's receive reads (AmazonSQSExtendedClient.receiveMessage: the reserved attribute marks
// the message, the body is PayloadS3Pointer's Jackson JSON, the object is the original body), and
// compares it with a golden file.
func TestPayloadMessageIsWhatTheExtendedClientReads(t *testing.T) {
	t.Parallel()
	sqsAPI, s3api := &fakeSQS{}, &fakeS3{}
	p := newPayloadProducer(t, sqsAPI, s3api)
	res, err := p.Enqueue(context.Background(), bigBlob(2<<20), WithID("01JDQ3ZV5XG8K2M4N6P8R0T2V5"), WithAttributes(map[string]types.MessageAttributeValue{"tenant": strAttr("acme")}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Payload == nil || res.Payload.String() != "s3://jobs-payloads/sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5" {
		t.Errorf("Result.Payload = %v", res.Payload)
	}
	sent := sqsAPI.sendCalls()
	if len(sent) != 1 {
		t.Fatalf("%d SendMessage calls, want 1", len(sent))
	}
	m := sent[0]
	// 1. The body is a JSON array of two elements: the class name, and an object with the bucket
	//    and the key.
	var parts []json.RawMessage
	if err := json.Unmarshal([]byte(m.Body), &parts); err != nil || len(parts) != 2 {
		t.Fatalf("body %s is not a 2-element JSON array: %v", m.Body, err)
	}
	var class string
	if err := json.Unmarshal(parts[0], &class); err != nil || class != "software.amazon.payloadoffloading.PayloadS3Pointer" {
		t.Errorf("class %s", parts[0])
	}
	var ptr map[string]string
	if err := json.Unmarshal(parts[1], &ptr); err != nil || len(ptr) != 2 || ptr["s3BucketName"] != "jobs-payloads" || ptr["s3Key"] != "sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5" {
		t.Errorf("pointer object %s, want exactly s3BucketName and s3Key", parts[1])
	}
	// 2. The reserved attribute, type Number, holds the object's size in bytes (UTF-8).
	size, ok := m.Attrs["ExtendedPayloadSize"]
	obj := s3api.objs["sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5"]
	if !ok || aws.ToString(size.DataType) != "Number" || aws.ToString(size.StringValue) != payload.SizeValue(len(obj)) {
		t.Errorf("ExtendedPayloadSize = %+v, want Number %d", size, len(obj))
	}
	// 3. The job's own attributes travel beside it, within the library's 9 (10 less its own).
	if aws.ToString(m.Attrs["tenant"].StringValue) != "acme" || len(m.Attrs) != 2 {
		t.Errorf("attributes %v", m.Attrs)
	}
	// 4. The object is the whole envelope, which decodes to the job.
	env, err := jobs.DecodeEnvelope(obj)
	if err != nil || env.ID != res.ID || env.Kind != "blob.store" {
		t.Fatalf("object is not the job's envelope: %v", err)
	}
	var args blobArgs
	if err := json.Unmarshal(env.Args, &args); err != nil || len(args.Data) != 2<<20 {
		t.Errorf("args lost: %d bytes, %v", len(args.Data), err)
	}
	// The golden file: the SQS message, as SendMessage sends it.
	doc, _ := json.MarshalIndent(map[string]any{
		"MessageBody": m.Body,
		"MessageAttributes": map[string]map[string]string{
			"ExtendedPayloadSize": {"DataType": "Number", "StringValue": aws.ToString(size.StringValue)},
			"tenant":              {"DataType": "String", "StringValue": "acme"},
		},
	}, "", "  ")
	golden := filepath.Join("testdata", "pointer-message.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(doc, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(doc, '\n'), want) {
		t.Errorf("message differs from %s (run with -update to accept)\n got %s\nwant %s", golden, doc, want)
	}
}

// EnqueueBatch counts the pointer's size against SQS's request limit: three 2 MiB jobs and a
// small one go in one SendMessageBatch request.
func TestPayloadEnqueueBatchCountsThePointer(t *testing.T) {
	t.Parallel()
	sqsAPI, s3api := &fakeSQS{}, &fakeS3{}
	p := newPayloadProducer(t, sqsAPI, s3api)
	reqs := []Request{{Args: bigBlob(2 << 20)}, {Args: emailArgs{To: "a@b.c"}}, {Args: bigBlob(2 << 20)}, {Args: bigBlob(2 << 20)}}
	results, err := p.EnqueueBatch(context.Background(), reqs)
	if err != nil || JoinErrors(results) != nil {
		t.Fatalf("EnqueueBatch: %v %v", err, JoinErrors(results))
	}
	calls := sqsAPI.batchCalls()
	if len(calls) != 1 || len(calls[0]) != 4 {
		t.Fatalf("%d requests, want 1 with 4 entries", len(calls))
	}
	if len(s3api.puts) != 3 {
		t.Errorf("%d objects written, want 3 (the small job stays inline)", len(s3api.puts))
	}
	if !strings.HasPrefix(calls[0][1].Body, `{"v":1`) || !strings.HasPrefix(calls[0][0].Body, `["software.amazon`) {
		t.Errorf("bodies %.40q %.40q", calls[0][0].Body, calls[0][1].Body)
	}
}

// Prepare calls no AWS service (an outbox stores the message in its transaction); Send writes
// the large ones to S3 and counts their pointers; a second Send of the same messages (a relay
// that crashed after sending) rewrites the same objects.
func TestPayloadPrepareThenSend(t *testing.T) {
	t.Parallel()
	sqsAPI, s3api := &fakeSQS{}, &fakeS3{}
	p := newPayloadProducer(t, sqsAPI, s3api)
	ctx := context.Background()
	var msgs []Message
	for range 3 {
		m, err := p.Prepare(ctx, bigBlob(2<<20))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(s3api.puts) != 0 || len(sqsAPI.batchCalls()) != 0 {
		t.Fatal("Prepare called S3 or SQS")
	}
	if msgs[0].Size() <= MaxMessageSize || !strings.HasPrefix(msgs[0].Body, `{"v":1`) {
		t.Fatalf("prepared message %d bytes, want the whole envelope", msgs[0].Size())
	}
	for range 2 {
		results, err := p.Send(ctx, msgs)
		if err != nil || JoinErrors(results) != nil {
			t.Fatalf("Send: %v %v", err, JoinErrors(results))
		}
	}
	if calls := sqsAPI.batchCalls(); len(calls) != 2 || len(calls[0]) != 3 {
		t.Fatalf("requests %d, want one of 3 entries per Send", len(calls))
	}
	if len(s3api.objs) != 3 || len(s3api.puts) != 6 {
		t.Errorf("%d objects from %d puts, want 3 objects rewritten by the second Send", len(s3api.objs), len(s3api.puts))
	}
	for _, m := range msgs {
		if _, ok := s3api.objs["sqsworker/"+m.ID]; !ok {
			t.Errorf("no object under the job's key for %s", m.ID)
		}
	}
}

func TestPayloadRetriedEnqueueOverwrites(t *testing.T) {
	t.Parallel()
	sqsAPI, s3api := &fakeSQS{}, &fakeS3{}
	p := newPayloadProducer(t, sqsAPI, s3api)
	for range 2 {
		if _, err := p.Enqueue(context.Background(), bigBlob(2<<20), WithID("order-42")); err != nil {
			t.Fatal(err)
		}
	}
	if len(s3api.objs) != 1 || len(s3api.puts) != 2 || s3api.puts[0] != s3api.puts[1] {
		t.Fatalf("objects %d, puts %v: want one object written twice", len(s3api.objs), s3api.puts)
	}
}

func TestPayloadAlwaysAndErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqsAPI, s3api := &fakeSQS{}, &fakeS3{}
	always := newPayloadProducer(t, sqsAPI, s3api, func(c *Config) { c.PayloadAlways = true })
	if _, err := always.Enqueue(ctx, emailArgs{To: "a@b.c"}); err != nil {
		t.Fatal(err)
	}
	if len(s3api.puts) != 1 || !strings.HasPrefix(sqsAPI.sendCalls()[0].Body, "[") {
		t.Fatal("PayloadAlways did not send a small job through S3")
	}
	if _, err := New(Config{SQS: sqsAPI, QueueURL: stdURL, PayloadAlways: true}); err == nil {
		t.Fatal("PayloadAlways without Payload accepted")
	}

	for _, c := range []struct {
		err  error
		want []string
	}{
		{&s3types.NoSuchBucket{}, []string{"bucket jobs-payloads does not exist"}},
		{&smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}, []string{"access denied", "s3:PutObject"}},
	} {
		sqsAPI := &fakeSQS{}
		p := newPayloadProducer(t, sqsAPI, &fakeS3{putErr: c.err})
		_, err := p.Enqueue(ctx, bigBlob(2<<20))
		mustContain(t, err, c.want...)
		if len(sqsAPI.sendCalls()) != 0 {
			t.Error("the pointer was sent although the object was not written")
		}
	}

	// Without Payload, a large job is refused with the hint.
	plain := newTestProducer(t, &fakeSQS{}, stdURL)
	_, err := plain.Enqueue(ctx, bigBlob(2<<20))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v, want ErrTooLarge", err)
	}
	mustContain(t, err, "producer.Config.Payload")
	// Above the store's MaxSize.
	st, _ := payload.New(payload.Config{S3: &fakeS3{}, Bucket: "jobs-payloads", MaxSize: 3 << 20})
	small := newTestProducer(t, &fakeSQS{}, stdURL, func(c *Config) { c.Payload = st })
	_, err = small.Enqueue(ctx, bigBlob(4<<20))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v, want ErrTooLarge", err)
	}
	mustContain(t, err, "payload.Config.MaxSize")
	// The size attributes are reserved.
	_, err = always.Enqueue(ctx, emailArgs{To: "a"}, WithAttributes(map[string]types.MessageAttributeValue{"SQSLargePayloadSize": {DataType: aws.String("Number"), StringValue: aws.String("1")}}))
	mustContain(t, err, "SQSLargePayloadSize", "reserved")
}

// A job sent through S3 cannot go through the scheduler (its target cannot set the size
// attribute): the producer says so instead of sending a pointer Java consumers would not see.
func TestPayloadScheduledLargeJobRefused(t *testing.T) {
	t.Parallel()
	sched := &fakeScheduler{}
	p := newPayloadProducer(t, &fakeSQS{}, &fakeS3{}, func(c *Config) { c.Scheduler = sched })
	_, err := p.Enqueue(context.Background(), bigBlob(2<<20), WithDelay(time.Hour))
	mustContain(t, err, "cannot be delayed", "EventBridge Scheduler")
}
