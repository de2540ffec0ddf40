// Package payload sends job payloads larger than SQS allows through Amazon S3, in the format of
// the Amazon SQS Extended Client Library (Java, and its Python port): the envelope is an S3
// object, and the SQS message body is a pointer to it,
//
//	["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"my-bucket","s3Key":"sqsworker/01JD…"}]
//
// with the message attribute ExtendedPayloadSize (type Number) holding the payload's size in
// bytes. The legacy forms (class com.amazon.sqs.javamessaging.MessageS3Pointer, attribute
// SQSLargePayloadSize, which the Java library still writes by default) are read as well.
//
// Config.Format writes the legacy forms instead, for consumers that request only the legacy
// attribute.
//
// The producer writes the object and sends the pointer (producer.Config.Payload); the worker
// reads the object before it decodes the envelope and deletes it, or marks it done
// ([Store.MarkDone], a tag a bucket's lifecycle rule expires), once the job has succeeded
// (worker.Config.Payload, worker.Config.PayloadCleanup). A [Store] does both over one narrow S3
// client interface ([S3API]), and only in its own bucket and Config.AllowedBuckets: a pointer
// names whatever bucket its sender chose. docs/envelope.md describes the wire format and how it
// interoperates with the extended client.
package payload
