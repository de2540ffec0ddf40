package jobqueue

import (
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
)

var payloads, payloadsKeyed synth

const (
	bucketArn     = "JobsPayloadBucket.Arn"
	bucketObjects = "JobsPayloadBucket.Arn/*"
	bucketPrefix  = "JobsPayloadBucket.Arn/sqsworker/*"
)

func payloadShape(t *testing.T) (assertions.Template, *JobQueue) {
	return payloads.get(t, Props{Name: "big", PayloadBucket: true, WorkerEnqueues: true})
}

// TestPayloadBucket: private, TLS-only, encrypted, objects expired after the longest a message
// can live (the job queue's retention at SQS's maximum, the DLQ's, a day) and objects marked done
// a day after their creation, deleted with the stack; the worker's environment names it and the
// mark cleanup, and an output names it.
func TestPayloadBucket(t *testing.T) {
	tmpl, jq := payloadShape(t)
	check(t, func() {
		tmpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1))
		tmpl.HasResource(jsii.String("AWS::S3::Bucket"), &map[string]any{
			"DeletionPolicy": "Delete",
			"Properties": map[string]any{
				"PublicAccessBlockConfiguration": map[string]any{
					"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
				},
				"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
					map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}},
				}},
				"OwnershipControls": map[string]any{"Rules": []any{map[string]any{"ObjectOwnership": "BucketOwnerEnforced"}}},
				"LifecycleConfiguration": map[string]any{"Rules": []any{map[string]any{
					"Id": "expire-payloads", "Status": "Enabled", "ExpirationInDays": 29,
					"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1},
				}, map[string]any{
					"Id": "expire-done-payloads", "Status": "Enabled", "ExpirationInDays": 1,
					"TagFilters": []any{map[string]any{"Key": "sqsworker-done", "Value": "true"}},
				}}},
			},
		})
		// TLS only: a Deny on aws:SecureTransport false.
		tmpl.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), &map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{
					"Effect": "Deny", "Action": "s3:*",
					"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				}),
			})},
		})
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), &map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				EnvPayloadBucket:  map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsPayloadBucket"))},
				EnvPayloadCleanup: "mark",
			})},
		})
		tmpl.HasOutput(jsii.String("JobsPayloadBucketName"), &map[string]any{})
	})
	if jq.PayloadBucket == nil {
		t.Fatal("JobQueue.PayloadBucket is nil")
	}
	// Longer than a message lives: 14 days in the job queue at most (SQS's maximum retention,
	// whatever the queue's own), then a fresh DLQ message kept DLQRetention.
	if PayloadExpiry < 14*24*time.Hour+DLQRetention || PayloadExpiry.Hours() != 29*24 {
		t.Fatalf("PayloadExpiry %v", PayloadExpiry)
	}
}

// TestPayloadGrants: GrantEnqueue adds PutObject under sqsworker/ only; the worker gets PutObject
// (re-sent copies) there, GetObject and the tagging of the done mark on every object (no
// DeleteObject: it runs with payload cleanup "mark", which tags and never deletes)
// of the bucket (Java and Python producers use keys of their own), and ListBucket on the bucket
// (so a missing object answers 404, not 403), on top of its usual grants.
func TestPayloadGrants(t *testing.T) {
	tmpl, _ := payloadShape(t)
	checkGrants(t, "Producer", grants(t, tmpl, "Producer"), map[string][]string{
		queueArn:                send,
		schedulesOf("big-jobs"): schedules,
		schedRole:               {"iam:PassRole"},
		bucketPrefix:            {"s3:PutObject"},
	})
	checkGrants(t, "JobsWorkerRole", grants(t, tmpl, "JobsWorkerRole"), map[string][]string{
		logsArn:                 {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                union(consume, send),
		dlqArn:                  send,
		tableArn:                workerTable,
		schedulesOf("big-jobs"): schedules,
		schedRole:               {"iam:PassRole"},
		bucketObjects:           {"s3:GetObject", "s3:GetObjectTagging", "s3:PutObjectTagging"},
		bucketPrefix:            {"s3:PutObject"},
		bucketArn:               {"s3:ListBucket"},
	})
}

// TestPayloadBucketCustomerKey: with a customer key the bucket is encrypted with it (bucket key
// on), and no new key grant is needed: producers and the worker already have the data-key
// actions for the queues.
func TestPayloadBucketCustomerKey(t *testing.T) {
	tmpl, _ := payloadsKeyed.getWith(t, func(stack awscdk.Stack) Props {
		key := awskms.NewKey(stack, jsii.String("JobsKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		return Props{Name: "bigenc", PayloadBucket: true, EncryptionKey: key}
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), &map[string]any{
			"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
				map[string]any{
					"BucketKeyEnabled":              true,
					"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": map[string]any{"Fn::GetAtt": assertions.Match_AnyValue()}},
				},
			}},
		})
	})
	for _, role := range []string{"Producer", "JobsWorkerRole"} {
		if got := grants(t, tmpl, role)["JobsKey.Arn"]; len(got) != 2 {
			t.Errorf("%s on the key: %v, want kms:Decrypt and kms:GenerateDataKey", role, got)
		}
	}
}

// TestNoPayloadBucketByDefault: off by default, no bucket and no S3 grant.
func TestNoPayloadBucketByDefault(t *testing.T) {
	tmpl := std(t)
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(0)) })
	for _, role := range []string{"Producer", "JobsWorkerRole"} {
		for r := range grants(t, tmpl, role) {
			if r == bucketArn || r == bucketObjects || r == bucketPrefix {
				t.Errorf("%s has grants on a payload bucket", role)
			}
		}
	}
}

// TestNagPayloadBucket runs cdk-nag over a stack with the payload bucket (and WorkerEnqueues, so
// that one policy carries two areas' suppressions): S1 on the bucket, and IAM5 on the objects'
// wildcard, each with its reason.
func TestNagPayloadBucket(t *testing.T) {
	nagCheck(t, 3, func(_ awscdk.Stack, p *Props) { p.PayloadBucket = true; p.WorkerEnqueues = true })
}
