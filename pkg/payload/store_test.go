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

// fakeS3 keeps objects in memory and fails with err when it is set.
type fakeS3 struct {
	mu   sync.Mutex
	objs map[string][]byte
	puts []*s3.PutObjectInput
	err  error
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
	f.puts = append(f.puts, in)
	return &s3.PutObjectOutput{}, nil
}

func (f *fakeS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	b, ok := f.objs[*in.Bucket+"/"+*in.Key]
	if !ok {
		return nil, &s3types.NoSuchKey{}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(b)), ContentLength: aws.Int64(int64(len(b)))}, nil
}

func (f *fakeS3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
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
