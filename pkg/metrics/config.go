package metrics

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Config configures [New]. Its zero value is usable: every field has a default.
type Config struct {
	// Writer receives the EMF documents, one line each. Defaults to os.Stdout (in Lambda,
	// CloudWatch Logs reads it).
	Writer io.Writer
	// Namespace is the CloudWatch namespace of the metrics. Defaults to "sqsworker".
	Namespace string
	// Service is the value of the Service dimension. Defaults to the AWS_LAMBDA_FUNCTION_NAME
	// environment variable, else "sqsworker".
	Service string
	// Queue is the value of the Queue dimension: the source queue's name. The worker's outcomes
	// do not carry the event source, so set it, for example with [QueueName] of the queue's
	// URL or ARN. Defaults to "unknown".
	Queue string
	// Now returns the documents' timestamp. Defaults to time.Now. Inject a clock in tests.
	Now func() time.Time
}

// Defaults of [Config].
const (
	DefaultNamespace = "sqsworker"
	DefaultService   = "sqsworker"
	DefaultQueue     = "unknown"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("metrics: invalid config")

func (c *Config) setDefaults() error {
	if c.Writer == nil {
		c.Writer = os.Stdout
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Service == "" {
		c.Service = os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	}
	if c.Service == "" {
		c.Service = DefaultService
	}
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := checkNamespace(c.Namespace); err != nil {
		return err
	}
	if !validDimensionValue(c.Service) {
		return fmt.Errorf("%w: Service %q is not a valid dimension value (printable ASCII, not blank, at most %d characters)",
			ErrConfig, c.Service, maxDimensionValue)
	}
	if !validDimensionValue(c.Queue) {
		return fmt.Errorf("%w: Queue %q is not a valid dimension value (printable ASCII, not blank, at most %d characters)",
			ErrConfig, c.Queue, maxDimensionValue)
	}
	return nil
}

// maxDimensionValue is CloudWatch's longest dimension value.
const maxDimensionValue = 1024

// validDimensionValue reports whether s is a CloudWatch dimension value: ASCII without control
// characters, at least one non-space character, at most 1,024 characters. Values that pass need
// no JSON escaping other than '"' and '\\'.
func validDimensionValue(s string) bool {
	if s == "" || len(s) > maxDimensionValue {
		return false
	}
	blank := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return false
		}
		if c != ' ' {
			blank = false
		}
	}
	return !blank
}

// checkNamespace applies CloudWatch's namespace rules: at most 255 characters of
// 0-9A-Za-z . - _ / # : and space, not blank, and not starting with "AWS/" (reserved).
func checkNamespace(ns string) error {
	if len(ns) > 255 || strings.TrimSpace(ns) == "" {
		return fmt.Errorf("%w: Namespace %q must have 1 to 255 characters, not all spaces", ErrConfig, ns)
	}
	if strings.HasPrefix(ns, "AWS/") {
		return fmt.Errorf("%w: Namespace %q: the AWS/ prefix is reserved", ErrConfig, ns)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case strings.IndexByte("._-/#: ", c) >= 0:
		default:
			return fmt.Errorf("%w: Namespace %q has the character %q (allowed: 0-9A-Za-z . - _ / # : and space)", ErrConfig, ns, c)
		}
	}
	return nil
}

// QueueName returns the queue's name from its ARN (arn:aws:sqs:region:account:name), its URL
// (https://sqs.region.amazonaws.com/account/name), or a name, which it returns as it is. Use
// it to set [Config.Queue] from the event source ARN or the queue URL a function is configured
// with.
func QueueName(arnOrURL string) string {
	s := strings.TrimSpace(arnOrURL)
	if strings.HasPrefix(s, "arn:") {
		return s[strings.LastIndexByte(s, ':')+1:]
	}
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		if j := strings.IndexAny(s, "?#"); j >= 0 {
			s = s[:j]
		}
		s = strings.TrimRight(s, "/")
		if j := strings.IndexByte(s, '/'); j < 0 {
			return "" // a host without a path names no queue
		}
		return s[strings.LastIndexByte(s, '/')+1:]
	}
	return s
}
