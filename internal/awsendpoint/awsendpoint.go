// Package awsendpoint tells AWS's own endpoints from emulators and other endpoints (LocalStack,
// the embedded emulator, a proxy), so that clients built for an emulator leave out what only AWS
// provides: instance metadata credentials, and the CRC32 checksum of DynamoDB's responses.
//
// The functions, the CLI, pkg/awslocal and the container example share it, so that they agree on
// what an emulator is.
package awsendpoint

import (
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// awsDomains are the DNS suffixes of AWS's service endpoints: the commercial and China
// partitions, dual-stack endpoints, and the ISO partitions.
var awsDomains = []string{".amazonaws.com", ".amazonaws.com.cn", ".api.aws", ".c2s.ic.gov", ".sc2s.sgov.gov"}

// IsAWS reports whether endpoint is a URL of one of AWS's own hosts (https://sqs.us-east-1.amazonaws.com),
// as opposed to an emulator's (http://localhost:4566). A string that is not a URL is not AWS.
func IsAWS(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	for _, d := range awsDomains {
		if strings.HasSuffix(h, d) {
			return true
		}
	}
	return false
}

// Local reports whether cfg sends its calls to an endpoint that is not AWS's own: its
// BaseEndpoint (AWS_ENDPOINT_URL, for a config from config.LoadDefaultConfig) is set to another
// host.
func Local(cfg aws.Config) bool {
	ep := aws.ToString(cfg.BaseEndpoint)
	return ep != "" && !IsAWS(ep)
}

// DynamoDB is the option of dynamodb.NewFromConfig for cfg: on a local endpoint it turns off the
// validation of the X-Amz-Crc32 response header, which emulators do not send (the SDK then logs
// "failed to close HTTP response body … response did not match expected checksum" after every
// call); on AWS it changes nothing.
func DynamoDB(cfg aws.Config) func(*dynamodb.Options) {
	local := Local(cfg)
	return func(o *dynamodb.Options) {
		if local {
			o.DisableValidateResponseChecksum = true
		}
	}
}
