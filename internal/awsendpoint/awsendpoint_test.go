package awsendpoint_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
)

func TestIsAWS(t *testing.T) {
	t.Parallel()
	for endpoint, want := range map[string]bool{
		"https://dynamodb.us-east-1.amazonaws.com":     true,
		"https://sqs.cn-north-1.amazonaws.com.cn":      true,
		"https://sqs.us-east-1.api.aws":                true,
		"HTTPS://SQS.US-EAST-1.AMAZONAWS.COM":          true,
		"http://localhost:4566":                        false,
		"http://127.0.0.1:38211":                       false,
		"http://amazonaws.com.evil.example":            false,
		"http://localstack:4566/path?x=.amazonaws.com": false,
		"not a url\x7f":                                false,
		"":                                             false,
	} {
		if got := awsendpoint.IsAWS(endpoint); got != want {
			t.Errorf("IsAWS(%q) = %v, want %v", endpoint, got, want)
		}
	}
}

func TestDynamoDBOption(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		endpoint string
		disabled bool
	}{
		{"", false}, // AWS, resolved by region
		{"https://dynamodb.eu-west-1.amazonaws.com", false},
		{"http://localhost:4566", true},
	} {
		cfg := aws.Config{Region: "us-east-1"}
		if tt.endpoint != "" {
			cfg.BaseEndpoint = aws.String(tt.endpoint)
		}
		var o dynamodb.Options
		awsendpoint.DynamoDB(cfg)(&o)
		if o.DisableValidateResponseChecksum != tt.disabled {
			t.Errorf("endpoint %q: DisableValidateResponseChecksum = %v, want %v", tt.endpoint, o.DisableValidateResponseChecksum, tt.disabled)
		}
		if got := awsendpoint.Local(cfg); got != tt.disabled {
			t.Errorf("Local(%q) = %v, want %v", tt.endpoint, got, tt.disabled)
		}
	}
}
