package worker

// Jobs that travel through S3 (pkg/payload), against the embedded emulator's SQS and S3.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// emuPayload is an emulator stack with a payload bucket.
type emuPayload struct {
	*emu
	s3     *s3.Client
	bucket string
	store  *payload.Store
}

func newEmuPayload(t *testing.T, opts awslocal.StackOptions) *emuPayload {
	t.Helper()
	e := newEmu(t, opts)
	b := awslocaltest.Backend(t)
	client := b.S3()
	bucket, err := awslocal.ProvisionBucket(context.Background(), client, e.stack.Name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := payload.New(payload.Config{S3: client, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return &emuPayload{emu: e, s3: client, bucket: bucket, store: st}
}

// envelope returns a test.job envelope whose args carry pad bytes of padding.
func bigEnvelope(t *testing.T, id, do string, pad int) []byte {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"do": do, "pad": strings.Repeat("p", pad)})
	env := jobs.Envelope{V: 1, ID: id, Kind: "test.job", Args: args}
	b, err := env.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendJava sends a job exactly as the Java Extended Client Library does with its defaults: the
// envelope written under a random key, the body the Jackson pointer, the legacy size attribute.
func (e *emuPayload) sendJava(t *testing.T, env []byte, key, class, sizeAttr string) string {
	t.Helper()
	if _, err := e.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(key),
		Body: strings.NewReader(string(env))}); err != nil {
		t.Fatal(err)
	}
	body := `["` + class + `",{"s3BucketName":"` + e.bucket + `","s3Key":"` + key + `"}]`
	return e.send(body, map[string]sqstypes.MessageAttributeValue{
		sizeAttr: {DataType: aws.String("Number"), StringValue: aws.String(payload.SizeValue(len(env)))},
	}, "")
}

func (e *emuPayload) exists(t *testing.T, key string) bool {
	t.Helper()
	_, err := e.s3.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
	return err == nil
}

// padRecorder records the size of the pad each job received.
func padOf(t *testing.T, in jobs.Info) int {
	t.Helper()
	var a struct {
		Pad string `json:"pad"`
	}
	if err := json.Unmarshal(in.RawArgs, &a); err != nil {
		t.Fatal(err)
	}
	return len(a.Pad)
}

// TestEmulatorPayloadFromJavaExtendedClient consumes messages built exactly as the Java library
// writes them (pointer body, size attribute, the original body in the object), in every form it
// has written: current and legacy class name, current and legacy size attribute. The jobs run
// with their args intact, beside an inline job of the same batch, and their objects are deleted.
func TestEmulatorPayloadFromJavaExtendedClient(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	rec := newRecorder(t)
	var outcomes []Outcome
	h := e.handler(t, rec, time.Second, func(c *Config) {
		c.Payload = e.store
		c.OnBatch = func(_ context.Context, o []Outcome) { outcomes = append(outcomes, o...) }
	})
	forms := []struct{ key, class, attr string }{
		{"5f0c3e2a-1b2c-4d5e-8f90-a1b2c3d4e5f6", payload.PointerClass, payload.LegacySizeAttribute}, // the Java default
		{"6a1d4f3b-2c3d-4e5f-9a01-b2c3d4e5f6a7", payload.PointerClass, payload.SizeAttribute},
		{"7b2e5a4c-3d4e-4f6a-8b12-c3d4e5f6a7b8", payload.LegacyPointerClass, payload.LegacySizeAttribute},
	}
	const pad = 2 << 20
	for i, f := range forms {
		e.sendJava(t, bigEnvelope(t, "java-"+f.key[:8], "ok", pad+i), f.key, f.class, f.attr)
	}
	e.sendJob(testArgs{Do: "ok", N: 1}, nil, "")
	msgs := e.receive(e.stack.QueueURL, 4, 10*time.Second)
	if len(msgs) != 4 {
		t.Fatalf("received %d messages, want 4", len(msgs))
	}
	if failed := e.deliver(context.Background(), h, msgs); len(failed) != 0 {
		t.Fatalf("failed = %v, want none", failed)
	}
	rec.mu.Lock()
	infos := append([]jobs.Info(nil), rec.infos...)
	rec.mu.Unlock()
	if len(infos) != 4 {
		t.Fatalf("%d jobs ran, want 4", len(infos))
	}
	pads := map[string]int{}
	for _, in := range infos {
		pads[in.ID] = padOf(t, in)
	}
	for i, f := range forms {
		if got := pads["java-"+f.key[:8]]; got != pad+i {
			t.Errorf("form %d (%s, %s): the job got %d bytes of pad, want %d", i, f.class, f.attr, got, pad+i)
		}
		if e.exists(t, f.key) {
			t.Errorf("form %d: object %s still exists after the job succeeded", i, f.key)
		}
	}
	fetched := 0
	for _, o := range outcomes {
		if o.Payload != nil {
			fetched++
			if o.Payload.Bytes < pad || !o.Payload.Deleted || o.Payload.Err != nil {
				t.Errorf("payload outcome %+v", *o.Payload)
			}
		}
	}
	if fetched != 3 {
		t.Errorf("%d outcomes with a payload, want 3", fetched)
	}
}

// TestEmulatorPayloadMissingDeadLetters dead-letters a pointer whose object was deleted, with the
// reason payload_missing, keeping the pointer and its attributes in the DLQ copy.
func TestEmulatorPayloadMissingDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	rec := newRecorder(t)
	h := e.handler(t, rec, time.Second, func(c *Config) { c.Payload = e.store })
	msgID := e.sendJava(t, bigEnvelope(t, "gone", "ok", 10), "gone-key", payload.PointerClass, payload.SizeAttribute)
	if err := e.store.Delete(context.Background(), payload.Pointer{Bucket: e.bucket, Key: "gone-key"}); err != nil {
		t.Fatal(err)
	}
	msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
	if failed := e.deliver(context.Background(), h, msgs); len(failed) != 0 {
		t.Fatalf("failed = %v, want none (dead-lettered)", failed)
	}
	if len(rec.ranIDs()) != 0 {
		t.Fatal("the job ran without its payload")
	}
	dead := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	if len(dead) != 1 {
		t.Fatalf("DLQ has %d messages, want 1", len(dead))
	}
	d := dead[0]
	if !strings.HasPrefix(aws.ToString(d.Body), `["software.amazon.payloadoffloading.PayloadS3Pointer"`) {
		t.Errorf("DLQ body %s, want the pointer", aws.ToString(d.Body))
	}
	if aws.ToString(d.MessageAttributes[payload.SizeAttribute].StringValue) == "" {
		t.Errorf("DLQ copy lost the size attribute: %v", d.MessageAttributes)
	}
	var f Failure
	if err := json.Unmarshal([]byte(aws.ToString(d.MessageAttributes[FailureAttribute].StringValue)), &f); err != nil {
		t.Fatal(err)
	}
	if f.Reason != jobs.ReasonPayloadMissing || f.SourceMessageID != msgID || !strings.Contains(f.Error, "gone-key") {
		t.Errorf("failure = %+v, want payload_missing naming the object", f)
	}
}

// TestEmulatorPayloadRetryAndDeadLetterKeepObject keeps the object while the job is retried and
// once it is dead-lettered (exhausted), so that a redrive finds it.
func TestEmulatorPayloadRetryAndDeadLetterKeepObject(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{VisibilityTimeout: 60})
	rec := newRecorder(t)
	h := e.handler(t, rec, 0, func(c *Config) { c.Payload = e.store })
	e.sendJava(t, bigEnvelope(t, "flaky", "fail", 1<<20), "flaky-key", payload.PointerClass, payload.SizeAttribute)
	for attempt := 1; attempt <= 3; attempt++ {
		msgs := e.receive(e.stack.QueueURL, 1, 30*time.Second)
		if len(msgs) != 1 {
			t.Fatalf("attempt %d: received %d", attempt, len(msgs))
		}
		e.deliver(context.Background(), h, msgs)
		if !e.exists(t, "flaky-key") {
			t.Fatalf("attempt %d: the object is gone", attempt)
		}
	}
	dead := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	if len(dead) != 1 || !strings.Contains(aws.ToString(dead[0].Body), "flaky-key") {
		t.Fatalf("DLQ = %v, want the pointer", dead)
	}
	if n := len(rec.ranIDs()); n != 3 {
		t.Fatalf("the job ran %d times, want 3", n)
	}
}

// TestEmulatorPayloadNotAnEnvelope sends a pointer whose object is not an envelope (another
// system's message through the extended client): it goes to the MalformedHook with the object's
// content as its body and without the size attribute; without a hook, to the DLQ as malformed.
func TestEmulatorPayloadNotAnEnvelope(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	var hooked []string
	var hookAttrs []string
	h := e.handler(t, newRecorder(t), time.Second, func(c *Config) {
		c.Payload = e.store
		c.MalformedHook = func(_ context.Context, m events.SQSMessage) error {
			hooked = append(hooked, m.Body)
			for name := range m.MessageAttributes {
				hookAttrs = append(hookAttrs, name)
			}
			return nil
		}
	})
	e.sendJava(t, []byte("<order id='42'/>"), "xml-key", payload.PointerClass, payload.LegacySizeAttribute)
	msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
	if failed := e.deliver(context.Background(), h, msgs); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if len(hooked) != 1 || hooked[0] != "<order id='42'/>" || len(hookAttrs) != 0 {
		t.Fatalf("hook got %q with attributes %v, want the object's content and none", hooked, hookAttrs)
	}
	if e.exists(t, "xml-key") {
		t.Error("the object of a message the hook acknowledged is still there")
	}

	noHook := e.handler(t, newRecorder(t), time.Second, func(c *Config) { c.Payload = e.store })
	e.sendJava(t, []byte("not json"), "bad-key", payload.PointerClass, payload.SizeAttribute)
	msgs = e.receive(e.stack.QueueURL, 1, 10*time.Second)
	e.deliver(context.Background(), noHook, msgs)
	dead := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	if len(dead) != 1 {
		t.Fatalf("DLQ has %d messages, want 1", len(dead))
	}
	var f Failure
	_ = json.Unmarshal([]byte(aws.ToString(dead[0].MessageAttributes[FailureAttribute].StringValue)), &f)
	if f.Reason != jobs.ReasonMalformed || !strings.Contains(aws.ToString(dead[0].Body), "bad-key") || !e.exists(t, "bad-key") {
		t.Errorf("dead letter %s reason %q; object kept %v", aws.ToString(dead[0].Body), f.Reason, e.exists(t, "bad-key"))
	}
}

// TestEmulatorPointerWithoutPayloadConfig explains a pointer the worker cannot read.
func TestEmulatorPointerWithoutPayloadConfig(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	h := e.handler(t, newRecorder(t), time.Second, nil)
	e.sendJava(t, bigEnvelope(t, "x", "ok", 1), "k-1", payload.PointerClass, payload.SizeAttribute)
	e.deliver(context.Background(), h, e.receive(e.stack.QueueURL, 1, 10*time.Second))
	dead := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	if len(dead) != 1 {
		t.Fatalf("DLQ has %d messages, want 1", len(dead))
	}
	var f Failure
	_ = json.Unmarshal([]byte(aws.ToString(dead[0].MessageAttributes[FailureAttribute].StringValue)), &f)
	if f.Reason != jobs.ReasonMalformed || !strings.Contains(f.Error, "no Config.Payload") {
		t.Errorf("failure %+v, want malformed explaining Config.Payload", f)
	}
}

// bigArgs is a job whose args are large.
type bigArgs struct {
	Data string `json:"data"`
}

func (bigArgs) Kind() string { return "big.job" }

// TestEmulatorPayloadFromProducer enqueues a 5 MiB job and a 1 KB one in one EnqueueBatch with
// the producer: the large one goes through S3, both run with their args intact, and the object is
// gone once the job succeeded.
func TestEmulatorPayloadFromProducer(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	ctx := context.Background()
	p, err := producer.New(producer.Config{SQS: e.client, QueueURL: e.stack.QueueURL, Payload: e.store})
	if err != nil {
		t.Fatal(err)
	}
	large := bigArgs{Data: strings.Repeat("0123456789abcdef", 5<<20/16)}
	small := bigArgs{Data: strings.Repeat("s", 1<<10)}
	results, err := p.EnqueueBatch(ctx, []producer.Request{{Args: large}, {Args: small}})
	if err != nil || producer.JoinErrors(results) != nil {
		t.Fatalf("EnqueueBatch: %v %v", err, producer.JoinErrors(results))
	}
	key := e.store.Key(results[0].ID)
	if !e.exists(t, key) {
		t.Fatalf("no object %s after the enqueue", key)
	}
	if e.exists(t, e.store.Key(results[1].ID)) {
		t.Fatal("the 1 KB job was written to S3")
	}
	var mu sync.Mutex
	got := map[string]int{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[bigArgs](func(_ context.Context, j *jobs.Job[bigArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		if j.Args.Data != large.Data && j.Args.Data != small.Data {
			return errors.New("args changed on the way")
		}
		got[j.ID] = len(j.Args.Data)
		return nil
	}))
	h, err := New(Config{Registry: reg, SQS: e.client, Payload: e.store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := e.receive(e.stack.QueueURL, 2, 10*time.Second)
	if len(msgs) != 2 {
		t.Fatalf("received %d, want 2", len(msgs))
	}
	if failed := e.deliver(ctx, h, msgs); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if got[results[0].ID] != len(large.Data) || got[results[1].ID] != len(small.Data) {
		t.Fatalf("ran %v, want both jobs with their args", got)
	}
	if e.exists(t, key) {
		t.Error("the object is still there after the job succeeded")
	}
}

// tagCountS3 is the emulator's S3 with the one thing it lacks for the done mark: S3 reports an
// object's tag count with GetObject (x-amz-tagging-count), kumo v0.33.1 does not, so this client
// fills it in from GetObjectTagging, as S3 would have sent it.
type tagCountS3 struct{ *s3.Client }

func (c tagCountS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := c.Client.GetObject(ctx, in, opts...)
	if err != nil || out.TagCount != nil {
		return out, err
	}
	tags, err := c.Client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: in.Bucket, Key: in.Key})
	if err != nil {
		out.Body.Close()
		return nil, err
	}
	if n := len(tags.TagSet); n > 0 {
		out.TagCount = aws.Int32(int32(n))
	}
	return out, nil
}

// TestEmulatorPayloadDuplicateAfterSuccess: with PayloadMarkDone, a large job's message delivered
// again after the job succeeded (an SQS duplicate; an outbox relay or a producer retry sends a
// second message with the same pointer) is acknowledged, not dead-lettered: its object is still
// there, tagged done. Where S3 reports the tag with the object, the duplicate does not even run.
func TestEmulatorPayloadDuplicateAfterSuccess(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	ctx := context.Background()
	p, err := producer.New(producer.Config{SQS: e.client, QueueURL: e.stack.QueueURL, Payload: e.store, PayloadAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	withCount, err := payload.New(payload.Config{S3: tagCountS3{e.s3}, Bucket: e.bucket})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		store   *payload.Store
		wantRan int // runs of the job over both deliveries
	}{
		{"kumo", e.store, 2},             // no tag count from GetObject: the duplicate runs, as an inline one would
		{"with tag count", withCount, 1}, // as on S3: acknowledged without running
	} {
		rec := newRecorder(t)
		var outcomes []Outcome
		h := e.handler(t, rec, time.Second, func(cfg *Config) {
			cfg.Payload, cfg.PayloadCleanup = c.store, PayloadMarkDone
			cfg.OnBatch = func(_ context.Context, o []Outcome) { outcomes = append(outcomes, o...) }
		})
		res, err := p.Enqueue(ctx, testArgs{Do: "ok", N: len(c.name)})
		if err != nil {
			t.Fatal(err)
		}
		msgs := e.receive(e.stack.QueueURL, 1, 10*time.Second)
		if failed := e.deliver(ctx, h, msgs); len(failed) != 0 {
			t.Fatalf("%s: first delivery failed: %v", c.name, failed)
		}
		key := e.store.Key(res.ID)
		tags, err := e.s3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
		if err != nil || len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Key) != payload.DoneTagKey {
			t.Fatalf("%s: the succeeded job's object: tags %v, %v; want it kept, tagged done", c.name, tags, err)
		}
		// The same body and attributes again, as a duplicate delivery carries them (kumo cannot
		// deliver a deleted message twice, so the duplicate is sent as a message of its own).
		e.send(aws.ToString(msgs[0].Body), msgs[0].MessageAttributes, "")
		if failed := e.deliver(ctx, h, e.receive(e.stack.QueueURL, 1, 10*time.Second)); len(failed) != 0 {
			t.Fatalf("%s: the duplicate was reported failed: %v", c.name, failed)
		}
		if dead := e.receive(e.stack.DLQURL, 0, time.Second); len(dead) != 0 {
			t.Fatalf("%s: the duplicate was dead-lettered: %s", c.name, aws.ToString(dead[0].MessageAttributes[FailureAttribute].StringValue))
		}
		if got := len(rec.ranIDs()); got != c.wantRan {
			t.Errorf("%s: the job ran %d times, want %d", c.name, got, c.wantRan)
		}
		last := outcomes[len(outcomes)-1]
		if c.wantRan == 1 && (last.Outcome != OutcomeSkipped || last.Payload == nil || !last.Payload.Done) {
			t.Errorf("%s: the duplicate's outcome %+v, want skipped (object marked done)", c.name, last)
		}
		if !e.exists(t, key) {
			t.Errorf("%s: the object is gone; the lifecycle rule is to expire it", c.name)
		}
	}
	// An object that is genuinely missing is still payload_missing.
	h := e.handler(t, newRecorder(t), time.Second, func(cfg *Config) { cfg.Payload, cfg.PayloadCleanup = withCount, PayloadMarkDone })
	e.sendJava(t, bigEnvelope(t, "lost", "ok", 10), "sqsworker/lost", payload.PointerClass, payload.SizeAttribute)
	if err := e.store.Delete(ctx, payload.Pointer{Bucket: e.bucket, Key: "sqsworker/lost"}); err != nil {
		t.Fatal(err)
	}
	e.deliver(ctx, h, e.receive(e.stack.QueueURL, 1, 10*time.Second))
	dead := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	var f Failure
	if len(dead) == 1 {
		_ = json.Unmarshal([]byte(aws.ToString(dead[0].MessageAttributes[FailureAttribute].StringValue)), &f)
	}
	if f.Reason != jobs.ReasonPayloadMissing {
		t.Fatalf("a missing object: DLQ %d messages, reason %q; want payload_missing", len(dead), f.Reason)
	}
}

// TestEmulatorPayloadForeignBucketRefused: a pointer to a bucket the store does not allow (any
// sender could name any bucket the worker's role reaches) is dead-lettered as payload_refused;
// the object is neither read (the malformed hook does not see it) nor deleted.
func TestEmulatorPayloadForeignBucketRefused(t *testing.T) {
	t.Parallel()
	e := newEmuPayload(t, awslocal.StackOptions{})
	ctx := context.Background()
	other, err := awslocal.ProvisionBucket(ctx, e.s3, awslocal.UniqueName("secrets"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(other), Key: aws.String("db.txt"), Body: strings.NewReader("password=hunter2")}); err != nil {
		t.Fatal(err)
	}
	var hooked []string
	h := e.handler(t, newRecorder(t), time.Second, func(c *Config) {
		c.Payload = e.store
		c.MalformedHook = func(_ context.Context, m events.SQSMessage) error { hooked = append(hooked, m.Body); return nil }
	})
	body := `["` + payload.PointerClass + `",{"s3BucketName":"` + other + `","s3Key":"db.txt"}]`
	e.send(body, map[string]sqstypes.MessageAttributeValue{payload.SizeAttribute: {DataType: aws.String("Number"), StringValue: aws.String("16")}}, "")
	if failed := e.deliver(ctx, h, e.receive(e.stack.QueueURL, 1, 10*time.Second)); len(failed) != 0 {
		t.Fatalf("failed = %v, want the message dead-lettered", failed)
	}
	dead := e.receive(e.stack.DLQURL, 1, 10*time.Second)
	if len(dead) != 1 {
		t.Fatalf("DLQ has %d messages, want 1", len(dead))
	}
	var f Failure
	_ = json.Unmarshal([]byte(aws.ToString(dead[0].MessageAttributes[FailureAttribute].StringValue)), &f)
	if f.Reason != jobs.ReasonPayloadRefused || !strings.Contains(f.Error, other) || aws.ToString(dead[0].Body) != body {
		t.Errorf("dead letter %s, failure %+v; want the pointer, payload_refused naming the bucket", aws.ToString(dead[0].Body), f)
	}
	if len(hooked) != 0 {
		t.Errorf("the malformed hook got %q: the foreign object was read", hooked)
	}
	if _, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(other), Key: aws.String("db.txt")}); err != nil {
		t.Errorf("the foreign object is gone: %v", err)
	}
}
