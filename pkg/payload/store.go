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
	// PutObjectTagging marks an object done (MarkDone); GetObjectTagging reads the mark back
	// (Read, only for an object that has tags).
	PutObjectTagging(ctx context.Context, in *s3.PutObjectTaggingInput, optFns ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error)
	GetObjectTagging(ctx context.Context, in *s3.GetObjectTaggingInput, optFns ...func(*s3.Options)) (*s3.GetObjectTaggingOutput, error)
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
	// ErrBucketNotAllowed: the pointer names a bucket that is neither Config.Bucket nor in
	// Config.AllowedBuckets. The Store never reads, tags or deletes such an object: a message
	// anyone can send must not make the worker read or delete whatever its role can reach.
	ErrBucketNotAllowed = errors.New("payload: bucket not allowed")
)

// The tag [Store.MarkDone] puts on an object whose job is settled for good. A bucket's lifecycle
// rule filtered on it expires such objects soon (the CDK stack's after a day, counted from the
// object's creation); until then a duplicate delivery finds the object and [Store.Read] reports
// it done.
const (
	DoneTagKey   = "sqsworker-done"
	DoneTagValue = "true"
)

// Format is the wire form of the pointer messages a Store writes (Config.Format): the class
// name in the body and the name of the size attribute. Every form is read.
type Format uint8

const (
	// FormatCurrent: class PointerClass, attribute SizeAttribute (ExtendedPayloadSize). What the
	// Python library writes by default and the Java library 2.x with
	// useLegacyReservedAttributeName false. The default.
	FormatCurrent Format = iota
	// FormatLegacyAttribute: class PointerClass, attribute LegacySizeAttribute
	// (SQSLargePayloadSize), as the Java library 2.x writes by default
	// (useLegacyReservedAttributeName true). For consumers that request only the legacy
	// attribute: the Python library with use_legacy_attribute=True, and the Java 1.x releases
	// built on the payload-offloading library.
	FormatLegacyAttribute
	// FormatLegacy: class LegacyPointerClass, attribute LegacySizeAttribute, as the Python
	// library writes with use_legacy_attribute=True and the first Java releases (1.0.x, whose
	// reader knows only the legacy class) wrote.
	FormatLegacy
)

// SizeAttribute returns the size attribute's name in this form.
func (f Format) SizeAttribute() string {
	if f == FormatCurrent {
		return SizeAttribute
	}
	return LegacySizeAttribute
}

// Class returns the pointer class name in this form.
func (f Format) Class() string {
	if f == FormatLegacy {
		return LegacyPointerClass
	}
	return PointerClass
}

func (f Format) String() string {
	switch f {
	case FormatCurrent:
		return "current"
	case FormatLegacyAttribute:
		return "legacy-attribute"
	case FormatLegacy:
		return "legacy"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

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
	// Bucket is where Put writes payloads. Required. Read, Get, MarkDone and Delete accept
	// pointers to this bucket and to AllowedBuckets only.
	Bucket string
	// AllowedBuckets are further buckets whose objects pointers may name (a Java or Python
	// producer that writes to a bucket of its own). Defaults to none: Bucket only. A pointer to
	// any other bucket is refused with ErrBucketNotAllowed, before any S3 call.
	AllowedBuckets []string
	// Format is the form of the pointer messages sent with this Store's objects (the producer's
	// and the worker's re-sent copies): see [Format]. Defaults to FormatCurrent
	// (ExtendedPayloadSize). Set FormatLegacyAttribute or FormatLegacy when the consumers are
	// extended clients that request only SQSLargePayloadSize (see docs/envelope.md).
	Format Format
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
	allowed []string // Bucket and Config.AllowedBuckets
	format  Format
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
	for _, b := range cfg.AllowedBuckets {
		if err := checkBucketName(b); err != nil {
			return nil, fmt.Errorf("%w (in Config.AllowedBuckets)", err)
		}
	}
	if cfg.Format > FormatLegacy {
		return nil, fmt.Errorf("%w: Config.Format %d: want FormatCurrent, FormatLegacyAttribute or FormatLegacy", ErrConfig, cfg.Format)
	}
	switch cfg.ServerSideEncryption {
	case "", s3types.ServerSideEncryptionAes256, s3types.ServerSideEncryptionAwsKms, s3types.ServerSideEncryptionAwsKmsDsse:
	default:
		return nil, fmt.Errorf("%w: Config.ServerSideEncryption %q: want \"\", %q, %q or %q", ErrConfig, cfg.ServerSideEncryption,
			s3types.ServerSideEncryptionAes256, s3types.ServerSideEncryptionAwsKms, s3types.ServerSideEncryptionAwsKmsDsse)
	}
	s := &Store{s3: cfg.S3, bucket: cfg.Bucket, format: cfg.Format, prefix: cfg.KeyPrefix, sse: cfg.ServerSideEncryption, kmsKey: cfg.KMSKeyID, maxSize: cfg.MaxSize}
	s.allowed = append([]string{cfg.Bucket}, cfg.AllowedBuckets...)
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
		return fmt.Errorf("%w: bucket %q is not a bucket name (3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit)", ErrConfig, name)
	}
	return nil
}

// Bucket returns the bucket Put writes to.
func (s *Store) Bucket() string { return s.bucket }

// MaxSize returns the largest payload the Store writes or reads.
func (s *Store) MaxSize() int64 { return s.maxSize }

// SizeAttribute returns the name of the size attribute to send with this Store's pointers
// (Config.Format).
func (s *Store) SizeAttribute() string { return s.format.SizeAttribute() }

// Allowed reports whether pointers may name objects in bucket: Config.Bucket or one of
// Config.AllowedBuckets.
func (s *Store) Allowed(bucket string) bool {
	for _, b := range s.allowed {
		if b == bucket {
			return true
		}
	}
	return false
}

// check refuses a pointer to a bucket the Store is not allowed to use.
func (s *Store) check(op string, p Pointer) error {
	if s.Allowed(p.Bucket) {
		return nil
	}
	return fmt.Errorf("%w: %s %s: the pointer names bucket %q, and this store reads only %s (payload.Config.Bucket and AllowedBuckets): the object was not read, tagged or deleted",
		ErrBucketNotAllowed, op, p, p.Bucket, strings.Join(s.allowed, ", "))
}

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
// and returns its pointer (its class as Config.Format says). Writing the same key again replaces
// the object, and with it any tag (MarkDone's).
func (s *Store) Put(ctx context.Context, key string, body []byte) (Pointer, error) {
	p := Pointer{Bucket: s.bucket, Key: key, Class: s.format.Class()}
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

// Object is what [Store.Read] returns.
type Object struct {
	// Body is the object's content.
	Body []byte
	// Done reports that the object carries the tag DoneTagKey=DoneTagValue (MarkDone): a worker
	// already settled the job it holds for good, so this is a duplicate delivery.
	Done bool
}

// Read reads the object a pointer names (in the pointer's bucket, which must be allowed), and
// whether it is marked done. The mark costs no extra request for an untagged object: S3 reports
// an object's tag count with GetObject (x-amz-tagging-count, to a caller allowed
// s3:GetObjectTagging), and only a tagged object's tags are read (GetObjectTagging). A pointer
// to a bucket that is not allowed yields an error wrapping ErrBucketNotAllowed, a missing object
// or bucket ErrNotFound, a refusal ErrAccessDenied, an object over Config.MaxSize ErrTooLarge.
func (s *Store) Read(ctx context.Context, p Pointer) (Object, error) {
	if err := s.check("get", p); err != nil {
		return Object{}, err
	}
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if err != nil {
		return Object{}, wrap("get", p, err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > s.maxSize {
		return Object{}, fmt.Errorf("%w: get %s: %d bytes, the limit is %d (payload.Config.MaxSize)", ErrTooLarge, p, n, s.maxSize)
	}
	var buf bytes.Buffer
	if n := aws.ToInt64(out.ContentLength); n > 0 {
		buf.Grow(int(n))
	}
	if _, err := io.Copy(&buf, io.LimitReader(out.Body, s.maxSize+1)); err != nil {
		return Object{}, fmt.Errorf("payload: get %s: read the object: %w", p, err)
	}
	if int64(buf.Len()) > s.maxSize {
		return Object{}, fmt.Errorf("%w: get %s: more than %d bytes (payload.Config.MaxSize)", ErrTooLarge, p, s.maxSize)
	}
	obj := Object{Body: buf.Bytes()}
	if aws.ToInt32(out.TagCount) > 0 {
		obj.Done = s.done(ctx, p)
	}
	return obj, nil
}

// done reports whether a tagged object carries the done tag. An error reading the tags counts as
// not done: the job then runs as any duplicate delivery would (the idempotency store, when there
// is one, acknowledges it).
func (s *Store) done(ctx context.Context, p Pointer) bool {
	out, err := s.s3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if err != nil {
		return false
	}
	for _, t := range out.TagSet {
		if aws.ToString(t.Key) == DoneTagKey && aws.ToString(t.Value) == DoneTagValue {
			return true
		}
	}
	return false
}

// Get reads the object a pointer names: Read without the done mark.
func (s *Store) Get(ctx context.Context, p Pointer) ([]byte, error) {
	obj, err := s.Read(ctx, p)
	return obj.Body, err
}

// MarkDone tags the object a pointer names DoneTagKey=DoneTagValue (PutObjectTagging, which
// replaces the object's tag set), instead of deleting it: a bucket's lifecycle rule filtered on
// the tag expires it, and until then a duplicate delivery of its message finds it (Read reports
// it done) instead of a missing object. A missing object yields an error wrapping ErrNotFound.
func (s *Store) MarkDone(ctx context.Context, p Pointer) error {
	if err := s.check("tag", p); err != nil {
		return err
	}
	_, err := s.s3.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{
		Bucket: aws.String(p.Bucket), Key: aws.String(p.Key),
		Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{Key: aws.String(DoneTagKey), Value: aws.String(DoneTagValue)}}},
	})
	if err != nil {
		return wrap("tag", p, err)
	}
	return nil
}

// Delete deletes the object a pointer names (in an allowed bucket). S3 answers success for an
// object that does not exist, so deleting twice is not an error.
func (s *Store) Delete(ctx context.Context, p Pointer) error {
	if err := s.check("delete", p); err != nil {
		return err
	}
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
	case "tag":
		return "PutObjectTagging"
	}
	return "GetObject"
}

// IsPermanent reports whether an error of Get means that retrying cannot help: the object or its
// bucket does not exist, it is too large, or its bucket is not allowed. Other errors (throttling, a timeout, a refusal that
// a corrected permission may lift) are worth retrying.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBucketNotAllowed)
}
