//go:build unix

package rietest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB is a testing.TB with a chosen deadline that records Fatal instead of stopping.
type fakeTB struct {
	testing.TB
	deadline time.Time
	fatal    string
}

func (f *fakeTB) Helper()                     {}
func (f *fakeTB) Deadline() (time.Time, bool) { return f.deadline, !f.deadline.IsZero() }
func (f *fakeTB) Fatal(args ...any)           { f.fatal = fmt.Sprint(args...) }

// stubBuilds replaces go build for the test: each build records its context's deadline, writes
// its output, and counts.
func stubBuilds(t *testing.T, fail error) (builds *atomic.Int32, deadlines chan time.Time) {
	builds = &atomic.Int32{}
	deadlines = make(chan time.Time, 16)
	record := func(ctx context.Context) {
		d, ok := ctx.Deadline()
		if !ok {
			d = time.Time{}
		}
		deadlines <- d
	}
	oldBuild, oldRIE := buildFunc, buildRIEFunc
	buildFunc = func(ctx context.Context, pkg, out string) error {
		builds.Add(1)
		record(ctx)
		if fail != nil {
			return fail
		}
		return os.WriteFile(out, []byte("bootstrap"), 0o755)
	}
	buildRIEFunc = func(ctx context.Context, dir string) (string, error) {
		record(ctx)
		out := filepath.Join(dir, "aws-lambda-rie")
		return out, os.WriteFile(out, []byte("rie"), 0o755)
	}
	t.Cleanup(func() { buildFunc, buildRIEFunc = oldBuild, oldRIE })
	return builds, deadlines
}

// Many tests asking at once get one build, under the test binary's deadline and no shorter
// one (the fixed 3- and 4-minute deadlines killed builds on a loaded machine: "signal: killed").
func TestOnceBuildsOnceUnderTheTestsDeadline(t *testing.T) {
	builds, deadlines := stubBuilds(t, nil)
	far := time.Now().Add(7 * time.Hour)
	var o Once
	o.RIE = true
	defer o.Remove()
	var wg sync.WaitGroup
	paths := make([][2]string, 8)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb := &fakeTB{TB: t, deadline: far}
			b, r := o.Build(tb)
			if tb.fatal != "" {
				t.Errorf("Build failed: %s", tb.fatal)
			}
			paths[i] = [2]string{b, r}
		}()
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds of the bootstrap, want 1", n)
	}
	for range 2 {
		if d := <-deadlines; !d.Equal(far) {
			t.Errorf("a build ran with deadline %v, want the test's own, %v", d, far)
		}
	}
	for _, p := range paths {
		if p != paths[0] || p[0] == "" || p[1] == "" {
			t.Errorf("paths %v, want the same two for every caller (%v)", p, paths[0])
		}
	}
	if _, err := os.Stat(paths[0][0]); err != nil {
		t.Fatal(err)
	}
	o.Remove()
	if _, err := os.Stat(paths[0][0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove the bootstrap is still there: %v", err)
	}
}

// Without a test deadline (go test -timeout 0, or a benchmark) the build has none either.
func TestOnceWithoutDeadline(t *testing.T) {
	_, deadlines := stubBuilds(t, nil)
	var o Once
	defer o.Remove()
	tb := &fakeTB{TB: t}
	if b, r := o.Build(tb); tb.fatal != "" || b == "" || r != "" {
		t.Fatalf("Build = %q, %q, fatal %q; want a bootstrap and no RIE", b, r, tb.fatal)
	}
	if d := <-deadlines; !d.IsZero() {
		t.Errorf("the build had deadline %v, want none", d)
	}
}

// A failed build fails every test that asks for it, with the build's error, and is not retried.
func TestOnceFailureIsSticky(t *testing.T) {
	builds, _ := stubBuilds(t, errors.New("go build .: exit status 1\nsyntax error"))
	var o Once
	defer o.Remove()
	for range 2 {
		tb := &fakeTB{TB: t}
		o.Build(tb)
		if !strings.Contains(tb.fatal, "syntax error") {
			t.Errorf("fatal %q, want the build's error", tb.fatal)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
}
