// Package lambdarun runs a Lambda function binary (a custom-runtime "bootstrap") locally under
// the AWS Lambda Runtime Interface Emulator (RIE): a Pool of RIE processes, each with its own
// bootstrap, invoked over the RIE's HTTP endpoint one invoke at a time, as a Lambda execution
// environment is. A Pool is a poller.Handler, so pkg/poller can feed it SQS batches.
package lambdarun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// RIEEnv names the environment variable that, when set, is the path of the RIE binary.
const RIEEnv = "SQSWORKER_RIE"

// invokePath is the RIE's invoke endpoint (the function is always named "function").
const invokePath = "/2015-03-31/functions/function/invocations"

// Defaults.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultStartTimeout = 10 * time.Second
	DefaultStopTimeout  = 5 * time.Second
	// invokeGrace is added to Timeout for the HTTP request, so the RIE reports the timeout itself.
	invokeGrace = 2 * time.Second
)

// Function is a Lambda function binary to run under the RIE.
type Function struct {
	// Bootstrap is the path of the function's executable. Required.
	Bootstrap string
	// Env is added to the environment of the RIE, which forwards its environment to the
	// bootstrap; later entries win. The process's own environment comes first.
	Env []string
	// RIE is the path of the aws-lambda-rie binary. Defaults to FindRIE's answer.
	RIE string
	// Timeout is the function timeout: the deadline of each invoke (rounded up to whole
	// seconds for the RIE). Defaults to 30 s.
	Timeout time.Duration
	// Output receives the RIE's and the bootstrap's stdout and stderr. Defaults to discarding
	// them. Writes are serialised, and each holds whole lines of one process's stream (a last
	// line without a newline gets one when the process exits).
	Output io.Writer
	// LogLevel is the RIE's own log level. Defaults to "warn".
	LogLevel string
	// StartTimeout bounds how long Start waits for each RIE to listen. Defaults to 10 s.
	StartTimeout time.Duration
	// StopTimeout bounds how long Close waits after SIGTERM before killing. Defaults to 5 s.
	StopTimeout time.Duration
}

// FunctionError is a function's error response (errorType, errorMessage), which the RIE
// answers with HTTP 200.
type FunctionError struct {
	Type    string   `json:"errorType"`
	Message string   `json:"errorMessage"`
	Trace   []string `json:"stackTrace,omitempty"`
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("lambdarun: function error %s: %s", e.Type, e.Message)
}

// FindRIE returns the path of the RIE binary: $SQSWORKER_RIE, else `go tool -n aws-lambda-rie`
// (the current module's tool), else aws-lambda-rie on the PATH.
func FindRIE(ctx context.Context) (string, error) {
	if p := os.Getenv(RIEEnv); p != "" {
		return p, nil
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", "aws-lambda-rie")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != "" {
			return p, nil
		}
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("lambdarun: aws-lambda-rie not found: set %s, add it as a tool (go get -tool github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie) or put it on the PATH (go tool: %s)",
		RIEEnv, strings.TrimSpace(stderr.String()))
}

// Pool is a set of RIE+bootstrap pairs. Invoke and HandleSQS may be called concurrently; each
// pair serves one invoke at a time.
type Pool struct {
	fn     Function
	env    []string
	client *http.Client
	free   chan *instance

	mu       sync.Mutex
	all      []*instance
	closed   bool
	closedCh chan struct{}
}

// instance is one RIE process (and the bootstrap it starts on its first invoke, in a process
// group of its own).
type instance struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // the exit error, once done is closed
	// stopping is set once the pool has begun to stop the RIE: the reset that the RIE then logs
	// as a warning is the pool's doing, not news.
	stopping atomic.Bool
}

// stopWarning is what the RIE logs, as a warning, when it is told to stop (SIGTERM) and resets
// the sandbox: expected when the pool stops it, so not passed on then.
var stopWarning = []byte("Reset initiated: SandboxTerminated")

// Start starts n RIE+bootstrap pairs, each on its own free 127.0.0.1 ports, and waits until each
// listens. The processes are not tied to ctx (which bounds only the start): stop them with Close.
func Start(ctx context.Context, fn Function, n int) (*Pool, error) {
	if fn.Bootstrap == "" {
		return nil, errors.New("lambdarun: Function.Bootstrap is required")
	}
	if n < 1 {
		return nil, fmt.Errorf("lambdarun: need at least 1 instance, got %d", n)
	}
	if _, err := os.Stat(fn.Bootstrap); err != nil {
		return nil, fmt.Errorf("lambdarun: bootstrap: %w", err)
	}
	if fn.Timeout <= 0 {
		fn.Timeout = DefaultTimeout
	}
	if fn.StartTimeout <= 0 {
		fn.StartTimeout = DefaultStartTimeout
	}
	if fn.StopTimeout <= 0 {
		fn.StopTimeout = DefaultStopTimeout
	}
	if fn.LogLevel == "" {
		fn.LogLevel = "warn"
	}
	if fn.Output == nil {
		fn.Output = io.Discard
	} else {
		fn.Output = &syncWriter{w: fn.Output}
	}
	if fn.RIE == "" {
		p, err := FindRIE(ctx)
		if err != nil {
			return nil, err
		}
		fn.RIE = p
	}
	secs := int(math.Ceil(fn.Timeout.Seconds()))
	env := append(os.Environ(), "AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(secs))
	env = append(env, fn.Env...)
	p := &Pool{
		fn:       fn,
		env:      env,
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}},
		free:     make(chan *instance, n),
		closedCh: make(chan struct{}),
	}
	for range n {
		in, err := p.startInstance(ctx)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.free <- in
	}
	return p, nil
}

// Size returns the number of pairs.
func (p *Pool) Size() int { return cap(p.free) }

// freePort returns a free 127.0.0.1 port.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// errExitedEarly: an RIE exited before it listened, most often because another process bound
// one of the free ports chosen for it between freePort and its own listen.
var errExitedEarly = errors.New("exited before listening")

// startInstance starts one RIE and waits until its emulator address accepts connections. An RIE
// that exits before listening is started again on new ports, up to three times: the ports are
// found free, then released for the RIE to bind, and another process may take one meanwhile.
func (p *Pool) startInstance(ctx context.Context) (*instance, error) {
	var err error
	for range 3 {
		var in *instance
		if in, err = p.startInstanceOnce(ctx); !errors.Is(err, errExitedEarly) {
			return in, err
		}
	}
	return nil, err
}

// startInstanceOnce starts one RIE on two free ports and waits until it listens.
func (p *Pool) startInstanceOnce(ctx context.Context) (*instance, error) {
	emu, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("lambdarun: find a port: %w", err)
	}
	api, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("lambdarun: find a port: %w", err)
	}
	cmd := exec.Command(p.fn.RIE,
		"--runtime-interface-emulator-address", emu,
		"--runtime-api-address", api,
		"--log-level", p.fn.LogLevel,
		p.fn.Bootstrap)
	cmd.Env = p.env
	in := &instance{url: "http://" + emu + invokePath, cmd: cmd, done: make(chan struct{})}
	// One line buffer per stream: the instances (and each one's stdout and stderr) share Output,
	// so a partial line must not be written until its end arrives, or lines would splice.
	stdout, stderr := &lineWriter{w: p.fn.Output, stopping: &in.stopping}, &lineWriter{w: p.fn.Output, stopping: &in.stopping}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process group of its own: a Ctrl-C at the terminal (SIGINT to the foreground group)
	// reaches only the program, which stops the RIE itself, after the batches in flight. The RIE
	// starts the bootstrap in a group of the bootstrap's own: stop handles both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("lambdarun: pool closed")
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("lambdarun: start %s: %w", p.fn.RIE, err)
	}
	p.all = append(p.all, in)
	p.mu.Unlock()
	go func() {
		in.err = cmd.Wait() // the copies into stdout and stderr have finished when Wait returns
		stdout.flush()
		stderr.flush()
		close(in.done)
	}()

	deadline := time.NewTimer(p.fn.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.DialTimeout("tcp", emu, time.Second); err == nil {
			c.Close()
			return in, nil
		}
		select {
		case <-in.done:
			return nil, fmt.Errorf("lambdarun: %s %w on %s: %v", p.fn.RIE, errExitedEarly, emu, in.err)
		case <-deadline.C:
			p.stop(in)
			return nil, fmt.Errorf("lambdarun: %s did not listen on %s within %v", p.fn.RIE, emu, p.fn.StartTimeout)
		case <-ctx.Done():
			p.stop(in)
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// Invoke waits for a free pair, sends payload to it and returns the function's response. A
// function error (which the RIE answers with HTTP 200) is returned as a *FunctionError; a
// timeout, a crash or a non-200 answer as another error, after which the pair is replaced by a
// fresh one.
func (p *Pool) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var in *instance
	select {
	case in = <-p.free:
	case <-p.closedCh:
		return nil, errors.New("lambdarun: pool closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out, healthy, err := p.invoke(ctx, in, payload)
	if !healthy {
		p.stop(in)
		if fresh, serr := p.startInstance(context.WithoutCancel(ctx)); serr == nil {
			in = fresh
		} else {
			err = errors.Join(err, serr) // keep the dead one in the pool: its invokes fail fast
		}
	}
	p.free <- in
	return out, err
}

func (p *Pool) invoke(ctx context.Context, in *instance, payload []byte) (out []byte, healthy bool, err error) {
	select {
	case <-in.done:
		return nil, false, fmt.Errorf("lambdarun: the RIE exited: %v", in.err)
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, p.fn.Timeout+invokeGrace)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.url, bytes.NewReader(payload))
	if err != nil {
		return nil, true, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, false, fmt.Errorf("lambdarun: invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 7<<20))
	if err != nil {
		return nil, false, fmt.Errorf("lambdarun: read the response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, false, fmt.Errorf("lambdarun: invoke answered %s: %s", resp.Status, truncate(body))
	}
	if bytes.HasPrefix(body, []byte("Task timed out")) {
		return body, false, fmt.Errorf("lambdarun: %s", truncate(body))
	}
	var fe FunctionError
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) && json.Unmarshal(body, &fe) == nil && fe.Type != "" && fe.Message != "" {
		return body, true, &fe
	}
	return body, true, nil
}

func truncate(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// HandleSQS makes the Pool a poller.Handler: it invokes the function with the event and returns
// its events.SQSEventResponse; a function error, or a response that is not one, fails the whole
// batch.
func (p *Pool) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("lambdarun: marshal the event: %w", err)
	}
	out, err := p.Invoke(ctx, payload)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	var resp events.SQSEventResponse
	if t := bytes.TrimSpace(out); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return resp, nil // a function returning nothing succeeded with every message
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("lambdarun: the response is not an SQSEventResponse: %w: %s", err, truncate(out))
	}
	return resp, nil
}

// Close stops every process: SIGTERM to each process group, then SIGKILL after StopTimeout. It
// waits for invokes in progress only as long as that (they then fail). It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closedCh)
	}
	all := p.all
	p.all = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range all {
		wg.Go(func() { p.stop(in) })
	}
	wg.Wait()
	return nil
}

// stop ends one RIE and its bootstrap, and returns once the RIE has been reaped. SIGTERM to the
// RIE's process group makes the RIE terminate the bootstrap (SIGTERM to the bootstrap's group,
// SIGKILL after a grace period) and exit; after StopTimeout the RIE's group is killed. The RIE
// starts the bootstrap in a process group of its own, which a killed RIE leaves behind: the
// groups of the RIE's children, found before the signal, are killed too once the RIE is gone,
// each only if its leader is still the same process.
func (p *Pool) stop(in *instance) {
	in.stopping.Store(true)
	pgid := in.cmd.Process.Pid
	var kids []process
	select {
	case <-in.done:
		// Exited by itself: its children are no longer found by their parent.
	default:
		kids = childProcesses(pgid)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(p.fn.StopTimeout)
		select {
		case <-in.done:
		case <-t.C:
		}
		t.Stop()
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // whatever is left in the RIE's group
	<-in.done
	for _, k := range kids {
		k.killGroup()
	}
}

// lineWriter passes what one process writes on one stream to w a whole line at a time (w is
// shared by every process of the pool); flush writes a last line that had no newline. Once
// stopping (when set) is true, it leaves out the RIE's stopWarning, which the pool then causes.
type lineWriter struct {
	w        io.Writer
	stopping *atomic.Bool
	buf      []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	end := bytes.LastIndexByte(l.buf, '\n')
	if end < 0 {
		return len(b), nil
	}
	// Complete lines go out together; what follows the last newline waits for its end.
	err := l.emit(l.buf[:end+1])
	l.buf = append(l.buf[:0], l.buf[end+1:]...)
	return len(b), err
}

// emit writes lines (whole lines) in one Write, without the stop warning once stopping.
func (l *lineWriter) emit(lines []byte) error {
	if l.stopping == nil || !l.stopping.Load() || !bytes.Contains(lines, stopWarning) {
		_, err := l.w.Write(lines)
		return err
	}
	var kept []byte
	for rest := lines; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n') + 1
		if i == 0 {
			i = len(rest)
		}
		if line := rest[:i]; !bytes.Contains(line, stopWarning) {
			kept = append(kept, line...)
		}
		rest = rest[i:]
	}
	if len(kept) == 0 {
		return nil
	}
	_, err := l.w.Write(kept)
	return err
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		_ = l.emit(append(l.buf, '\n'))
		l.buf = nil
	}
}

// syncWriter serialises writes from the processes' output copiers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
