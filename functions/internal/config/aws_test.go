package config

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// The functions size the idle pool of config.LoadDefaultConfig's client to what they run at
// once (the SDK keeps 10 per host): the worker to SQSWORKER_CONCURRENCY and its batch's calls.
func TestSizePool(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	cfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	before := cfg.HTTPClient.(*awshttp.BuildableClient).GetTransport()
	if before.MaxIdleConnsPerHost != 10 {
		t.Fatalf("the SDK's default pool is %d per host, this test expects 10", before.MaxIdleConnsPerHost)
	}
	w, err := LoadWorker(func(k string) string { return map[string]string{EnvConcurrency: "50"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	SizePool(&cfg, w.IdleConnsPerHost())
	tr := cfg.HTTPClient.(*awshttp.BuildableClient).GetTransport()
	if tr.MaxIdleConnsPerHost != 52 || tr.MaxIdleConns != 104 {
		t.Errorf("worker at concurrency 50: pool of %d per host, %d in all; want 52 and 104", tr.MaxIdleConnsPerHost, tr.MaxIdleConns)
	}
	if tr.TLSHandshakeTimeout != before.TLSHandshakeTimeout || tr.Proxy == nil {
		t.Errorf("SizePool lost the loaded client's other settings")
	}
	def, err := LoadWorker(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if n := def.IdleConnsPerHost(); n != 12 {
		t.Errorf("the default worker's pool: %d, want 12 (10 jobs + 2)", n)
	}
	// A client of the caller's own is left alone.
	own := aws.Config{HTTPClient: http.DefaultClient}
	SizePool(&own, 50)
	if own.HTTPClient != http.DefaultClient {
		t.Errorf("SizePool replaced a client that is not the SDK's buildable one")
	}
}
