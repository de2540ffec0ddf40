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

// PayloadExpiry is how long an object stays in the payload bucket before its lifecycle rule
// expires it: the DLQ's retention and a day, so that a dead letter's payload outlives the dead
// letter. It is a safety net: the worker deletes an object once its job has succeeded.
const PayloadExpiry = DLQRetention + 24*time.Hour

// The S3 actions of the payload bucket's grants.
var (
	// PayloadProducerActions: a producer writes the envelope of a large job (GrantEnqueue).
	PayloadProducerActions = []string{"s3:PutObject"}
	// PayloadWorkerActions (on the objects): the worker reads a job's envelope, deletes it after
	// success, and writes the envelope of a re-sent copy (a retry beyond SQS's visibility limit,
	// a job waiting for its run_at).
	PayloadWorkerActions = []string{"s3:GetObject", "s3:DeleteObject", "s3:PutObject"}
	// PayloadWorkerBucketActions (on the bucket): without s3:ListBucket, S3 answers 403 instead
	// of 404 for a missing object, and the worker could not tell "payload_missing" from a
	// refused read.
	PayloadWorkerBucketActions = []string{"s3:ListBucket"}
)

// payload builds the payload bucket (Props.PayloadBucket): private (public access blocked,
// owner-enforced), TLS-only, encrypted with the customer key when there is one (else S3-managed
// keys), a lifecycle rule that expires objects after PayloadExpiry (and aborts incomplete
// uploads after a day), and deleted with the stack (it must be empty by then: objects expire).
// The worker gets PayloadWorkerActions and its environment names the bucket; GrantEnqueue adds
// PayloadProducerActions.
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
		Reason: "The payload bucket holds transient job envelopes, deleted when their job succeeds; server access " +
			"logs would need a second bucket. Object-level access can be audited with CloudTrail data events.",
	})

	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: jq.Worker, Actions: jsii.Strings(PayloadWorkerActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.ArnForObjects(jsii.String("*"))),
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: jq.Worker, Actions: jsii.Strings(PayloadWorkerBucketActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.BucketArn()),
	})
	suppressPayloadObjects(jq.WorkerRole)
	jq.Worker.AddEnvironment(jsii.String(EnvPayloadBucket), jq.PayloadBucket.BucketName(), nil)

	o := awscdk.NewCfnOutput(jq.Construct, jsii.String("PayloadBucketName"), &awscdk.CfnOutputProps{
		Value:       jq.PayloadBucket.BucketName(),
		Description: jsii.String("The bucket of jobs larger than SQS allows (SQSWORKER_PAYLOAD_BUCKET; sqsworker --payload-bucket)"),
	})
	o.OverrideLogicalId(jsii.String(*jq.Construct.Node().Id() + "PayloadBucketName"))
}

// grantEnqueuePayload gives a producer PayloadProducerActions on the payload bucket's objects,
// when there is one (GrantEnqueue calls it).
func (jq *JobQueue) grantEnqueuePayload(grantee awsiam.IGrantable) {
	if jq.PayloadBucket == nil {
		return
	}
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(PayloadProducerActions...),
		ResourceArns: jsii.Strings(*jq.PayloadBucket.ArnForObjects(jsii.String("*"))),
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
		Reason:    "Payload objects are named per job (sqsworker/<job id>): the grant covers this stack's payload bucket's objects only.",
		AppliesTo: []any{map[string]any{"regex": "/^Resource::<.*PayloadBucket[0-9A-F]*\\.Arn>\\/\\*$/"}},
	})
}
