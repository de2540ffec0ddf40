package awslocal

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// BucketName returns a stack's payload bucket name: "<stack>-payloads", lower-cased with '_'
// replaced by '-' (bucket names allow neither upper case nor '_').
func BucketName(stack string) string {
	return strings.ReplaceAll(strings.ToLower(stack), "_", "-") + "-payloads"
}

// BucketProvisioner is the part of the S3 client ProvisionBucket uses.
type BucketProvisioner interface {
	CreateBucket(context.Context, *s3.CreateBucketInput, ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
}

// ProvisionBucket creates (or finds) the stack's payload bucket, where jobs larger than SQS
// allows are kept (pkg/payload). It returns the bucket's name.
func ProvisionBucket(ctx context.Context, client BucketProvisioner, stack string) (string, error) {
	if err := validStackName(stack); err != nil {
		return "", err
	}
	name := BucketName(stack)
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return "", fmt.Errorf("awslocal: create bucket %s: %w", name, err)
	}
	return name, nil
}

// S3 returns an S3 client for the backend. Emulators serve buckets by path
// (http://host/bucket/key), not as subdomains, so path-style addressing is used for every endpoint
// that is not AWS's own; and they get checksums only when an operation requires one.
func (b *Backend) S3() *s3.Client {
	return s3.NewFromConfig(b.Config, func(o *s3.Options) {
		if b.URL != "" && !IsAWSEndpoint(b.URL) {
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
}
