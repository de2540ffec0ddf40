package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLILinksNoTestOnlyPackage: the sqsworker binary (what `make demo` builds and runs;
// docs/BENCHMARKS.md, "The CLI binary") holds nothing that only tests need: no container runtime
// (testcontainers, the Docker client: LocalStack is opt-in for tests), no browser driver (the
// console's tests), no leak checker, no testing package, none of our test helpers. The embedded
// emulator and the throwaway PostgreSQL server are the demo's own.
func TestCLILinksNoTestOnlyPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps found %d packages", len(deps))
	}
	for _, d := range deps {
		for _, banned := range []string{
			"github.com/testcontainers/", "github.com/docker/", "github.com/moby/", "github.com/chromedp/",
			"go.uber.org/goleak", "github.com/sqsworker/sqsworker/pkg/awslocal/localstack",
			"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest", "github.com/sqsworker/sqsworker/internal/testenv/pgtest",
			"github.com/sqsworker/sqsworker/internal/testenv/awscost", "github.com/sqsworker/sqsworker/internal/testenv/kumoserve",
		} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the CLI links %s, which only tests need", d)
			}
		}
		if d == "testing" || strings.HasPrefix(d, "testing/") {
			t.Errorf("the CLI links %s", d)
		}
	}
}

// maxCLIBytes is docs/BENCHMARKS.md's target for the CLI binary as `make cli` links it (without
// the symbol table and DWARF).
const maxCLIBytes = 40_000_000

// TestCLIBinarySize builds the CLI as `make cli` does and checks the size target, and that
// nothing in it can reach a method by a name known only at run time (reflect's MethodByName, as
// text/template's field lookup does): the linker then keeps every exported method of every type
// the program uses (the whole AWS SDK clients, the emulator's 94 services), 14 MB of the 52 the
// CLI weighed while its usage text and the console's pages were executed by text/template.
func TestCLIBinarySize(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "sqsworker")
	// -trimpath left out: it would compile every package once more (the other tests build
	// without it), and the paths it trims only make this binary a little larger than make's.
	cmd := exec.Command("go", "build", "-ldflags=-s -w -dumpdep", "-o", bin, ".")
	var deps bytes.Buffer
	cmd.Stderr = &deps
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v\n%s", err, tail(deps.String(), 2000))
	}
	var reflective []string
	sc := bufio.NewScanner(&deps)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		from, _, ok := strings.Cut(sc.Text(), " -> ")
		if ok && strings.HasSuffix(from, " <ReflectMethod>") && !seen[from] {
			seen[from] = true
			reflective = append(reflective, strings.TrimSuffix(from, " <ReflectMethod>"))
		}
	}
	if len(reflective) > 0 {
		t.Errorf("the CLI links code that calls methods by a run-time name, so the linker keeps every exported method: %s\n"+
			"  what reaches it: the lines ending in \"-> NAME\" of go build -ldflags=-dumpdep ./cmd/sqsworker, up to main", strings.Join(reflective, ", "))
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxCLIBytes {
		t.Errorf("the CLI is %d bytes (-ldflags='-s -w'), above the %d of docs/BENCHMARKS.md: see what grew with go tool nm -size -sort size", fi.Size(), maxCLIBytes)
	}
	t.Logf("the CLI: %d bytes", fi.Size())
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
