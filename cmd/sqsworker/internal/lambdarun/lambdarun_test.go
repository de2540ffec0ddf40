package lambdarun

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		// The group is gone: no RIE, no bootstrap.
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still alive after Close: %v", pid, err)
		}
	}
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
