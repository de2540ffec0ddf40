#!/bin/sh
# Runs inside the LocalStack container once SQS, DynamoDB and Scheduler are ready.
#
# It provisions nothing on purpose: `sqsworker up` is the one place that knows a stack's
# resources (the queues with their redrive policy, the job table with its indexes and TTL, the
# schedule group), so provisioning here with the awslocal CLI would be a second copy that
# drifts. Provision from the host instead, with nothing but Go:
#
#   go run ./cmd/sqsworker up --stack demo --endpoint http://localhost:4566
#
# (`make localstack-up` does it for the stack named by LOCALSTACK_STACK, default "demo".)
echo "sqsworker: LocalStack is ready on port 4566. Provision a stack from the host with:"
echo "  go run ./cmd/sqsworker up --stack demo --endpoint http://localhost:4566"
