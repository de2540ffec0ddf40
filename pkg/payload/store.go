package payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3API is the part of the S3 client a Store uses; *s3.Client implements it.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

var _ S3API = (*s3.Client)(nil)

// Errors a Store returns, wrapped with the operation, the object and S3's own error.
var (
	// ErrConfig: a bad Config field.
	ErrConfig = errors.New("payload: invalid config")
	// ErrNotFound: the object or its bucket does not exist (NoSuchKey, NoSuchBucket, HTTP 404).
	// Retrying cannot help.
	ErrNotFound = errors.New("payload: object not found")
	// ErrAccessDenied: S3 refused the request (HTTP 403): the caller lacks a permission (note that
	// without s3:ListBucket on the bucket, S3 answers 403, not 404, for a missing object), or the
	// bucket's policy refuses the request (for example, a put without the encryption it demands).
	ErrAccessDenied = errors.New("payload: access denied")
	// ErrTooLarge: the object is larger than Config.MaxSize.
	ErrTooLarge = errors.New("payload: object too large")
)

// Defaults and limits of [Config].
const (
	// DefaultKeyPrefix is where a Store writes its objects in the bucket.
	DefaultKeyPrefix = "sqsworker/"
	// DefaultMaxSize is the largest payload a Store writes or reads: 64 MiB. A worker holds the
	// whole envelope in memory.
	DefaultMaxSize = 64 << 20
	// MaxObjectSize is S3's limit for one PutObject: 5 GiB.
	MaxObjectSize = 5 << 30
	// maxKeyLength is S3's limit on a key, in bytes.
	maxKeyLength = 1024
	// maxIDInKey is the longest job id used as it is in a key; longer ids (and ids with other
	// characters than [A-Za-z0-9._-]) are replaced by their hash.
	maxIDInKey = 200
)

// Config configures a [Store]. S3 and Bucket are required; the zero value of every other field
// is its default.
type Config struct {
	// S3 is the S3 client, usually s3.NewFromConfig(cfg). Required.
	S3 S3API
	// Bucket is where Put writes payloads. Required. Get and Delete follow the bucket of the
	// pointer they are given, which may be another one (a Java producer's).
	Bucket string
	// KeyPrefix starts every key that Key derives from a job id. Defaults to DefaultKeyPrefix;
	// NoKeyPrefix means none. It must not start with '/'.
	KeyPrefix string
	// ServerSideEncryption is sent with every PutObject: "" (the default) sends none, so the
	// bucket's default encryption applies (S3 encrypts every new object, SSE-S3 unless the bucket
	// says otherwise); "AES256" for SSE-S3, "aws:kms" or "aws:kms:dsse" for SSE-KMS. Set it when
	// the bucket's policy refuses puts without the header.
	ServerSideEncryption s3types.ServerSideEncryption
	// KMSKeyID is the KMS key of SSE-KMS (ServerSideEncryption "aws:kms"). Defaults to "": the
	// bucket's key, or the AWS managed key aws/s3.
	KMSKeyID string
	// MaxSize is the largest payload Put writes and Get reads, in bytes. Defaults to
	// DefaultMaxSize; at most MaxObjectSize.
	MaxSize int64
}

// NoKeyPrefix as Config.KeyPrefix writes keys without a prefix.
const NoKeyPrefix = "-"

// Store reads and writes job payloads in S3. Create it with [New]; it is safe for concurrent
// use.
type Store struct {
	s3      S3API
	bucket  string
	prefix  string
	sse     s3types.ServerSideEncryption
	kmsKey  string
	maxSize int64
}

// New checks cfg and returns a Store.
func New(cfg Config) (*Store, error) {
	switch {
	case cfg.S3 == nil:
		return nil, fmt.Errorf("%w: Config.S3 is nil: pass an S3 client, such as s3.NewFromConfig(cfg)", ErrConfig)
	case cfg.Bucket == "":
		return nil, fmt.Errorf("%w: Config.Bucket is empty: name the bucket that holds large payloads", ErrConfig)
	case cfg.MaxSize < 0 || cfg.MaxSize > MaxObjectSize:
		return nil, fmt.Errorf("%w: Config.MaxSize %d: want 0 (the default, %d) to %d (S3's limit for one PutObject)", ErrConfig, cfg.MaxSize, DefaultMaxSize, int64(MaxObjectSize))
	case cfg.KMSKeyID != "" && !strings.HasPrefix(string(cfg.ServerSideEncryption), "aws:kms"):
		return nil, fmt.Errorf("%w: Config.KMSKeyID is set but ServerSideEncryption is %q: a KMS key needs \"aws:kms\"", ErrConfig, cfg.ServerSideEncryption)
	}
	if err := checkBucketName(cfg.Bucket); err != nil {
		return nil, err
	}
	switch cfg.ServerSideEncryption {
	case "", s3types.ServerSideEncryptionAes256, s3types.ServerSideEncryptionAwsKms, s3types.ServerSideEncryptionAwsKmsDsse:
	default:
		return nil, fmt.Errorf("%w: Config.ServerSideEncryption %q: want \"\", %q, %q or %q", ErrConfig, cfg.ServerSideEncryption,
			s3types.ServerSideEncryptionAes256, s3types.ServerSideEncryptionAwsKms, s3types.ServerSideEncryptionAwsKmsDsse)
	}
	s := &Store{s3: cfg.S3, bucket: cfg.Bucket, prefix: cfg.KeyPrefix, sse: cfg.ServerSideEncryption, kmsKey: cfg.KMSKeyID, maxSize: cfg.MaxSize}
	switch s.prefix {
	case "":
		s.prefix = DefaultKeyPrefix
	case NoKeyPrefix:
		s.prefix = ""
	default:
		if strings.HasPrefix(s.prefix, "/") || len(s.prefix) > maxKeyLength-maxIDInKey-20 {
			return nil, fmt.Errorf("%w: Config.KeyPrefix %q must not start with '/' and is at most %d bytes", ErrConfig, s.prefix, maxKeyLength-maxIDInKey-20)
		}
	}
	if s.maxSize == 0 {
		s.maxSize = DefaultMaxSize
	}
	return s, nil
}

// checkBucketName applies S3's rules for general purpose bucket names: 3-63 characters of
// lower-case letters, digits, '.' and '-', starting and ending with a letter or digit.
func checkBucketName(name string) error {
	bad := len(name) < 3 || len(name) > 63
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		bad = !alnum && c != '.' && c != '-' || (i == 0 || i == len(name)-1) && !alnum
	}
	if bad {
		return fmt.Errorf("%w: Config.Bucket %q is not a bucket name (3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit)", ErrConfig, name)
	}
	return nil
}

// Bucket returns the bucket Put writes to.
func (s *Store) Bucket() string { return s.bucket }

// MaxSize returns the largest payload the Store writes or reads.
func (s *Store) MaxSize() int64 { return s.maxSize }

// Key returns the key of a job's payload: the key prefix and the job id, or the id's SHA-256
// when the id is long or has characters other than letters, digits, '.', '_' and '-'. The same
// job id always gives the same key, so a retried enqueue overwrites its object instead of
// writing a second one.
func (s *Store) Key(jobID string) string {
	safe := jobID != "" && len(jobID) <= maxIDInKey && jobID != "." && jobID != ".."
	for i := 0; i < len(jobID) && safe; i++ {
		c := jobID[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if safe {
		return s.prefix + jobID
	}
	sum := sha256.Sum256([]byte(jobID))
	return s.prefix + "sha256-" + hex.EncodeToString(sum[:])
}

// Put writes body under key in the Store's bucket (with the configured server-side encryption)
// and returns its pointer. Writing the same key again replaces the object.
func (s *Store) Put(ctx context.Context, key string, body []byte) (Pointer, error) {
	p := Pointer{Bucket: s.bucket, Key: key, Class: PointerClass}
	if key == "" || len(key) > maxKeyLength {
		return p, fmt.Errorf("payload: put: key %q: want 1-%d bytes", key, maxKeyLength)
	}
	if int64(len(body)) > s.maxSize {
		return p, fmt.Errorf("%w: put %s: %d bytes, the limit is %d (payload.Config.MaxSize)", ErrTooLarge, p, len(body), s.maxSize)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/json"),
	}
	if s.sse != "" {
		in.ServerSideEncryption = s.sse
		if s.kmsKey != "" {
			in.SSEKMSKeyId = aws.String(s.kmsKey)
		}
	}
	if _, err := s.s3.PutObject(ctx, in); err != nil {
		return p, wrap("put", p, err)
	}
	return p, nil
}

// Get reads the object a pointer names (in the pointer's bucket). A missing object or bucket
// yields an error wrapping ErrNotFound, a refusal ErrAccessDenied, an object over Config.MaxSize
// ErrTooLarge.
func (s *Store) Get(ctx context.Context, p Pointer) ([]byte, error) {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if err != nil {
		return nil, wrap("get", p, err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > s.maxSize {
		return nil, fmt.Errorf("%w: get %s: %d bytes, the limit is %d (payload.Config.MaxSize)", ErrTooLarge, p, n, s.maxSize)
	}
	var buf bytes.Buffer
	if n := aws.ToInt64(out.ContentLength); n > 0 {
		buf.Grow(int(n))
	}
	if _, err := io.Copy(&buf, io.LimitReader(out.Body, s.maxSize+1)); err != nil {
		return nil, fmt.Errorf("payload: get %s: read the object: %w", p, err)
	}
	if int64(buf.Len()) > s.maxSize {
		return nil, fmt.Errorf("%w: get %s: more than %d bytes (payload.Config.MaxSize)", ErrTooLarge, p, s.maxSize)
	}
	return buf.Bytes(), nil
}

// Delete deletes the object a pointer names. S3 answers success for an object that does not
// exist, so deleting twice is not an error.
func (s *Store) Delete(ctx context.Context, p Pointer) error {
	if _, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)}); err != nil {
		return wrap("delete", p, err)
	}
	return nil
}

// wrap explains an S3 error: a missing bucket or object, or a refusal, each with what to check.
func wrap(op string, p Pointer, err error) error {
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var nsk *s3types.NoSuchKey
	var nsb *s3types.NoSuchBucket
	switch {
	case code == "NoSuchBucket" || errors.As(err, &nsb):
		return fmt.Errorf("%w: %s %s: the bucket %s does not exist: %w", ErrNotFound, op, p, p.Bucket, err)
	case code == "NoSuchKey" || errors.As(err, &nsk) || (status == 404 && op != "put"):
		return fmt.Errorf("%w: %s %s: no such object (deleted after its job succeeded, expired by the bucket's lifecycle rule, or never written): %w", ErrNotFound, op, p, err)
	case code == "AccessDenied" || status == 403:
		return fmt.Errorf("%w: %s %s: S3 refused the request: check the role's s3:%s permission on the bucket (and s3:ListBucket, without which a missing object also answers 403), and the bucket policy (for example, the server-side encryption it demands: payload.Config.ServerSideEncryption): %w",
			ErrAccessDenied, op, p, s3Action(op), err)
	}
	return fmt.Errorf("payload: %s %s: %w", op, p, err)
}

func s3Action(op string) string {
	switch op {
	case "put":
		return "PutObject"
	case "delete":
		return "DeleteObject"
	}
	return "GetObject"
}

// IsPermanent reports whether an error of Get means that retrying cannot help: the object or its
// bucket does not exist, or it is too large. Other errors (throttling, a timeout, a refusal that
// a corrected permission may lift) are worth retrying.
func IsPermanent(err error) bool { return errors.Is(err, ErrNotFound) || errors.Is(err, ErrTooLarge) }
