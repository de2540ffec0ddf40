package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

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

func (f *fakeS3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objs, aws.ToString(in.Key))
	return &s3.DeleteObjectOutput{}, nil
}

func (f *fakeS3) PutObjectTagging(context.Context, *s3.PutObjectTaggingInput, ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error) {
	return nil, errors.New("not used")
}

func (f *fakeS3) GetObjectTagging(context.Context, *s3.GetObjectTaggingInput, ...func(*s3.Options)) (*s3.GetObjectTaggingOutput, error) {
	return nil, errors.New("not used")
}

func (f *fakeS3) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.objs[key]
	return ok
}

func newPayloadProducer(t *testing.T, api SQSAPI, s3api *fakeS3, mod ...func(*Config)) *Producer {
	t.Helper()
	return newPayloadProducerFormat(t, api, s3api, payload.FormatCurrent, mod...)
}

func newPayloadProducerFormat(t *testing.T, api SQSAPI, s3api *fakeS3, f payload.Format, mod ...func(*Config)) *Producer {
	t.Helper()
	st, err := payload.New(payload.Config{S3: s3api, Bucket: "jobs-payloads", Format: f})
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

// TestPayloadLegacyFormat: with payload.Config.Format set, the pointer carries the legacy size
// attribute (SQSLargePayloadSize, the one an extended client with the legacy setting requests)
// and, for FormatLegacy, the legacy class; the size is counted under that name.
func TestPayloadLegacyFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f     payload.Format
		class string
	}{
		{payload.FormatLegacyAttribute, payload.PointerClass},
		{payload.FormatLegacy, payload.LegacyPointerClass},
	} {
		sqsAPI, s3api := &fakeSQS{}, &fakeS3{}
		p := newPayloadProducerFormat(t, sqsAPI, s3api, c.f)
		res, err := p.Enqueue(context.Background(), bigBlob(2<<20))
		if err != nil {
			t.Fatal(err)
		}
		m := sqsAPI.sendCalls()[0]
		size, ok := m.Attrs[payload.LegacySizeAttribute]
		if _, current := m.Attrs[payload.SizeAttribute]; !ok || current || len(m.Attrs) != 1 {
			t.Errorf("%v: attributes %v, want only %s", c.f, m.Attrs, payload.LegacySizeAttribute)
		}
		if aws.ToString(size.DataType) != "Number" || aws.ToString(size.StringValue) != payload.SizeValue(len(s3api.objs[res.Payload.Key])) {
			t.Errorf("%v: size attribute %+v", c.f, size)
		}
		if want := `["` + c.class + `",{"s3BucketName":"jobs-payloads","s3Key":"` + res.Payload.Key + `"}]`; m.Body != want {
			t.Errorf("%v: body %s, want %s", c.f, m.Body, want)
		}
	}
}

// refusal is an SQS answer with an HTTP status, as the SDK returns it.
func refusal(status int, code string) error {
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code}},
	}
}

// TestPayloadRejectedSendDropsObject: when SQS refuses a large job's message for certain and the
// job's id was made by this call, nothing can point to its object, so it is deleted; with a
// caller's id (an earlier send of the same job may be queued) or an answer that leaves it open
// whether SQS took the message, it stays.
func TestPayloadRejectedSendDropsObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		err      error
		opts     []Option
		wantKept bool
	}{
		{"refused", refusal(400, "AWS.SimpleQueueService.NonExistentQueue"), nil, false},
		{"refused, caller's id", refusal(403, "AccessDenied"), []Option{WithID("order-42")}, true},
		{"unknown (5xx)", refusal(500, "InternalError"), nil, true},
		{"unknown (timeout)", context.DeadlineExceeded, nil, true},
	} {
		s3api := &fakeS3{}
		sqsAPI := &fakeSQS{onSend: func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error) { return nil, c.err }}
		p := newPayloadProducer(t, sqsAPI, s3api)
		res, err := p.Enqueue(ctx, bigBlob(2<<20), c.opts...)
		if err == nil || res.Payload == nil {
			t.Fatalf("%s: Enqueue = %+v, %v; want the send error", c.name, res, err)
		}
		if s3api.has(res.Payload.Key) != c.wantKept {
			t.Errorf("%s: object kept %v, want %v", c.name, s3api.has(res.Payload.Key), c.wantKept)
		}
	}
	// EnqueueBatch: an entry SQS reports failed (not retryable) loses its object; the job sent
	// beside it keeps its own; a refused call drops all of its jobs' objects.
	s3api := &fakeS3{}
	sqsAPI := &fakeSQS{onBatch: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		out := succeedAll(call, in)
		out.Successful = out.Successful[1:]
		out.Failed = []types.BatchResultErrorEntry{{Id: in.Entries[0].Id, Code: aws.String("InvalidMessageContents"), SenderFault: true}}
		return out, nil
	}}
	p := newPayloadProducer(t, sqsAPI, s3api)
	results, _ := p.EnqueueBatch(ctx, []Request{{Args: bigBlob(2 << 20)}, {Args: bigBlob(2 << 20)}})
	if results[0].Err == nil || results[1].Err != nil {
		t.Fatalf("results %v, %v; want the first refused", results[0].Err, results[1].Err)
	}
	if s3api.has(results[0].Payload.Key) || !s3api.has(results[1].Payload.Key) {
		t.Errorf("objects: refused kept %v, sent kept %v; want only the sent job's", s3api.has(results[0].Payload.Key), s3api.has(results[1].Payload.Key))
	}
	s3api = &fakeS3{}
	p = newPayloadProducer(t, &fakeSQS{onBatch: func(int, *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return nil, refusal(403, "AccessDenied")
	}}, s3api)
	results, _ = p.EnqueueBatch(ctx, []Request{{Args: bigBlob(2 << 20)}, {Args: bigBlob(2 << 20)}, {Args: bigBlob(2 << 20), Options: []Option{WithID("mine")}}})
	if s3api.has(results[0].Payload.Key) || s3api.has(results[1].Payload.Key) || !s3api.has(results[2].Payload.Key) {
		t.Errorf("after a refused call, objects kept %v %v %v; want only the one with the caller's id (the last)",
			s3api.has(results[0].Payload.Key), s3api.has(results[1].Payload.Key), s3api.has(results[2].Payload.Key))
	}
}
