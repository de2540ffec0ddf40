package payload_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// One Store serves the producer (it writes the envelopes of jobs too large for SQS) and the
// worker (it reads them, and marks each done once its job succeeded, for the bucket's lifecycle
// rule on the tag sqsworker-done=true to expire: a duplicate delivery then finds its object).
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	st, err := payload.New(payload.Config{
		S3:                   s3.NewFromConfig(cfg),
		Bucket:               "myapp-payloads",
		ServerSideEncryption: "aws:kms", // when the bucket's policy demands it
		// AllowedBuckets: []string{"java-service-payloads"}, // to read another producer's bucket
		// Format: payload.FormatLegacyAttribute, // for consumers that request only SQSLargePayloadSize
	})
	if err != nil {
		log.Fatal(err)
	}
	prod, err := producer.New(producer.Config{
		SQS: sqs.NewFromConfig(cfg), QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/myapp-jobs",
		Payload: st, // jobs above 1 MiB − 8 KiB go through S3
	})
	if err != nil {
		log.Fatal(err)
	}
	h, err := worker.New(worker.Config{Registry: jobs.NewRegistry(), SQS: sqs.NewFromConfig(cfg),
		Payload: st, PayloadCleanup: worker.PayloadMarkDone})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = prod, h
}

// The pointer body of the Amazon SQS Extended Client Library, as the producer sends it.
func ExamplePointer_Body() {
	p := payload.Pointer{Bucket: "myapp-payloads", Key: "sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5"}
	fmt.Println(p.Body())
	back, err := payload.ParsePointer(p.Body())
	fmt.Println(back, err)
	// Output:
	// ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"myapp-payloads","s3Key":"sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5"}]
	// s3://myapp-payloads/sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5 <nil>
}
