package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFloorDiagramNamesEveryPackage keeps the floor diagram of ARCHITECTURE.md §2 in step with
// the tree (internal/floors_test.go checks the imports themselves): every ground helper under
// internal/ is on floor 0, every test server under internal/testenv on floor 2, and every
// library under pkg/ on floor 1.
func TestFloorDiagramNamesEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	start := strings.Index(s, "## 2. Layout")
	fence := strings.Index(s[start:], "```\n")
	if start < 0 || fence < 0 {
		t.Fatal("ARCHITECTURE.md has no §2 with a diagram")
	}
	body := s[start+fence+4:]
	body = body[:strings.Index(body, "```")]
	floors := map[string]string{} // "floor 1" → its lines
	current := ""
	for _, l := range strings.Split(body, "\n") {
		if f := strings.TrimSpace(l); strings.HasPrefix(f, "floor ") {
			current = f[:len("floor 0")]
		} else if strings.HasPrefix(f, "never:") {
			current = ""
		}
		if current != "" {
			floors[current] += l + "\n"
		}
	}
	dirs := func(rel string, skip ...string) []string {
		entries, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
	next:
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			for _, s := range skip {
				if e.Name() == s {
					continue next
				}
			}
			out = append(out, e.Name())
		}
		return out
	}
	check := func(floor string, names []string) {
		if len(names) == 0 {
			t.Errorf("no packages found for %s", floor)
		}
		for _, n := range names {
			if !strings.Contains(floors[floor], n) {
				t.Errorf("ARCHITECTURE.md §2: %s of the diagram does not name %s", floor, n)
			}
		}
	}
	check("floor 0", dirs("internal", "testenv"))
	check("floor 1", dirs("pkg", "awslocal"))
	check("floor 2", dirs("internal/testenv"))
	if !strings.Contains(floors["floor 2"], "pkg/awslocal") {
		t.Error("ARCHITECTURE.md §2: floor 2 of the diagram does not name pkg/awslocal")
	}
}
