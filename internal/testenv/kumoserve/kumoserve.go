// Package kumoserve runs the emulator (github.com/sivchari/kumo) as a separate server process,
// `kumo serve`, for tests that need what the embedded emulator does not give: a real TCP
// connection between the SDK and the server, as in a container setup.
//
// The binary is the kumo version this module requires (go.mod), found or built:
//
//  1. $KUMO_BIN, when set (it must be that version);
//  2. kumo on $PATH or in $GOBIN / $GOPATH/bin, when its build information says it is that version
//     (`GONOSUMDB='github.com/aws/aws-sdk-go-v2/service/*' go install
//     github.com/sivchari/kumo/cmd/kumo@v0.33.1` installs one);
//  3. otherwise this module's kumod (internal/testenv/kumoserve/kumod), built into a temporary directory:
//     kumo's own server in a process of its own, on the port asked for, from packages the tests
//     compile anyway. (Building kumo's own command line instead, in its own module with its own
//     dependencies, took 7 minutes on a fresh machine.)
//
// A test that cannot get the binary is skipped with the reason, except under CI=true, where it
// fails.
package kumoserve

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
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

// modulePath is the emulator's module.
const modulePath = "github.com/sivchari/kumo"

// startTimeout bounds the wait for a started server to answer; building the binary is not
// counted. Generous: tests run in parallel on small machines.
const startTimeout = 60 * time.Second

// Server is a running `kumo serve` process.
type Server struct {
	// URL is the server's endpoint, http://127.0.0.1:<port>.
	URL string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // of cmd.Wait, once done is closed
}

// Start starts `kumo serve` on a free port of 127.0.0.1 and returns once it answers HTTP. The
// server is stopped when the test ends; its output is shown if the test failed. It skips the
// test when the binary cannot be had (fails under CI=true).
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("kumoserve: %v", err)
		}
		tb.Skipf("skipped: needs the kumo binary: %v", err)
	}
	var s *Server
	for attempt := 1; ; attempt++ {
		s, err = start(bin, tb.TempDir())
		if err == nil {
			break
		}
		// The free port may have been taken between choosing it and the server binding it.
		if attempt == 3 {
			tb.Fatalf("kumoserve: %v", err)
		}
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("kumoserve: %v", err)
		}
		if tb.Failed() {
			if out, err := os.ReadFile(s.log.Name()); err == nil {
				tb.Logf("kumo serve output (last 4 KB):\n%s", tail(out, 4096))
			}
		}
		s.log.Close()
	})
	return s
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// start runs bin on a free port and waits until it answers.
func start(bin, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.CreateTemp(dir, "kumo-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	// Warnings only: a log line per request would slow the server down and fill the log.
	cmd.Env = append(os.Environ(), "KUMO_LOG_LEVEL=warn")
	// A file, not a pipe: no copying goroutine outlives the process.
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, log: log, done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(); err != nil {
		_ = s.Stop()
		log.Close()
		return nil, err
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls the server until it answers an HTTP request (any status).
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := client.Get(s.URL + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(s.log.Name())
			return fmt.Errorf("kumo serve exited before answering (%v): %s", s.err, tail(out, 2048))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kumo serve did not answer on %s within %v: %v", s.URL, startTimeout, err)
		}
	}
}

// PID returns the server's process id (to read its CPU time from /proc, as bench/e2e does).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it to exit. It may be
// called more than once.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	return fmt.Errorf("kumo serve did not exit within 10 s of SIGTERM: killed")
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns the path of a kumo binary of the version go.mod requires, finding or building it
// as the package documentation says. The answer is computed once per process.
func Binary() (string, error) {
	binOnce.Do(func() { binPath, binErr = findOrBuild() })
	return binPath, binErr
}

// module is the part of `go mod download -json` used here.
type module struct {
	Version string
	Dir     string
	Error   string
}

func findOrBuild() (string, error) {
	mod, err := required()
	if err != nil {
		return "", err
	}
	if p := os.Getenv("KUMO_BIN"); p != "" {
		if err := isVersion(p, mod.Version); err != nil {
			return "", fmt.Errorf("KUMO_BIN: %w", err)
		}
		return p, nil
	}
	for _, p := range installed() {
		if isVersion(p, mod.Version) == nil {
			return p, nil
		}
	}
	return buildKumod()
}

// required returns the kumo module this module requires, downloaded.
func required() (module, error) {
	var m module
	out, err := goCmd("", "mod", "download", "-json", modulePath)
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Error != "" || err != nil {
		return m, fmt.Errorf("go mod download %s: %v %s %s", modulePath, err, m.Error, bytes.TrimSpace(out))
	}
	return m, nil
}

// installed lists where an installed kumo may be.
func installed() []string {
	var paths []string
	if p, err := exec.LookPath("kumo"); err == nil {
		paths = append(paths, p)
	}
	if out, err := goCmd("", "env", "GOBIN", "GOPATH"); err == nil {
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		if len(lines) > 0 && len(bytes.TrimSpace(lines[0])) > 0 {
			paths = append(paths, filepath.Join(string(bytes.TrimSpace(lines[0])), "kumo"))
		}
		if len(lines) > 1 {
			for _, gp := range filepath.SplitList(string(bytes.TrimSpace(lines[1]))) {
				paths = append(paths, filepath.Join(gp, "bin", "kumo"))
			}
		}
	}
	return paths
}

// isVersion checks that path is a kumo binary of version, from its Go build information. A binary
// built inside the kumo module says "(devel)": it is accepted when it sits in the cache directory
// named after the version, where only build puts it.
func isVersion(path, version string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if info.Main.Path != modulePath {
		return fmt.Errorf("%s is not kumo (main module %q)", path, info.Main.Path)
	}
	if info.Main.Version == version {
		return nil
	}
	if info.Main.Version == "(devel)" && filepath.Base(filepath.Dir(path)) == "kumo-"+version {
		return nil
	}
	return fmt.Errorf("%s is kumo %s, want %s", path, info.Main.Version, version)
}

// buildKumod compiles this module's kumod into a temporary directory that lives as long as the
// process: its compiled packages are in the build cache already, so a build takes seconds.
func buildKumod() (string, error) {
	tmp, err := os.MkdirTemp("", "kumod-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(tmp, "kumod")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, kumodPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("go build %s: %v: %s", kumodPackage, err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// kumodPackage is the fallback server's package.
const kumodPackage = "github.com/sqsworker/sqsworker/internal/testenv/kumoserve/kumod"

// goCmd runs the go command in dir (the current directory when empty).
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
	}
	return out, err
}
