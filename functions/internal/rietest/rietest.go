//go:build unix

// Package rietest runs Lambda bootstraps under the AWS Lambda Runtime Interface Emulator (the
// aws-lambda-rie Go tool of go.mod) for tests and benchmarks: build, start on free ports,
// invoke, stop.
package rietest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RIEPackage is the RIE's command package (a tool in go.mod).
const RIEPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// Build runs go build for pkg into out with the Lambda flags of make build (CGO_ENABLED=0,
// -tags lambda.norpc, -trimpath, -ldflags=-s -w), for the host.
func Build(ctx context.Context, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// BuildRIE builds the RIE into dir and returns its path.
func BuildRIE(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "aws-lambda-rie")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, RIEPackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", RIEPackage, err, b)
	}
	return out, nil
}

// RIE is a running emulator with one function.
type RIE struct {
	// URL is the invoke URL: http://127.0.0.1:<port>/2015-03-31/functions/function/invocations.
	URL string

	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// lambdaEnv is the part of Lambda's own environment a provided.al2023 bootstrap sees before the
// function's variables (AWS_REGION, credentials and the runtime API address come from the test or
// the RIE). The bootstrap does not inherit this process's environment: a developer's or CI
// machine's variables (AWS_CA_BUNDLE, AWS_PROFILE, proxies) would change what it does and how
// fast it starts, and Lambda never sets them.
var lambdaEnv = []string{"PATH=/usr/local/bin:/usr/bin/:/bin:/opt/bin", "LANG=en_US.UTF-8", "TZ=:UTC"}

// Start runs rie with bootstrap as its function, on free loopback ports, in Lambda's base
// environment plus env (nothing of this process's environment), and waits (until ctx is done)
// for it to accept connections. The RIE starts the bootstrap on the first invoke.
func Start(ctx context.Context, rie, bootstrap string, env []string) (*RIE, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	out := &syncBuffer{}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", apiAddr, bootstrap)
	cmd.Env = append(append([]string(nil), lambdaEnv...), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so Stop also ends the bootstrap
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", rie, err)
	}
	r := &RIE{URL: "http://" + addr + "/2015-03-31/functions/function/invocations", cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.done) }()
	if err := waitListening(ctx, addr, r.done); err != nil {
		r.Stop()
		return nil, fmt.Errorf("the RIE did not start listening on %s: %w\n%s", addr, err, out.String())
	}
	return r, nil
}

// Invoke posts payload and returns the HTTP status and body. A handler error still answers 200:
// read the body.
func (r *RIE) Invoke(ctx context.Context, payload []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// Output returns what the RIE and the bootstrap wrote so far (the function's logs).
func (r *RIE) Output() string { return r.out.String() }

// Stop kills the RIE and the bootstrap (their process group) and waits for the RIE to exit
// (at most 10 seconds).
func (r *RIE) Stop() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// waitListening polls addr every 5 ms until it accepts a connection, ctx is done or exited is
// closed.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("the RIE exited")
		case <-tick.C:
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Once builds a function's bootstrap, and the RIE, at most once per test binary: the tests of
// a package share one build (linking a bootstrap takes seconds, and tens of them on a loaded
// machine). Declare it as a package variable and call Remove from TestMain once the tests ran.
type Once struct {
	// Package is the package to build, as go build takes it. Defaults to ".".
	Package string
	// RIE builds the RIE too (Build's second result). Defaults to false.
	RIE bool

	once      sync.Once
	dir       string
	bootstrap string
	rie       string
	err       error
}

// buildFunc and buildRIEFunc are Build and BuildRIE; this package's tests replace them.
var (
	buildFunc    = Build
	buildRIEFunc = BuildRIE
)

// deadliner is *testing.T's Deadline: the test binary's -timeout.
type deadliner interface {
	Deadline() (time.Time, bool)
}

// Build returns the paths of the bootstrap and (with RIE) the RIE, building them at the first
// call. The builds get no deadline of their own: only the test binary's (-timeout, through
// t.Deadline when t is a *testing.T), so that a build slowed down by a loaded machine is not
// killed while the test still has time. A failed build fails every test that asks for it.
func (o *Once) Build(t testing.TB) (bootstrap, rie string) {
	t.Helper()
	o.once.Do(func() {
		ctx := context.Background()
		if d, ok := t.(deadliner); ok {
			if deadline, ok := d.Deadline(); ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
		}
		o.err = o.build(ctx)
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.bootstrap, o.rie
}

func (o *Once) build(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "rietest-")
	if err != nil {
		return err
	}
	o.dir = dir
	pkg := o.Package
	if pkg == "" {
		pkg = "."
	}
	bootstrap := filepath.Join(dir, "bootstrap")
	errs := make(chan error, 2)
	go func() { errs <- buildFunc(ctx, pkg, bootstrap) }()
	var rie string
	if o.RIE {
		go func() { var err error; rie, err = buildRIEFunc(ctx, dir); errs <- err }()
	} else {
		errs <- nil
	}
	err = errors.Join(<-errs, <-errs)
	if err != nil && ctx.Err() != nil {
		deadline, _ := ctx.Deadline()
		err = fmt.Errorf("%w\n(the test binary's deadline, %s, passed during the build: raise go test -timeout)", err, deadline.Format(time.RFC3339))
	}
	if err != nil {
		return err
	}
	o.bootstrap, o.rie = bootstrap, rie
	return nil
}

// Remove deletes what Build built. Call it from TestMain after m.Run.
func (o *Once) Remove() {
	if o.dir != "" {
		_ = os.RemoveAll(o.dir)
	}
}
