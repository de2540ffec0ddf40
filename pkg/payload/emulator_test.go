package payload_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/payload"
)

// emulatorBucket returns an S3 client of the shared embedded emulator and a new bucket.
func emulatorBucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	b, err := awslocal.Shared()
	if err != nil {
		t.Fatal(err)
	}
	client := b.S3()
	name, err := awslocal.ProvisionBucket(context.Background(), client, awslocal.UniqueName("payload"))
	if err != nil {
		t.Fatal(err)
	}
	return client, name
}

// TestEmulatorStore runs a Store against the embedded emulator's S3: what works there, and the
// errors it gives for a missing object and a missing bucket.
func TestEmulatorStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, bucket := emulatorBucket(t)
	st, err := payload.New(payload.Config{S3: client, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 5<<20)
	key := st.Key("01JDQ3ZV5XG8K2M4N6P8R0T2V5")
	p, err := st.Put(ctx, key, body)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if p.Bucket != bucket || p.Key != "sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5" {
		t.Fatalf("Put = %+v", p)
	}
	got, err := st.Get(ctx, p)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get = %d bytes, %v; want %d bytes", len(got), err, len(body))
	}
	// A second Put of the same key replaces the object.
	if _, err := st.Put(ctx, key, []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, p); err != nil || string(got) != `{"v":1}` {
		t.Fatalf("Get after overwrite = %q, %v", got, err)
	}
	if err := st.Delete(ctx, p); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := st.Get(ctx, p); !errors.Is(err, payload.ErrNotFound) || !payload.IsPermanent(err) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, p); err != nil {
		t.Fatalf("Delete of a deleted object: %v, want nil (as S3 answers)", err)
	}
	missing := payload.Pointer{Bucket: "no-such-bucket-" + strings.ToLower(awslocal.UniqueName("x")), Key: "k"}
	if _, err := st.Get(ctx, missing); !errors.Is(err, payload.ErrBucketNotAllowed) {
		t.Fatalf("Get from another bucket: %v, want ErrBucketNotAllowed", err)
	}
	other, err := payload.New(payload.Config{S3: client, Bucket: missing.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(ctx, missing); !errors.Is(err, payload.ErrNotFound) || !strings.Contains(err.Error(), "bucket") {
		t.Fatalf("Get from a missing bucket: %v, want ErrNotFound naming the bucket", err)
	}
	if _, err := other.Put(ctx, "k", []byte("{}")); !errors.Is(err, payload.ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Put to a missing bucket: %v, want ErrNotFound saying the bucket does not exist", err)
	}
}

// TestEmulatorServerSideEncryption checks that the emulator records the encryption a put asks
// for, and applies the bucket's default encryption otherwise (it does not enforce bucket
// policies, so a bucket that refuses unencrypted puts cannot be tested here).
func TestEmulatorServerSideEncryption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, bucket := emulatorBucket(t)
	for _, c := range []struct {
		name string
		cfg  payload.Config
		want s3types.ServerSideEncryption
		key  string
	}{
		{"aes256", payload.Config{ServerSideEncryption: s3types.ServerSideEncryptionAes256}, s3types.ServerSideEncryptionAes256, ""},
		{"kms", payload.Config{ServerSideEncryption: s3types.ServerSideEncryptionAwsKms, KMSKeyID: "alias/jobs"}, s3types.ServerSideEncryptionAwsKms, "alias/jobs"},
	} {
		c.cfg.S3, c.cfg.Bucket = client, bucket
		st, err := payload.New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		p, err := st.Put(ctx, st.Key(c.name), []byte(`{}`))
		if err != nil {
			t.Fatalf("%s: Put: %v", c.name, err)
		}
		out, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
		if err != nil {
			t.Fatal(err)
		}
		if out.ServerSideEncryption != c.want || aws.ToString(out.SSEKMSKeyId) != c.key {
			t.Errorf("%s: object encryption %q key %q, want %q %q", c.name, out.ServerSideEncryption, aws.ToString(out.SSEKMSKeyId), c.want, c.key)
		}
	}
}

// TestEmulatorMarkDone measures the emulator's object tagging: MarkDone's PutObjectTagging is
// stored and GetObjectTagging returns it, a new PutObject of the key clears it (as on S3), and a
// missing object answers NoSuchKey. kumo v0.33.1 does not send x-amz-tagging-count with GetObject,
// so Read cannot see the mark there (it reads the tags only of objects S3 says are tagged): the
// test records that gap rather than build on it; Read's use of the count is tested with a fake.
func TestEmulatorMarkDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, bucket := emulatorBucket(t)
	st, err := payload.New(payload.Config{S3: client, Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Put(ctx, st.Key("done-1"), []byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkDone(ctx, p); err != nil {
		t.Fatalf("MarkDone: %v", err)
	}
	tags := func() map[string]string {
		out, err := client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(p.Key)})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, tg := range out.TagSet {
			m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		return m
	}
	if got := tags(); len(got) != 1 || got[payload.DoneTagKey] != payload.DoneTagValue {
		t.Fatalf("tags after MarkDone: %v", got)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(p.Key)})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	t.Logf("kumo GetObject of a tagged object: TagCount %v (S3 sends x-amz-tagging-count)", out.TagCount)
	if _, err := st.Put(ctx, p.Key, []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := tags(); len(got) != 0 {
		t.Fatalf("tags after a new put of the key: %v, want none", got)
	}
	if err := st.MarkDone(ctx, payload.Pointer{Bucket: bucket, Key: "sqsworker/never-written"}); !errors.Is(err, payload.ErrNotFound) {
		t.Fatalf("MarkDone of a missing object: %v, want ErrNotFound", err)
	}
}
