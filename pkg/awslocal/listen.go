package awslocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
)

// ErrPortInUse is returned by Start when Options.Port is taken by another program (often another
// emulator, or another `sqsworker run` or `sqsworker up`).
var ErrPortInUse = errors.New("awslocal: the port is in use")

// loopbackServer serves the embedded emulator, which listens on a port of its own choosing, on a
// loopback port chosen by the caller: it accepts connections on 127.0.0.1:port (and [::1]:port,
// where the system has IPv6) and passes each request that is addressed to this machine (see
// checkRequest) to the emulator through a reverse proxy; the others get 403 Forbidden.
type loopbackServer struct {
	srv  *http.Server
	tr   *http.Transport
	lns  []net.Listener
	port int
	wg   sync.WaitGroup
}

// listenLoopback listens on the loopback port for the emulator at target (host:port); port 0
// picks a free one (on 127.0.0.1, and on ::1 too when that port is free there).
func listenLoopback(port int, target string) (*loopbackServer, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("awslocal: port %d out of range 0-65535", port)
	}
	ln4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, listenError(port, err)
	}
	l := &loopbackServer{lns: []net.Listener{ln4}, port: ln4.Addr().(*net.TCPAddr).Port}
	// "localhost" may resolve to ::1 first: listen there too, on the same port. A system without
	// IPv6 refuses the address, which is fine; a chosen port taken there by another program is
	// not, since clients of localhost would reach that program.
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(l.port))); err == nil {
		l.lns = append(l.lns, ln6)
	} else if errors.Is(err, syscall.EADDRINUSE) && port != 0 {
		ln4.Close()
		return nil, listenError(l.port, err)
	}
	// Connections to the emulator are kept for reuse, as many as clients keep to this server
	// (a local run's pollers, workers and relays), so that no request waits for a new one.
	l.tr = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        0, // no limit but per host
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // bodies pass as the emulator sends them
	}
	quiet := log.New(io.Discard, "", 0) // a client gone mid-request is not news
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target
			if pr.Out.Body != nil && pr.Out.Body != http.NoBody {
				pr.Out.Body = closedBodyIsEOF{pr.Out.Body}
			}
			// pr.Out.Host stays the client's: the emulator reads a bucket addressed by name
			// (<bucket>.localhost) from it, and it is what the client signed.
		},
		Transport:     l.tr,
		FlushInterval: -1, // what the emulator writes goes out at once
		ErrorLog:      quiet,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	l.srv = &http.Server{
		Handler:           checkRequests(proxy),
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          quiet,
	}
	for _, ln := range l.lns {
		l.wg.Go(func() { _ = l.srv.Serve(ln) })
	}
	return l, nil
}

// closedBodyIsEOF is the body of a request passed on to the emulator: a read after the client's
// request body was closed ends it (io.EOF) instead of failing. net/http's server closes a request
// body once the handler starts its response (here: the proxy, as soon as the emulator answers),
// while the transport that carried the body to the emulator may still read it once more after
// its Content-Length bytes, to check that nothing follows; that read then failed with
// http.ErrBodyReadAfterClose, the transport took it for a failed write and closed its connection
// to the emulator in the middle of the answer, and the client got a cut-off response ("unexpected
// EOF"): a receive's messages lost from view for a visibility timeout. Every byte was sent by
// then (the emulator answers only a whole request), so the read reports the end.
type closedBodyIsEOF struct{ io.ReadCloser }

func (b closedBodyIsEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, http.ErrBodyReadAfterClose) {
		return n, io.EOF
	}
	return n, err
}

func listenError(port int, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: localhost:%d is taken by another program: %v", ErrPortInUse, port, err)
	}
	return fmt.Errorf("awslocal: listen on localhost:%d: %w", port, err)
}

// close stops accepting, closes every connection (requests in progress end) and waits for the
// listeners' goroutines.
func (l *loopbackServer) close() {
	_ = l.srv.Close()
	l.tr.CloseIdleConnections()
	l.wg.Wait()
}

// checkRequests passes on the requests checkRequest accepts and answers the others with 403
// Forbidden and an AWS-style JSON error (code and message, which the SDKs report).
func checkRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := checkRequest(r); code != "" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amzn-Errortype", code)
			w.WriteHeader(http.StatusForbidden)
			b, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
			_, _ = w.Write(b)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Error codes of the requests the loopback server refuses.
const (
	codeHostNotAllowed   = "HostNotAllowed"
	codeCrossSiteRequest = "CrossSiteRequest"
)

// checkRequest returns "" for a request the emulator may serve, else an error code and a message
// that says why not. The emulator has no authentication: anything that reaches its port drives
// it. A program on this machine addresses it as localhost or a loopback address; a web page in a
// browser on this machine can reach the port too, two ways, both refused:
//
//   - DNS rebinding: a page of evil.example whose name is made to resolve to 127.0.0.1 sends its
//     requests with "Host: evil.example", so a request whose Host header is not a loopback name
//     (allowedHost) is refused;
//   - cross-site requests: any page may send simple requests (a form's POST, an image's GET) to
//     http://localhost:4566 with the right Host; browsers mark them with an Origin header (POST)
//     and Sec-Fetch-Site (all), which the SDKs never send. A request from a page whose origin is
//     not on a loopback name, or that the browser calls cross-site, is refused; a page served
//     from this machine (another localhost port: same-site) is not.
func checkRequest(r *http.Request) (code, msg string) {
	if !allowedHost(r.Host) {
		return codeHostNotAllowed, fmt.Sprintf("the embedded emulator answers only requests addressed to this machine "+
			"(localhost, 127.0.0.1 or [::1], with or without the port), not to %q: a web page cannot drive it through DNS rebinding. "+
			"Reach it at http://localhost:PORT", r.Host)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !allowedHost(u.Host) {
			return codeCrossSiteRequest, fmt.Sprintf("the embedded emulator refuses requests from web pages of other sites (Origin %q)", origin)
		}
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return codeCrossSiteRequest, "the embedded emulator refuses requests a browser sends for a page of another site (Sec-Fetch-Site: cross-site)"
	}
	return "", ""
}

// allowedHost reports whether host, a Host header (a name or an IP literal, with or without the
// port), names this machine's loopback interface: localhost, or a name under .localhost (which
// the emulator reads S3 buckets from, <bucket>.localhost; RFC 6761 reserves them for loopback, so
// no page can make one resolve elsewhere), or a loopback IP literal (127.0.0.0/8, [::1]). The
// name the backend's URL gives is one of them.
func allowedHost(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
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
