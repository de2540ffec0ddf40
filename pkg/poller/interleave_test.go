package poller_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// interleaver is an HTTP client for the SDK that makes every request meet the interleaving behind
// issue 11's stalled poller, instead of once in a while:
//
//  1. net/http's writeLoop has sent the whole request body, and is held before it drains the body
//     once more (the connection's Write of the last body byte does not return yet);
//  2. the server answers; the client gets the response headers, Do returns and the request body
//     is closed (as smithy-go's client handler does right after Do);
//  3. only then does the writeLoop go on to its drain, while reads of the rest of the response
//     wait until the writeLoop has finished the request (or closed the connection).
//
// With smithy-go's request body, the drain of step 3 reports io.EOF and net/http closes the
// connection, so a response larger than the transport's 4 KB read buffer cannot be read.
type interleaver struct {
	next *awshttp.BuildableClient

	mu    sync.Mutex
	stuck int // holds that timed out: the interleaving was not met
}

// holdTimeout bounds each hold, so that a request that does not go as planned cannot hang a test.
const holdTimeout = 10 * time.Second

func newInterleaver() *interleaver {
	il := &interleaver{}
	il.next = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newHeldConn(c, il), nil
		}
	})
	return il
}

// Do sends req; once the response has arrived it closes the request body and lets the
// connection's writeLoop go on.
func (il *interleaver) Do(req *http.Request) (*http.Response, error) {
	var conn *heldConn
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) { conn, _ = ci.Conn.(*heldConn) },
		WroteRequest: func(wi httptrace.WroteRequestInfo) {
			if conn != nil {
				conn.wrote(wi.Err)
			}
		},
	}))
	resp, err := il.next.Do(req)
	if req.Body != nil {
		req.Body.Close()
	}
	if conn != nil {
		conn.release()
	}
	return resp, err
}

func (il *interleaver) timedOut() {
	il.mu.Lock()
	il.stuck++
	il.mu.Unlock()
}

// stuckHolds returns how many holds timed out.
func (il *interleaver) stuckHolds() int {
	il.mu.Lock()
	defer il.mu.Unlock()
	return il.stuck
}

// heldConn is a client connection that holds the writer after the last byte of each request body
// until the response is out (release), and holds reads made after that until the request is
// written (wrote) or the connection is closed.
type heldConn struct {
	net.Conn
	il *interleaver

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every state change
	head     bytes.Buffer  // the request's header bytes written so far
	bodyLeft int           // body bytes still to write; -1 while the header is incomplete
	tracking bool          // a request is being written
	released bool          // its response is out and its body closed
	finished bool          // its writing is over (drain included), or the connection is closed
	closed   bool
}

func newHeldConn(c net.Conn, il *interleaver) *heldConn {
	return &heldConn{Conn: c, il: il, changed: make(chan struct{}), bodyLeft: -1}
}

// signal wakes the waiters; c.mu is held.
func (c *heldConn) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait waits, with c.mu held, until cond holds or holdTimeout passes.
func (c *heldConn) wait(cond func() bool) {
	deadline := time.After(holdTimeout)
	for !cond() {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
			c.mu.Lock()
		case <-deadline:
			c.mu.Lock()
			if !cond() {
				c.il.timedOut()
				return
			}
		}
	}
}

func (c *heldConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tracking {
		// A new request on this connection.
		c.tracking, c.released, c.finished, c.bodyLeft = true, false, false, -1
		c.head.Reset()
	}
	rest := p[:n]
	if c.bodyLeft < 0 {
		c.head.Write(rest)
		i := bytes.Index(c.head.Bytes(), []byte("\r\n\r\n"))
		if i < 0 {
			return n, err
		}
		rest = c.head.Bytes()[i+4:]
		c.bodyLeft = contentLength(c.head.Bytes()[:i])
		if c.bodyLeft <= 0 {
			// No body, or one of unknown length: nothing to hold.
			c.tracking = false
			return n, err
		}
	}
	c.bodyLeft -= len(rest)
	if c.bodyLeft > 0 || err != nil {
		return n, err
	}
	// The last body byte is on the wire: hold the writeLoop until the response is out.
	c.wait(func() bool { return c.released || c.closed })
	return n, err
}

// contentLength returns the Content-Length of a request head, or -1.
func contentLength(head []byte) int {
	for _, line := range strings.Split(string(head), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			if n, err := strconv.Atoi(strings.TrimSpace(value)); err == nil {
				return n
			}
		}
	}
	return -1
}

func (c *heldConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.tracking && c.released {
		// The rest of a response: wait until the writeLoop is done with the request.
		c.wait(func() bool { return c.finished || c.closed })
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// release: the response is out and the request body closed.
func (c *heldConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	c.signal()
}

// wrote: net/http has finished writing the request, err is how. After a failed write net/http
// closes the connection: reads wait for that instead.
func (c *heldConn) wrote(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.finished, c.tracking = true, false
		c.signal()
	}
}

func (c *heldConn) Close() error {
	c.mu.Lock()
	c.closed, c.finished, c.tracking = true, true, false
	c.signal()
	c.mu.Unlock()
	return c.Conn.Close()
}
