package console

import (
	"errors"
	"fmt"
	"net/url"

	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// unreachable reports whether err says the backend never answered: the SDK could not send the
// request (connection refused, no such host, a connect timeout: smithy's RequestSendError),
// whatever wraps it (the retryer's "exceeded maximum number of attempts").
func unreachable(err error) bool {
	var se *smithyhttp.RequestSendError
	return err != nil && errors.As(err, &se)
}

// endpointHost names where the console's queues are: the host of the job queue's (or the
// DLQ's) URL, "" when it has none.
func (c *Console) endpointHost() string {
	for _, u := range []string{c.cfg.QueueURL, c.cfg.DLQURL} {
		if p, err := url.Parse(u); err == nil && p.Host != "" {
			return p.Host
		}
	}
	return ""
}

// unreachableMessage is the one sentence a page shows when the backend does not answer: what is
// wrong and what to check, instead of the SDK's error.
func (c *Console) unreachableMessage() string {
	at := ""
	if h := c.endpointHost(); h != "" {
		at = " at " + clean(h)
	}
	if c.cfg.Emulator {
		return fmt.Sprintf("The backend is unreachable: nothing answers%s. Check that the emulator is running "+
			"(`sqsworker up`, or the `sqsworker run` or `demo` that serves it) and that --endpoint names its address; "+
			"the console retries on every page and refresh.", at)
	}
	return fmt.Sprintf("The backend is unreachable: nothing answers%s. Check this machine's network and proxy, "+
		"and the endpoint and region the console was given (--endpoint, AWS_ENDPOINT_URL, AWS_REGION); "+
		"the console retries on every page and refresh.", at)
}

// backendError words a failed call for a page: the unreachable backend's sentence when it never
// answered, else what failed (failed, "Listing the jobs failed") with the error, cleaned.
func (c *Console) backendError(failed string, err error) string {
	if unreachable(err) {
		return c.unreachableMessage()
	}
	return failed + ": " + clean(err.Error())
}
