package config

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/sqsworker/sqsworker/pkg/poller"
)

// SizePool sizes the idle pool of cfg's HTTP client (config.LoadDefaultConfig's buildable client,
// keeping what loading set on it) to idlePerHost connections per host: the SDK's default keeps
// 10, and every call beyond 10 at once to one host dials a new connection (on AWS a TLS
// handshake) that is closed again after the call (docs/BENCHMARKS.md, "Connections"). A client
// that is not the SDK's buildable one is left as it is.
func SizePool(cfg *aws.Config, idlePerHost int) {
	if c, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		cfg.HTTPClient = poller.WithIdlePool(c, idlePerHost)
	}
}

// IdleConnsPerHost is the worker function's pool: SQSWORKER_CONCURRENCY jobs, each with a call
// in flight (a claim, a finish, a visibility change, a DLQ send, an S3 read), and room for the
// batch's own calls.
func (c Worker) IdleConnsPerHost() int { return poller.IdleConnsPerHost(1, c.Concurrency) }
