package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCLILinksNoTestOnlyPackage: the sqsworker binary (what `make demo` builds and runs, 47.8 MB
// stripped; docs/BENCHMARKS.md, "The CLI binary") holds nothing that only tests need: no
// container runtime (testcontainers, the Docker client: LocalStack is opt-in for tests), no
// browser driver (the console's tests), no leak checker, no testing package, none of our test
// helpers. The embedded emulator and the throwaway PostgreSQL server are the demo's own.
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
