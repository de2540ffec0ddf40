package lambdarun

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// buildEcho builds testdata/echofn for the host.
func buildEcho(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, "./testdata/echofn")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build echofn: %v\n%s", err, b)
	}
	return out
}

func event(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m" + strconv.Itoa(i), Body: b, EventSource: "aws:sqs"})
	}
	return ev
}

func TestPool(t *testing.T) {
	bootstrap := buildEcho(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	var outMu sync.Mutex
	p, err := Start(ctx, Function{
		Bootstrap: bootstrap,
		Env:       []string{"SQSWORKER_QUEUE_URL=http://q", "AWS_ENDPOINT_URL=http://e"},
		Timeout:   5 * time.Second,
		Output:    writerFunc(func(b []byte) (int, error) { outMu.Lock(); defer outMu.Unlock(); return out.Write(b) }),
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pids := make([]int, 0, 2)
	p.mu.Lock()
	for _, in := range p.all {
		pids = append(pids, in.cmd.Process.Pid)
	}
	p.mu.Unlock()

	// Concurrent batches over the two pairs, including the env the bootstrap sees.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			resp, err := p.HandleSQS(ctx, event("ok", "please fail", "checkenv", "x"+strconv.Itoa(i)))
			if err != nil {
				t.Errorf("HandleSQS: %v", err)
				return
			}
			if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m1" {
				t.Errorf("failures = %+v, want [m1]", resp.BatchItemFailures)
			}
		})
	}
	wg.Wait()

	// A function error answers HTTP 200 with an error body: the whole batch fails.
	_, err = p.HandleSQS(ctx, event("ok", "error"))
	var fe *FunctionError
	if !errors.As(err, &fe) || !strings.Contains(fe.Message, "asked to fail") {
		t.Fatalf("HandleSQS(error) = %v, want a FunctionError", err)
	}
	// The pair still works after a function error.
	if resp, err := p.HandleSQS(ctx, event("ok")); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleSQS(ok) = %+v, %v", resp, err)
	}

	// Every RIE has started its bootstrap (each in a process group of its own) by now.
	var boots []process
	for _, pid := range pids {
		boots = append(boots, childProcesses(pid)...)
	}
	if len(boots) != len(pids) && runtime.GOOS == "linux" {
		t.Errorf("found %d bootstraps under %d RIEs", len(boots), len(pids))
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		// The group is gone: no RIE.
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still alive after Close: %v", pid, err)
		}
	}
	for _, b := range boots {
		if !gone(b.pid) {
			t.Errorf("bootstrap %d still alive after Close", b.pid)
		}
	}
	// The RIE's warning about the reset that Close caused is not passed on.
	outMu.Lock()
	if strings.Contains(out.String(), "SandboxTerminated") {
		t.Errorf("output has the RIE's stop warning, which the pool caused:\n%s", out.String())
	}
	outMu.Unlock()
	if _, err := p.Invoke(ctx, []byte("{}")); err == nil {
		t.Error("Invoke after Close succeeded")
	}
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx, Function{}, 1); err == nil {
		t.Error("Start without Bootstrap succeeded")
	}
	if _, err := Start(ctx, Function{Bootstrap: filepath.Join(t.TempDir(), "nope")}, 1); err == nil {
		t.Error("Start with a missing bootstrap succeeded")
	}
	if _, err := Start(ctx, Function{Bootstrap: os.Args[0], RIE: "/bin/false", StartTimeout: 5 * time.Second}, 1); err == nil ||
		!strings.Contains(err.Error(), "exited before listening") {
		t.Errorf("Start with a failing RIE = %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestTimeoutReplacesThePair: an invoke past the function timeout fails, and the pair is
// replaced by a fresh one that serves the next invoke.
func TestTimeoutReplacesThePair(t *testing.T) {
	bootstrap := buildEcho(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Start(ctx, Function{Bootstrap: bootstrap, Timeout: time.Second, StopTimeout: 2 * time.Second}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.mu.Lock()
	first := p.all[0]
	p.mu.Unlock()
	start := time.Now()
	if _, err := p.HandleSQS(ctx, event("sleep")); err == nil {
		t.Fatal("HandleSQS(sleep) succeeded past the timeout")
	} else if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the timed-out invoke took %v", took)
	}
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the timed-out RIE still runs")
	}
	if resp, err := p.HandleSQS(ctx, event("ok", "fail")); err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("after the timeout: HandleSQS = %+v, %v", resp, err)
	}
}

// writeLog records each Write it gets.
type writeLog struct{ writes []string }

func (w *writeLog) Write(b []byte) (int, error) {
	w.writes = append(w.writes, string(b))
	return len(b), nil
}

// TestLineWriterPassesWholeLines: two processes' streams writing partial lines into one output
// never splice: every write the output gets is made of whole lines of one stream.
func TestLineWriterPassesWholeLines(t *testing.T) {
	t.Parallel()
	out := &writeLog{}
	a, b := &lineWriter{w: out}, &lineWriter{w: out}
	for _, step := range []struct {
		w *lineWriter
		s string
	}{
		{a, "alpha "}, {b, "bra"}, {a, "one\nalpha tw"}, {b, "vo one\n"}, {a, "o\nalpha three\nalpha fo"}, {b, "bravo two"},
	} {
		if n, err := step.w.Write([]byte(step.s)); err != nil || n != len(step.s) {
			t.Fatalf("Write(%q) = %d, %v", step.s, n, err)
		}
	}
	a.flush()
	b.flush()
	b.flush() // a second flush writes nothing
	want := []string{"alpha one\n", "bravo one\n", "alpha two\nalpha three\n", "alpha fo\n", "bravo two\n"}
	if !slices.Equal(out.writes, want) {
		t.Fatalf("writes = %q, want %q", out.writes, want)
	}
}

// gone waits up to 10 s for pid to die (SIGKILL is delivered asynchronously) and reports whether it did.
func gone(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return false
}

// alive reports whether pid is a live process (a zombie, killed but not yet reaped by whoever
// adopted it, is not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return runtime.GOOS != "linux"
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

// TestCloseKillsWhatAStubbornRIELeaves: an RIE that ignores SIGTERM is killed after StopTimeout,
// and the child it started in a process group of its own (as the RIE starts the bootstrap) is
// killed with it, not left running under init.
func TestCloseKillsWhatAStubbornRIELeaves(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the RIE's children are found under /proc")
	}
	t.Parallel()
	rie := filepath.Join(t.TempDir(), "stubbornrie")
	if b, err := exec.Command("go", "build", "-o", rie, "./testdata/stubbornrie").CombinedOutput(); err != nil {
		t.Fatalf("build stubbornrie: %v\n%s", err, b)
	}
	var out strings.Builder
	var outMu sync.Mutex
	p, err := Start(context.Background(), Function{Bootstrap: rie, RIE: rie, StopTimeout: 500 * time.Millisecond,
		Output: writerFunc(func(b []byte) (int, error) { outMu.Lock(); defer outMu.Unlock(); return out.Write(b) })}, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	riePid := p.all[0].cmd.Process.Pid
	p.mu.Unlock()
	var child int
	deadline := time.Now().Add(30 * time.Second)
	for child == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stub did not start its child")
		}
		if kids := childProcesses(riePid); len(kids) == 1 {
			child = kids[0].pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pgid, err := syscall.Getpgid(child); err != nil || pgid != child {
		t.Fatalf("the child's process group = %d, %v; want its own (%d)", pgid, err, child)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !gone(riePid) {
		t.Errorf("the RIE %d is alive after Close", riePid)
	}
	if !gone(child) {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		t.Errorf("the RIE's child %d is alive after Close: %s", child, st)
		_ = syscall.Kill(-child, syscall.SIGKILL)
	}
}

// TestLineWriterDropsTheStopWarningOnlyWhenStopping: the RIE's SandboxTerminated warning is left
// out once the pool stops the RIE (it caused it), and passed on otherwise (someone else did).
func TestLineWriterDropsTheStopWarningOnlyWhenStopping(t *testing.T) {
	t.Parallel()
	const warning = "02 Dec 2026 04:22:56,602 [WARNING] (rapid) Reset initiated: SandboxTerminated\n"
	var stopping atomic.Bool
	out := &writeLog{}
	w := &lineWriter{w: out, stopping: &stopping}
	_, _ = w.Write([]byte("before\n" + warning))
	stopping.Store(true)
	_, _ = w.Write([]byte("a line\n" + warning + "after\n"))
	_, _ = w.Write([]byte(warning))
	_, _ = w.Write([]byte("last, no newline"))
	w.flush()
	want := []string{"before\n" + warning, "a line\nafter\n", "last, no newline\n"}
	if !slices.Equal(out.writes, want) {
		t.Fatalf("writes = %q, want %q", out.writes, want)
	}
}
