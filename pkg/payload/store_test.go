package payload_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sqsworker/sqsworker/pkg/payload"
)

// fakeS3 keeps objects in memory and fails with err when it is set. It reports an object's tag
// count with GetObject, as S3 does (x-amz-tagging-count), and counts every call.
type fakeS3 struct {
	mu    sync.Mutex
	objs  map[string][]byte
	tags  map[string]map[string]string
	puts  []*s3.PutObjectInput
	err   error
	calls int
}

func (f *fakeS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	b, _ := io.ReadAll(in.Body)
	if f.objs == nil {
		f.objs = map[string][]byte{}
	}
	f.objs[*in.Bucket+"/"+*in.Key] = b
	delete(f.tags, *in.Bucket+"/"+*in.Key) // a new object has only the tags its put gives
	f.puts = append(f.puts, in)
	f.calls++
	return &s3.PutObjectOutput{}, nil
}

func (f *fakeS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.calls++
	b, ok := f.objs[*in.Bucket+"/"+*in.Key]
	if !ok {
		return nil, &s3types.NoSuchKey{}
	}
	out := &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(b)), ContentLength: aws.Int64(int64(len(b)))}
	if n := len(f.tags[*in.Bucket+"/"+*in.Key]); n > 0 {
		out.TagCount = aws.Int32(int32(n))
	}
	return out, nil
}

func (f *fakeS3) PutObjectTagging(_ context.Context, in *s3.PutObjectTaggingInput, _ ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	k := *in.Bucket + "/" + *in.Key
	if _, ok := f.objs[k]; !ok {
		return nil, &smithy.GenericAPIError{Code: "NoSuchKey"}
	}
	if f.tags == nil {
		f.tags = map[string]map[string]string{}
	}
	f.tags[k] = map[string]string{}
	for _, t := range in.Tagging.TagSet {
		f.tags[k][*t.Key] = *t.Value
	}
	return &s3.PutObjectTaggingOutput{}, nil
}

func (f *fakeS3) GetObjectTagging(_ context.Context, in *s3.GetObjectTaggingInput, _ ...func(*s3.Options)) (*s3.GetObjectTaggingOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := &s3.GetObjectTaggingOutput{}
	for k, v := range f.tags[*in.Bucket+"/"+*in.Key] {
		out.TagSet = append(out.TagSet, s3types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out, nil
}

func (f *fakeS3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.calls++
	delete(f.objs, *in.Bucket+"/"+*in.Key)
	return &s3.DeleteObjectOutput{}, nil
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	f := &fakeS3{}
	for _, c := range []struct {
		cfg  payload.Config
		want string
	}{
		{payload.Config{Bucket: "b-1"}, "S3 is nil"},
		{payload.Config{S3: f}, "Bucket is empty"},
		{payload.Config{S3: f, Bucket: "My_Bucket"}, "not a bucket name"},
		{payload.Config{S3: f, Bucket: "ab"}, "not a bucket name"},
		{payload.Config{S3: f, Bucket: "b-1", MaxSize: -1}, "MaxSize"},
		{payload.Config{S3: f, Bucket: "b-1", ServerSideEncryption: "rot13"}, "ServerSideEncryption"},
		{payload.Config{S3: f, Bucket: "b-1", KMSKeyID: "k"}, "KMSKeyID"},
		{payload.Config{S3: f, Bucket: "b-1", KeyPrefix: "/abs"}, "KeyPrefix"},
		{payload.Config{S3: f, Bucket: "b-1", AllowedBuckets: []string{"Java_Bucket"}}, "AllowedBuckets"},
		{payload.Config{S3: f, Bucket: "b-1", Format: 7}, "Format"},
	} {
		if _, err := payload.New(c.cfg); !errors.Is(err, payload.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want ErrConfig naming %q", c.cfg, err, c.want)
		}
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	st, _ := payload.New(payload.Config{S3: &fakeS3{}, Bucket: "b-1"})
	none, _ := payload.New(payload.Config{S3: &fakeS3{}, Bucket: "b-1", KeyPrefix: payload.NoKeyPrefix})
	for _, c := range []struct {
		st   *payload.Store
		id   string
		want string
	}{
		{st, "01JDQ3ZV5XG8K2M4N6P8R0T2V5", "sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5"},
		{st, "550e8400-e29b-41d4-a716-446655440000", "sqsworker/550e8400-e29b-41d4-a716-446655440000"},
		{none, "job_1.a", "job_1.a"},
		{st, "a/b", "sqsworker/sha256-c14cddc033f64b9dea80ea675cf280a015e672516090a5626781153dc68fea11"},
		{st, "..", "sqsworker/sha256-" + "5ec1f7e700f37c3d0b2981d04855fc34b94aaa15457b05ca571817442d228f81"},
	} {
		if got := c.st.Key(c.id); got != c.want {
			t.Errorf("Key(%q) = %q, want %q", c.id, got, c.want)
		}
	}
	if a, b := st.Key("x"), st.Key("x"); a != b {
		t.Fatal("Key is not deterministic")
	}
}

func TestPutSendsEncryptionAndChecksLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeS3{}
	st, err := payload.New(payload.Config{S3: f, Bucket: "b-1", ServerSideEncryption: s3types.ServerSideEncryptionAwsKms, KMSKeyID: "alias/k", MaxSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Put(ctx, "k", []byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	in := f.puts[0]
	if in.ServerSideEncryption != s3types.ServerSideEncryptionAwsKms || aws.ToString(in.SSEKMSKeyId) != "alias/k" || aws.ToInt64(in.ContentLength) != 7 {
		t.Fatalf("PutObject input: sse %q key %q length %d", in.ServerSideEncryption, aws.ToString(in.SSEKMSKeyId), aws.ToInt64(in.ContentLength))
	}
	if p.String() != "s3://b-1/k" {
		t.Fatalf("pointer %s", p)
	}
	if _, err := st.Put(ctx, "k2", bytes.Repeat([]byte("x"), 11)); !errors.Is(err, payload.ErrTooLarge) {
		t.Fatalf("Put over MaxSize: %v, want ErrTooLarge", err)
	}
	f.objs["b-1/big"] = bytes.Repeat([]byte("x"), 11)
	if _, err := st.Get(ctx, payload.Pointer{Bucket: "b-1", Key: "big"}); !errors.Is(err, payload.ErrTooLarge) || !payload.IsPermanent(err) {
		t.Fatalf("Get over MaxSize: %v, want ErrTooLarge", err)
	}
}

func TestErrorsAreExplained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		err       error
		is        error
		permanent bool
		says      string
	}{
		{&smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}, payload.ErrAccessDenied, false, "s3:GetObject"},
		{&s3types.NoSuchBucket{}, payload.ErrNotFound, true, "does not exist"},
		{&smithy.GenericAPIError{Code: "SlowDown"}, nil, false, "SlowDown"},
	} {
		st, _ := payload.New(payload.Config{S3: &fakeS3{err: c.err}, Bucket: "b-1"})
		_, err := st.Get(ctx, payload.Pointer{Bucket: "b-1", Key: "k"})
		if c.is != nil && !errors.Is(err, c.is) || payload.IsPermanent(err) != c.permanent || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Get with %v: %v (permanent %v); want %v, permanent %v, saying %q", c.err, err, payload.IsPermanent(err), c.is, c.permanent, c.says)
		}
	}
}

// TestForeignBucketRefused: a pointer to a bucket that is neither Config.Bucket nor in
// AllowedBuckets is refused before any S3 call, by every operation that takes a pointer; an
// allowed one is served.
func TestForeignBucketRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeS3{objs: map[string][]byte{"secrets/db.json": []byte(`{"password":"x"}`), "java-out/k": []byte(`{"v":1}`), "b-1/k": []byte(`{"v":1}`)}}
	st, err := payload.New(payload.Config{S3: f, Bucket: "b-1", AllowedBuckets: []string{"java-out"}})
	if err != nil {
		t.Fatal(err)
	}
	foreign := payload.Pointer{Bucket: "secrets", Key: "db.json"}
	for name, op := range map[string]func() error{
		"Read":     func() error { _, err := st.Read(ctx, foreign); return err },
		"Get":      func() error { _, err := st.Get(ctx, foreign); return err },
		"Delete":   func() error { return st.Delete(ctx, foreign) },
		"MarkDone": func() error { return st.MarkDone(ctx, foreign) },
	} {
		err := op()
		if !errors.Is(err, payload.ErrBucketNotAllowed) || !payload.IsPermanent(err) || !strings.Contains(err.Error(), `"secrets"`) || !strings.Contains(err.Error(), "b-1, java-out") {
			t.Errorf("%s of %s: %v, want ErrBucketNotAllowed naming the bucket and the allowed ones", name, foreign, err)
		}
	}
	if f.calls != 0 || f.objs["secrets/db.json"] == nil {
		t.Fatalf("%d S3 calls for refused pointers (object kept: %v), want none", f.calls, f.objs["secrets/db.json"] != nil)
	}
	for _, p := range []payload.Pointer{{Bucket: "java-out", Key: "k"}, {Bucket: "b-1", Key: "k"}} {
		if got, err := st.Get(ctx, p); err != nil || string(got) != `{"v":1}` {
			t.Errorf("Get %s = %q, %v; want the object", p, got, err)
		}
	}
	if !st.Allowed("b-1") || !st.Allowed("java-out") || st.Allowed("secrets") {
		t.Error("Allowed disagrees with the config")
	}
}

// TestMarkDone: MarkDone tags the object; Read then reports it done, reading the tags only for an
// object whose GetObject reports tags; a new Put of the key clears the mark.
func TestMarkDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeS3{}
	st, _ := payload.New(payload.Config{S3: f, Bucket: "b-1"})
	p, err := st.Put(ctx, st.Key("job-1"), []byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	f.calls = 0
	if obj, err := st.Read(ctx, p); err != nil || obj.Done || string(obj.Body) != `{"v":1}` || f.calls != 1 {
		t.Fatalf("Read of an untagged object = %+v, %v after %d calls; want not done, one GetObject", obj, err, f.calls)
	}
	if err := st.MarkDone(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := f.tags["b-1/"+p.Key]; len(got) != 1 || got[payload.DoneTagKey] != payload.DoneTagValue {
		t.Fatalf("tags %v, want %s=%s", got, payload.DoneTagKey, payload.DoneTagValue)
	}
	if obj, err := st.Read(ctx, p); err != nil || !obj.Done || string(obj.Body) != `{"v":1}` {
		t.Fatalf("Read of a marked object = %+v, %v; want done", obj, err)
	}
	if _, err := st.Put(ctx, p.Key, []byte(`{"v":1,"again":true}`)); err != nil {
		t.Fatal(err)
	}
	if obj, err := st.Read(ctx, p); err != nil || obj.Done {
		t.Fatalf("Read after a new Put = %+v, %v; want not done", obj, err)
	}
	f.tags["b-1/"+p.Key] = map[string]string{"team": "billing"}
	if obj, _ := st.Read(ctx, p); obj.Done {
		t.Fatal("an object with other tags is reported done")
	}
	if err := st.MarkDone(ctx, payload.Pointer{Bucket: "b-1", Key: "gone"}); !errors.Is(err, payload.ErrNotFound) {
		t.Fatalf("MarkDone of a missing object: %v, want ErrNotFound", err)
	}
}

// TestFormat: Config.Format picks the class of the pointers Put returns and the size attribute's
// name.
func TestFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f           payload.Format
		class, attr string
	}{
		{payload.FormatCurrent, payload.PointerClass, payload.SizeAttribute},
		{payload.FormatLegacyAttribute, payload.PointerClass, payload.LegacySizeAttribute},
		{payload.FormatLegacy, payload.LegacyPointerClass, payload.LegacySizeAttribute},
	} {
		st, err := payload.New(payload.Config{S3: &fakeS3{}, Bucket: "b-1", Format: c.f})
		if err != nil {
			t.Fatal(err)
		}
		p, err := st.Put(context.Background(), "k", []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if p.Class != c.class || st.SizeAttribute() != c.attr || !strings.HasPrefix(p.Body(), `["`+c.class+`",`) {
			t.Errorf("%v: class %s attribute %s body %s; want %s, %s", c.f, p.Class, st.SizeAttribute(), p.Body(), c.class, c.attr)
		}
	}
}
