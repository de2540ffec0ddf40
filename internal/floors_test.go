// Package internal_test keeps the module's layout by floor (docs/ARCHITECTURE.md §2): every
// import runs down, never up.
//
//	floor 3  applications   cmd/…, functions/…, examples/…, bench/…
//	floor 2  local backends pkg/awslocal/…, internal/testenv/… (emulator, PostgreSQL, cost ledger)
//	floor 1  libraries      pkg/… (what users import)
//	floor 0  ground         internal/<helper> (jsonscan, sqsevent, sdkhttp, …): imports nothing of ours above it
//
// A package's own imports (not its tests') are checked; tests of a library may use floor 2.
package internal_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sqsworker/sqsworker"

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs go list -json over the whole module (Deps holds each package's transitive imports).
func list(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	return pkgs
}

// floor returns the floor of one of our packages (its path relative to the module).
func floor(rel string) int {
	switch {
	case strings.HasPrefix(rel, "internal/testenv"), rel == "pkg/awslocal", strings.HasPrefix(rel, "pkg/awslocal/"):
		return 2
	case strings.HasPrefix(rel, "internal/"):
		return 0
	case strings.HasPrefix(rel, "pkg/"):
		return 1
	default: // cmd, functions, examples, bench
		return 3
	}
}

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// TestImportsRunDown: no package imports one of ours on a higher floor, and applications do not
// import one another except the example jobs, which the worker function registers.
func TestImportsRunDown(t *testing.T) {
	for _, p := range list(t) {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			if floor(to) > floor(from) {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports must run down", from, floor(from), to, floor(to))
			}
			if floor(from) == 3 && floor(to) == 3 && !sameApp(from, to) && to != "examples/examplejobs" {
				t.Errorf("%s imports %s, another application", from, to)
			}
		}
	}
}

// sameApp reports whether two application packages belong to the same top directory's
// command (cmd/sqsworker and its internal packages, functions/x and functions/internal/…).
func sameApp(a, b string) bool {
	top := func(s string) string {
		parts := strings.Split(s, "/")
		if len(parts) >= 2 {
			return parts[0] + "/" + parts[1]
		}
		return parts[0]
	}
	if strings.HasPrefix(a, "functions/") && strings.HasPrefix(b, "functions/internal/") {
		return true
	}
	return top(a) == top(b)
}

// TestLibrariesStayLight: what a library user downloads and links stays the SDK, Lambda's
// types and our own code: no emulator, database driver, browser, container or CDK package in the
// dependencies of any library (pgxoutbox alone is the pgx adapter; pkg/awslocal is the local
// backend). For the core packages the rule is stricter: only the SDK, Lambda's events, smithy,
// goccy/go-json where used, and the standard library.
func TestLibrariesStayLight(t *testing.T) {
	heavy := []string{"github.com/sivchari/kumo", "github.com/jackc/", "github.com/lib/pq", "github.com/chromedp/",
		"github.com/aws/aws-cdk-go/", "github.com/aws/jsii-runtime-go", "github.com/testcontainers/", "github.com/docker/"}
	for _, p := range list(t) {
		from, ok := rel(p.ImportPath)
		if !ok || floor(from) != 1 {
			continue
		}
		for _, d := range p.Deps {
			for _, h := range heavy {
				if !strings.HasPrefix(d, h) {
					continue
				}
				if from == "pkg/outbox/pgoutbox/pgxoutbox" && h == "github.com/jackc/" {
					continue
				}
				t.Errorf("%s depends on %s", from, d)
			}
		}
	}
}

// TestCoreSeams keeps the seams of docs/ARCHITECTURE.md: the job model imports nothing of ours but
// the ground floor; the worker imports no store, outbox, console, producer or batch; the producer
// no worker; the poller no worker; the job table's stores do not import the batches built on them;
// completion events no worker, producer or status reads.
func TestCoreSeams(t *testing.T) {
	forbidden := map[string][]string{
		"pkg/jobs":     {"pkg/"},
		"pkg/worker":   {"pkg/idempotency", "pkg/status", "pkg/outbox", "pkg/console", "pkg/producer", "pkg/dlq", "pkg/schedule", "pkg/metrics", "pkg/tracing", "pkg/poller", "pkg/queues", "pkg/dedup", "pkg/batch", "pkg/flow", "pkg/longjob"},
		"pkg/producer": {"pkg/worker", "pkg/idempotency", "pkg/status", "pkg/outbox", "pkg/console", "pkg/poller", "pkg/dedup", "pkg/batch", "pkg/flow"},
		"pkg/poller":   {"pkg/worker", "pkg/idempotency", "pkg/status", "pkg/outbox", "pkg/console", "pkg/producer", "pkg/queues", "pkg/batch", "pkg/flow"},
		// The queue set is a plain description (names, URLs, routes): it builds on the job model
		// alone, and the worker asks it through worker.Routing without importing it.
		"pkg/queues": {"pkg/worker", "pkg/producer", "pkg/poller", "pkg/idempotency", "pkg/status", "pkg/outbox", "pkg/console", "pkg/dlq", "pkg/schedule", "pkg/metrics", "pkg/payload", "pkg/dedup", "pkg/batch", "pkg/flow"},
		// Deduplication at enqueue sits on the producer and the job table, never under them.
		// Batches build on the job table's stores and the outbox through their seams
		// (idempotency.DynamoDBStore.FinishAction, status.CancelAction), never the other way.
		"pkg/status":      {"pkg/dedup", "pkg/batch", "pkg/flow"},
		"pkg/schedule":    {"pkg/dedup"},
		"pkg/idempotency": {"pkg/batch", "pkg/flow"},
		// Flow control plugs into the worker (Middleware) and the poller (Config.Paused); it knows
		// neither, nor the producer.
		"pkg/flow": {"pkg/worker", "pkg/poller", "pkg/producer", "pkg/console", "pkg/outbox"},
		// Completion events read stream images only: no table reads, no worker, no producer.
		"pkg/jobevents": {"pkg/worker", "pkg/status", "pkg/producer", "pkg/outbox", "pkg/console", "pkg/poller", "pkg/ddbstream"},
		// Long jobs build on the seams (jobs, idempotency's cursor, the worker's slicer), not on a
		// consumer or a producer: the worker runs them, it does not import them.
		"pkg/longjob": {"pkg/worker", "pkg/poller", "pkg/producer", "pkg/schedule", "pkg/status", "pkg/console", "pkg/outbox"},
	}
	seen := 0
	for _, p := range list(t) {
		from, _ := rel(p.ImportPath)
		bad, ok := forbidden[from]
		if !ok {
			continue
		}
		seen++
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			for _, b := range bad {
				if to == b || strings.HasPrefix(to, strings.TrimSuffix(b, "/")+"/") || (strings.HasSuffix(b, "/") && strings.HasPrefix(to, b)) {
					t.Errorf("%s imports %s", from, to)
				}
			}
		}
	}
	if seen != len(forbidden) {
		t.Fatalf("found %d of the %d core packages; was one moved?", seen, len(forbidden))
	}
}
