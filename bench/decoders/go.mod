module github.com/sqsworker/sqsworker/bench/decoders

go 1.26.8

replace github.com/sqsworker/sqsworker => ../..

require (
	github.com/aws/aws-lambda-go v1.55.1
	github.com/goccy/go-json v0.12.0
	github.com/sqsworker/sqsworker v0.0.0-00010101000000-000000000000
	github.com/valyala/fastjson v1.6.10
)

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0 // indirect
	github.com/aws/aws-sdk-go-v2/service/sqs v1.53.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
)
