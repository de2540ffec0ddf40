package poller

import (
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// The SDK's HTTP client (config.LoadDefaultConfig's, awshttp.NewBuildableClient) keeps at most
// 10 idle connections per host (net/http's own default is 2). A connection that finishes a call
// while 10 others wait idle is closed, and the next call beyond 10 at once dials a new one: on
// AWS a TCP and TLS handshake. A poller with Concurrency slots, each running a batch whose jobs
// make their own calls (a worker.Handler runs up to worker.Config.Concurrency jobs at once, 10 by
// default, each claiming and finishing its DynamoDB record), keeps far more than 10 calls in
// flight: at Concurrency 4 with the worker's default, 3,216 new connections per 5,000 jobs on the
// embedded emulator, where SQS and DynamoDB share a host (docs/BENCHMARKS.md, "Connections").
// Size the pool to what runs at once:
//
//	n := poller.IdleConnsPerHost(pollerConcurrency, workerConcurrency)
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(poller.HTTPClient(n)))

// IdleConnsPerHost returns the idle connections per host an SDK client shared by a poller with
// concurrency slots (Config.Concurrency) and its handler needs so that no call dials a new
// connection once the pool is warm: each slot has at most one poller call in flight (a receive, a
// heartbeat, a delete), and jobsPerBatch calls of its handler's jobs (worker.Config.Concurrency
// for a worker.Handler; 1 for a handler that makes its calls one at a time). Counted per host as
// if every service shared one (as on an emulator); on AWS each service's host needs at most that
// many. Values below 1 count as 1.
func IdleConnsPerHost(concurrency, jobsPerBatch int) int {
	return max(concurrency, 1) * (max(jobsPerBatch, 1) + 2)
}

// HTTPClient returns the SDK's HTTP client (awshttp.NewBuildableClient, with all its other
// defaults: timeouts, proxy, TLS) keeping up to idlePerHost idle connections per host, and twice
// that in all (values below the SDK's 10 give 10). Pass it to config.LoadDefaultConfig with
// config.WithHTTPClient, before loading (AWS_CA_BUNDLE needs the buildable client itself).
func HTTPClient(idlePerHost int) *awshttp.BuildableClient {
	return WithIdlePool(awshttp.NewBuildableClient(), idlePerHost)
}

// WithIdlePool returns a copy of c (a config's HTTPClient after config.LoadDefaultConfig, with
// what loading set, such as AWS_CA_BUNDLE's roots) keeping up to idlePerHost idle connections per
// host, and twice that in all (values below the SDK's 10 give 10).
func WithIdlePool(c *awshttp.BuildableClient, idlePerHost int) *awshttp.BuildableClient {
	n := max(idlePerHost, awshttp.DefaultHTTPTransportMaxIdleConnsPerHost)
	return c.WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = n
		tr.MaxIdleConns = max(2*n, awshttp.DefaultHTTPTransportMaxIdleConns)
	})
}
