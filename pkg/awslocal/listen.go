package awslocal

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
)

// ErrPortInUse is returned by Start when Options.Port is taken by another program (often another
// emulator, or another `sqsworker run` or `sqsworker up`).
var ErrPortInUse = errors.New("awslocal: the port is in use")

// forwarder makes the embedded emulator, which listens on a port of its own choosing, reachable on
// a loopback port chosen by the caller: it accepts connections on 127.0.0.1:port (and [::1]:port,
// where the system has IPv6) and copies each, both ways, to and from the emulator's listener.
type forwarder struct {
	target string // host:port of the emulator
	lns    []net.Listener
	port   int

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// listenLoopback listens on the loopback port for the emulator at target (host:port); port 0
// picks a free one.
func listenLoopback(port int, target string) (*forwarder, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("awslocal: port %d out of range 0-65535", port)
	}
	ln4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, listenError(port, err)
	}
	f := &forwarder{target: target, lns: []net.Listener{ln4}, port: ln4.Addr().(*net.TCPAddr).Port, conns: map[net.Conn]struct{}{}}
	// "localhost" may resolve to ::1 first: listen there too, on the same port. A system without
	// IPv6 refuses the address, which is fine; a port taken there by another program is not,
	// since clients of localhost would reach that program.
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(f.port))); err == nil {
		f.lns = append(f.lns, ln6)
	} else if errors.Is(err, syscall.EADDRINUSE) {
		ln4.Close()
		return nil, listenError(f.port, err)
	}
	for _, ln := range f.lns {
		f.wg.Go(func() { f.accept(ln) })
	}
	return f, nil
}

func listenError(port int, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: localhost:%d is taken by another program: %v", ErrPortInUse, port, err)
	}
	return fmt.Errorf("awslocal: listen on localhost:%d: %w", port, err)
}

func (f *forwarder) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Go(func() { f.pipe(c) })
	}
}

// pipe copies c to a new connection to the emulator and back, until either side closes.
func (f *forwarder) pipe(c net.Conn) {
	u, err := net.Dial("tcp", f.target)
	if err != nil {
		c.Close()
		return
	}
	if !f.track(c, u) {
		c.Close()
		u.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done // HTTP needs no half-close: the first side to end ends the pair
	c.Close()
	u.Close()
	<-done
	f.untrack(c, u)
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// close stops accepting, closes every forwarded connection and waits for their goroutines.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for _, ln := range f.lns {
		ln.Close()
	}
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// QueueURL returns queueURL as it is reachable at the backend's URL: see QueueURLAt.
func (b *Backend) QueueURL(queueURL string) string { return QueueURLAt(b.URL, queueURL) }

// QueueURLAt returns queueURL with the scheme and host of endpoint, when endpoint is not AWS's
// own. Emulators answer with queue URLs whose host does not depend on where they listen (the
// embedded emulator's always say http://localhost:4566/…, whatever its port): the Go SDK does not
// mind, but a URL that is printed, or handed to another program, must reach the emulator. The
// path names the queue, which is what emulators look up. On AWS, or when either is not a URL,
// queueURL is returned as it is.
func QueueURLAt(endpoint, queueURL string) string {
	if endpoint == "" || awsendpoint.IsAWS(endpoint) || awsendpoint.IsAWS(queueURL) {
		return queueURL
	}
	e, err := url.Parse(endpoint)
	if err != nil || e.Host == "" {
		return queueURL
	}
	q, err := url.Parse(queueURL)
	if err != nil || q.Host == "" {
		return queueURL
	}
	q.Scheme, q.Host = e.Scheme, e.Host
	return q.String()
}
