package jobqueue

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// EnvPayloadBucket names the payload bucket in the worker's environment (functions/internal/config):
// the worker then reads jobs larger than SQS allows from it (pkg/payload).
const EnvPayloadBucket = "SQSWORKER_PAYLOAD_BUCKET"

// EnvPayloadCleanup tells the worker what to do with a settled job's object
// (functions/internal/config; worker.Config.PayloadCleanup). The stack sets PayloadCleanupMark.
const EnvPayloadCleanup = "SQSWORKER_PAYLOAD_CLEANUP"

// PayloadCleanupMark is the worker's cleanup in this stack: once a job is settled for good its
// object is tagged PayloadDoneTag=true instead of deleted, and the rule "expire-done-payloads"
// expires it. A duplicate delivery of its message (SQS's own, an outbox relay's re-send, a
// producer's retry with the same id) then finds the object and is acknowledged, instead of being
// dead-lettered as payload_missing.
const PayloadCleanupMark = "mark"

// PayloadDoneTag is the tag the worker puts on a settled job's object (payload.DoneTagKey, value
// "true").
const PayloadDoneTag = "sqsworker-done"

// PayloadKeyPrefix is where sqsworker's producers and worker write objects (payload.DefaultKeyPrefix):
// their s3:PutObject is granted on it alone.
const PayloadKeyPrefix = "sqsworker/"

// maxQueueRetention is SQS's longest message retention (14 days): the job queue's retention is at
// most that, whatever it is set to.
const maxQueueRetention = 14 * 24 * time.Hour

// PayloadExpiry is how long an object stays in the payload bucket before the rule
// "expire-payloads" expires it, counted from the object's creation: longer than its message can
// live. The message waits in the job queue at most its retention (at most 14 days, SQS's maximum)
// before the worker dead-letters it (a re-sent copy, a redrive and an outbox re-send write a new
// object, whose clock starts again), and the worker's DLQ copy is a new message that the DLQ keeps
// DLQRetention; a day of margin on top. It is a safety net: the worker deletes or marks an object
// once its job is settled.
const PayloadExpiry = maxQueueRetention + DLQRetention + 24*time.Hour

// PayloadDoneExpiry is how long after its creation the rule "expire-done-payloads" expires an
// object the worker marked done (S3 counts from the creation, not from the tagging, rounded up to
// the next midnight UTC): a duplicate delivery within that time still finds it. A job that
// succeeds later than that after its object was written is expired at the next daily lifecycle
// run after the mark.
const PayloadDoneExpiry = 24 * time.Hour

// The S3 actions of the payload bucket's grants.
var (
	// PayloadProducerActions (on PayloadKeyPrefix): a producer writes the envelope of a large
	// job (GrantEnqueue).
	PayloadProducerActions = []string{"s3:PutObject"}
	// PayloadWorkerWriteActions (on PayloadKeyPrefix): the worker writes the envelope of a re-sent
	// copy (a retry beyond SQS's visibility limit, a job waiting for its run_at).
	PayloadWorkerWriteActions = []string{"s3:PutObject"}
	// PayloadWorkerActions (on every object of the bucket, so that a Java or Python producer
	// writing to it with its own keys, a UUID at the root by default, is read as well): the
	// worker reads a job's envelope and the done mark (GetObjectTagging; S3 also reports an
	// object's tag count with GetObject only to a caller allowed it), and marks the object done
	// (PutObjectTagging) once the job is settled. No s3:DeleteObject: with PayloadCleanupMark,
	// the cleanup this stack sets, the worker never deletes (pkg/worker calls DeleteObject only
	// in cleanup mode "delete"); the rule "expire-done-payloads" removes marked objects. A worker
	// main that sets SQSWORKER_PAYLOAD_CLEANUP=delete itself must be granted s3:DeleteObject.
	PayloadWorkerActions = []string{"s3:GetObject", "s3:GetObjectTagging", "s3:PutObjectTagging"}
	// PayloadWorkerBucketActions (on the bucket): without s3:ListBucket, S3 answers 403 instead
	// of 404 for a missing object, and the worker could not tell "payload_missing" from a
	// refused read.
	PayloadWorkerBucketActions = []string{"s3:ListBucket"}
)

// payload builds the payload bucket (Props.PayloadBucket): private (public access blocked,
// owner-enforced), TLS-only, encrypted with the customer key when there is one (else S3-managed
// keys), lifecycle rules that expire objects after PayloadExpiry (and abort incomplete uploads
// after a day) and the objects marked done after PayloadDoneExpiry, and deleted with the stack
// (it must be empty by then: objects expire). The worker gets PayloadWorkerActions,
// PayloadWorkerWriteActions on PayloadKeyPrefix and PayloadWorkerBucketActions, and its
// environment names the bucket and the cleanup; GrantEnqueue adds PayloadProducerActions on
// PayloadKeyPrefix.
func (jq *JobQueue) payload() {
	p := jq.Props
	if !p.PayloadBucket {
		return
	}
	props := &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-payloads"),
			Enabled:                             jsii.Bool(true),
			Expiration:                          awscdk.Duration_Days(jsii.Number(PayloadExpiry.Hours() / 24)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}, {
			Id:         jsii.String("expire-done-payloads"),
			Enabled:    jsii.Bool(true),
			TagFilters: &map[string]any{PayloadDoneTag: "true"},
			Expiration: awscdk.Duration_Days(jsii.Number(PayloadDoneExpiry.Hours() / 24)),
		}},
	}
	if p.EncryptionKey != nil {
		// The principals that send to (and consume) the queues already have the key's
		// GenerateDataKey and Decrypt; the bucket key keeps KMS calls to one per object batch.
		props.Encryption, props.EncryptionKey, props.BucketKeyEnabled = awss3.BucketEncryption_KMS, p.EncryptionKey, jsii.Bool(true)
	}
	jq.PayloadBucket = awss3.NewBucket(jq.Construct, jsii.String("PayloadBucket"), props)
	suppress(jq.PayloadBucket, nagRule{
		ID: "AwsSolutions-S1",
		Reason: "The payload bucket holds transient job envelopes, marked done and expired once their job is settled; server access " +
			"logs would need a second bucket. Object-level access can be audited with CloudTrail data events.",
	})

	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: jq.Worker, Actions: jsii.Strings(PayloadWorkerActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.ArnForObjects(jsii.String("*"))),
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: jq.Worker, Actions: jsii.Strings(PayloadWorkerWriteActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.ArnForObjects(jsii.String(PayloadKeyPrefix + "*"))),
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: jq.Worker, Actions: jsii.Strings(PayloadWorkerBucketActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.BucketArn()),
	})
	suppressPayloadObjects(jq.WorkerRole)
	jq.Worker.AddEnvironment(jsii.String(EnvPayloadBucket), jq.PayloadBucket.BucketName(), nil)
	jq.Worker.AddEnvironment(jsii.String(EnvPayloadCleanup), jsii.String(PayloadCleanupMark), nil)

	o := awscdk.NewCfnOutput(jq.Construct, jsii.String("PayloadBucketName"), &awscdk.CfnOutputProps{
		Value:       jq.PayloadBucket.BucketName(),
		Description: jsii.String("The bucket of jobs larger than SQS allows (SQSWORKER_PAYLOAD_BUCKET; sqsworker --payload-bucket)"),
	})
	o.OverrideLogicalId(jsii.String(*jq.Construct.Node().Id() + "PayloadBucketName"))
}

// grantEnqueuePayload gives a producer PayloadProducerActions on the payload bucket's objects
// under PayloadKeyPrefix, when there is one (GrantEnqueue calls it).
func (jq *JobQueue) grantEnqueuePayload(grantee awsiam.IGrantable) {
	if jq.PayloadBucket == nil {
		return
	}
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(PayloadProducerActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.ArnForObjects(jsii.String(PayloadKeyPrefix + "*"))),
	})
	switch g := grantee.(type) {
	case awsiam.Role:
		suppressPayloadObjects(g)
	case interface{ Role() awsiam.IRole }: // a function
		if r, ok := g.Role().(awsiam.Role); ok {
			suppressPayloadObjects(r)
		}
	}
}

// suppressPayloadObjects records why a role's policy may name the payload bucket's objects with a
// wildcard: their keys are per job.
func suppressPayloadObjects(role awsiam.Role) {
	pol := role.Node().TryFindChild(jsii.String("DefaultPolicy"))
	if pol == nil {
		return
	}
	suppress(pol, nagRule{
		ID:        "AwsSolutions-IAM5",
		Reason:    "Payload objects are named per job (sqsworker/<job id>): writes are granted on that prefix, reads and tags on this stack's payload bucket's objects only (also those of Java or Python producers, which use their own keys).",
		AppliesTo: []any{map[string]any{"regex": "/^Resource::<.*PayloadBucket[0-9A-F]*\\.Arn>\\/(sqsworker\\/)?\\*$/"}},
	})
}
