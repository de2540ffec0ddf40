// Package sdkhttp works around a race between smithy-go (the AWS SDK's HTTP layer) and net/http
// that closes the connection under a response being read, so that the SDK retries a call whose
// first answer it could not read: a receive whose messages are then lost from view for a whole
// visibility timeout, a send that enqueues a second copy, a conditional write refused by its own
// first attempt.
//
// smithy-go sends the request body wrapped in a reader whose WriteTo returns io.EOF once it is
// closed, and its client handler closes that body as soon as the HTTP client returns the
// response. net/http's writeLoop, after copying Content-Length bytes, drains the body once more
// through that WriteTo; when the server has already answered (a local emulator answers within
// microseconds), the drain finds the body closed, reports the io.EOF as a failed write and closes
// the connection, while the SDK is still reading the response from it. A response larger than
// the transport's 4 KB read buffer (ten job envelopes with their attributes) then fails with
// "use of closed network connection"; the SDK retries it and the messages SQS had already
// returned in it stay invisible for a whole visibility timeout.
//
// Hiding WriteTo makes net/http drain the body with Read, which reports a closed body as a clean
// io.EOF, so the connection stays open and the response is read whole.
//
// Wrap a client's HTTPClient with [KeepConnection] (as a per-call option, so that it holds
// whatever client the caller built): pkg/poller, pkg/producer, pkg/worker, pkg/dlq, the
// idempotency store, pkg/outbox/dynamooutbox and pkg/ddbstream do, for every call they make.
package sdkhttp

import (
	"io"
	"net/http"
)

// HTTPClient is the SDK's HTTP client interface (sqs.HTTPClient, dynamodb.HTTPClient, …).
type HTTPClient interface {
	Do(*http.Request) (*http.Response, error)
}

// KeepConnection returns c wrapped so that every request body offers only Read and Close; nil
// stays nil, and a client already wrapped is returned as it is.
func KeepConnection(c HTTPClient) HTTPClient {
	if c == nil {
		return nil
	}
	if _, ok := c.(readOnlyBodyClient); ok {
		return c
	}
	return readOnlyBodyClient{c}
}

// readOnlyBodyClient sends each request with a body that offers only Read and Close.
type readOnlyBodyClient struct{ next HTTPClient }

func (c readOnlyBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readOnlyBody{req.Body}
	}
	return c.next.Do(req)
}

// readOnlyBody hides every method of the body but Read and Close (WriteTo in particular).
type readOnlyBody struct{ io.ReadCloser }
