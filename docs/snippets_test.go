// Package docs_test keeps the documentation honest: every Go snippet in README.md and docs/*.md
// compiles, every relative link and anchor in them resolves, and the README stays short.
//
// A ```go block is one of three things:
//
//   - a whole file, starting with its package clause: compiled as it is, as a package of its own;
//   - declarations without a package clause (types, funcs, vars; imports optional): compiled as a
//     package of its own, with the imports its qualified names need (knownImports, below);
//   - a fragment, marked by the line <!-- fragment: why --> right before the fence: counted,
//     not compiled. <!-- from PATH --> instead says the block is copied from PATH (an
//     example_test.go of another module, such as infra's): its lines must appear there, in order.
//
// The blocks are written to a scratch directory inside the module (its name starts with "_", so
// ./... never sees it), built with one `go build`, and the directory is removed.
package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// knownImports maps the package names that declaration snippets use to their import paths.
var knownImports = map[string]string{
	"context":      "context",
	"errors":       "errors",
	"fmt":          "fmt",
	"log":          "log",
	"slog":         "log/slog",
	"os":           "os",
	"signal":       "os/signal",
	"syscall":      "syscall",
	"time":         "time",
	"testing":      "testing",
	"json":         "encoding/json",
	"bytes":        "bytes",
	"strings":      "strings",
	"strconv":      "strconv",
	"io":           "io",
	"sync":         "sync",
	"sha256":       "crypto/sha256",
	"hex":          "encoding/hex",
	"http":         "net/http",
	"sql":          "database/sql",
	"aws":          "github.com/aws/aws-sdk-go-v2/aws",
	"config":       "github.com/aws/aws-sdk-go-v2/config",
	"sqs":          "github.com/aws/aws-sdk-go-v2/service/sqs",
	"dynamodb":     "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"ddbtypes":     "github.com/aws/aws-sdk-go-v2/service/dynamodb/types",
	"s3":           "github.com/aws/aws-sdk-go-v2/service/s3",
	"scheduler":    "github.com/aws/aws-sdk-go-v2/service/scheduler",
	"cloudwatch":   "github.com/aws/aws-sdk-go-v2/service/cloudwatch",
	"lambda":       "github.com/aws/aws-lambda-go/lambda",
	"events":       "github.com/aws/aws-lambda-go/events",
	"pgx":          "github.com/jackc/pgx/v5",
	"pgxpool":      "github.com/jackc/pgx/v5/pgxpool",
	"jobs":         "github.com/sqsworker/sqsworker/pkg/jobs",
	"worker":       "github.com/sqsworker/sqsworker/pkg/worker",
	"producer":     "github.com/sqsworker/sqsworker/pkg/producer",
	"poller":       "github.com/sqsworker/sqsworker/pkg/poller",
	"idempotency":  "github.com/sqsworker/sqsworker/pkg/idempotency",
	"status":       "github.com/sqsworker/sqsworker/pkg/status",
	"schedule":     "github.com/sqsworker/sqsworker/pkg/schedule",
	"dlq":          "github.com/sqsworker/sqsworker/pkg/dlq",
	"metrics":      "github.com/sqsworker/sqsworker/pkg/metrics",
	"tracing":      "github.com/sqsworker/sqsworker/pkg/tracing",
	"payload":      "github.com/sqsworker/sqsworker/pkg/payload",
	"console":      "github.com/sqsworker/sqsworker/pkg/console",
	"outbox":       "github.com/sqsworker/sqsworker/pkg/outbox",
	"dynamooutbox": "github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox",
	"pgoutbox":     "github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox",
	"pgxoutbox":    "github.com/sqsworker/sqsworker/pkg/outbox/pgoutbox/pgxoutbox",
	"awslocal":     "github.com/sqsworker/sqsworker/pkg/awslocal",
	"ddbstream":    "github.com/sqsworker/sqsworker/pkg/ddbstream",
}

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file   string // relative to the module root
	line   int    // the line of the block's first code line
	code   string
	marker string // "", "fragment" or "from"
	from   string // the PATH of <!-- from PATH -->
}

func (s snippet) where() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

var markerRE = regexp.MustCompile(`^<!--\s*(fragment|from)\b:?\s*(.*?)\s*-->$`)

// extract returns the ```go blocks of a Markdown text. An unterminated block is an error.
func extract(file, text string) ([]snippet, error) {
	var out []snippet
	lines := strings.Split(text, "\n")
	prev := "" // the last non-blank line outside a block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r")
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence := strings.TrimSpace(l)
			lang := strings.TrimSpace(strings.TrimPrefix(fence, "```"))
			indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
			start := i + 1
			j := start
			for ; j < len(lines); j++ {
				if strings.TrimSpace(lines[j]) == "```" {
					break
				}
			}
			if j == len(lines) {
				return nil, fmt.Errorf("%s:%d: a ``` block that never ends", file, i+1)
			}
			if lang == "go" {
				var b strings.Builder
				for _, cl := range lines[start:j] {
					b.WriteString(strings.TrimPrefix(cl, indent))
					b.WriteByte('\n')
				}
				s := snippet{file: file, line: start + 1, code: b.String()}
				if m := markerRE.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
					s.marker = m[1]
					if m[1] == "from" {
						s.from = m[2]
					}
				}
				out = append(out, s)
			}
			i = j
			prev = ""
			continue
		}
		if strings.TrimSpace(l) != "" {
			prev = l
		}
	}
	return out, nil
}

// moduleRoot is the directory of go.mod, one up from docs/.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// markdownFiles are the files whose snippets and links are checked, relative to the root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		r, _ := filepath.Rel(root, d)
		files = append(files, filepath.ToSlash(r))
	}
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files; expected README.md and the docs", len(files))
	}
	return files
}

func allSnippets(t *testing.T, root string) []snippet {
	t.Helper()
	var all []snippet
	for _, f := range markdownFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		s, err := extract(f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s...)
	}
	return all
}

// source turns a snippet into a compilable file and says how many lines were put before the
// snippet's first line (to map compiler errors back).
func source(s snippet) (src string, offset int, err error) {
	fset := token.NewFileSet()
	if f, perr := parser.ParseFile(fset, "snippet.go", s.code, parser.ImportsOnly); perr == nil && f.Name != nil {
		return s.code, 0, nil // a whole file
	}
	head := "package snippet\n\n"
	f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", head+s.code, parser.SkipObjectResolution)
	if err != nil {
		return "", 0, fmt.Errorf("%s: neither a Go file nor Go declarations (mark a fragment with <!-- fragment: why -->): %v", s.where(), err)
	}
	// The qualified names' package identifiers that the file does not declare.
	declared := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				declared[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					declared[sp.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						declared[n.Name] = true
					}
				}
			}
		}
	}
	for _, im := range f.Imports { // a snippet may import what knownImports lacks
		p, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		declared[name] = true
	}
	used := map[string]bool{}
	for _, id := range qualifiers(s.code) {
		if _, ok := knownImports[id]; ok && !declared[id] {
			used[id] = true
		}
	}
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("package snippet\n\n")
	if len(names) > 0 {
		b.WriteString("import (\n")
		for _, n := range names {
			p := knownImports[n]
			if filepath.Base(p) == n || (n == "pgx" && strings.HasSuffix(p, "/v5")) {
				fmt.Fprintf(&b, "\t%q\n", p)
			} else {
				fmt.Fprintf(&b, "\t%s %q\n", n, p)
			}
		}
		b.WriteString(")\n\n")
	}
	offset = strings.Count(b.String(), "\n")
	b.WriteString(s.code)
	return b.String(), offset, nil
}

// qualifiers returns the identifiers X of the selector expressions X.Y in Go code, outside
// strings and comments (a light scan: the compiler judges the rest).
func qualifiers(code string) []string {
	var out []string
	var sc scannerState
	for i := 0; i < len(code); i++ {
		if sc.skip(code, &i) {
			continue
		}
		c := rune(code[i])
		if !(unicode.IsLetter(c) || c == '_') || (i > 0 && (isIdent(rune(code[i-1])) || code[i-1] == '.')) {
			continue
		}
		j := i
		for j < len(code) && isIdent(rune(code[j])) {
			j++
		}
		if j < len(code) && code[j] == '.' {
			out = append(out, code[i:j])
		}
		i = j - 1
	}
	return out
}

func isIdent(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' }

// scannerState skips string literals, rune literals and comments.
type scannerState struct{}

func (scannerState) skip(code string, i *int) bool {
	switch {
	case strings.HasPrefix(code[*i:], "//"):
		if e := strings.IndexByte(code[*i:], '\n'); e >= 0 {
			*i += e
		} else {
			*i = len(code)
		}
		return true
	case strings.HasPrefix(code[*i:], "/*"):
		if e := strings.Index(code[*i+2:], "*/"); e >= 0 {
			*i += e + 3
		} else {
			*i = len(code)
		}
		return true
	case code[*i] == '`':
		if e := strings.IndexByte(code[*i+1:], '`'); e >= 0 {
			*i += e + 1
		} else {
			*i = len(code)
		}
		return true
	case code[*i] == '"' || code[*i] == '\'':
		q := code[*i]
		j := *i + 1
		for j < len(code) && code[j] != q && code[j] != '\n' {
			if code[j] == '\\' {
				j++
			}
			j++
		}
		*i = j
		return true
	}
	return false
}

// buildResult is what building a set of snippets gave.
type buildResult struct {
	compiled, fragments, copied int
	errs                        []string
}

// build writes the snippets under a scratch directory of the module, builds them with one go
// build, and maps the compiler's complaints back to the Markdown lines.
func build(t *testing.T, root string, snippets []snippet) buildResult {
	t.Helper()
	var res buildResult
	scratch, err := os.MkdirTemp(filepath.Join(root, "docs"), "_snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	type placed struct {
		s      snippet
		offset int
	}
	byDir := map[string]placed{}
	var pkgs []string
	for i, s := range snippets {
		switch s.marker {
		case "fragment":
			res.fragments++
			continue
		case "from":
			if err := copiedFrom(root, s); err != nil {
				res.errs = append(res.errs, err.Error())
			}
			res.copied++
			continue
		}
		src, offset, err := source(s)
		if err != nil {
			res.errs = append(res.errs, err.Error())
			continue
		}
		dir := filepath.Join(scratch, fmt.Sprintf("s%03d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "snippet.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, dir)
		byDir[filepath.Base(dir)] = placed{s, offset}
		pkgs = append(pkgs, "./"+filepath.ToSlash(rel))
		res.compiled++
	}
	if len(pkgs) == 0 {
		return res
	}
	cmd := exec.Command("go", append([]string{"build", "-o", os.DevNull}, pkgs...)...)
	if len(pkgs) > 1 {
		cmd = exec.Command("go", append([]string{"build"}, pkgs...)...) // several packages: checked, not written
	}
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil {
		return res
	}
	// Lines like "docs/_snippets-123/s004/snippet.go:12:5: undefined: x".
	loc := regexp.MustCompile(`(?:^|[\s(])(?:\./)?docs/` + regexp.QuoteMeta(filepath.Base(scratch)) + `/(s\d+)/snippet\.go:(\d+)(:\d+)?:?`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	mapped := 0
	for sc.Scan() {
		l := sc.Text()
		m := loc.FindStringSubmatchIndex(l)
		if m == nil {
			if strings.HasPrefix(l, "#") {
				continue // "# ./docs/_snippets-…/s004": the package header
			}
			res.errs = append(res.errs, l)
			continue
		}
		p := byDir[l[m[2]:m[3]]]
		n, _ := strconv.Atoi(l[m[4]:m[5]])
		mdLine := p.s.line + n - 1 - p.offset
		res.errs = append(res.errs, fmt.Sprintf("%s:%d: %s", p.s.file, mdLine, strings.TrimSpace(l[m[1]:])))
		mapped++
	}
	if mapped == 0 {
		res.errs = append(res.errs, "go build failed: "+err.Error()+"\n"+string(out))
	}
	return res
}

// copiedFrom checks that the lines of a <!-- from PATH --> block appear in PATH, in order and
// together, ignoring leading whitespace.
func copiedFrom(root string, s snippet) error {
	path := filepath.Join(root, filepath.Dir(s.file), s.from)
	text, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: <!-- from %s -->: %v", s.where(), s.from, err)
	}
	norm := func(t string) []string {
		var out []string
		for _, l := range strings.Split(t, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return out
	}
	want, have := norm(s.code), norm(string(text))
	for i := 0; i+len(want) <= len(have); i++ {
		match := true
		for j := range want {
			if have[i+j] != want[j] {
				match = false
				break
			}
		}
		if match {
			return nil
		}
	}
	return fmt.Errorf("%s: the block is not in %s (copy it again from there)", s.where(), s.from)
}

// TestGoSnippetsCompile builds every Go block of README.md and docs/*.md.
func TestGoSnippetsCompile(t *testing.T) {
	root := moduleRoot(t)
	snippets := allSnippets(t, root)
	res := build(t, root, snippets)
	for _, e := range res.errs {
		t.Error(e)
	}
	t.Logf("Go blocks: %d compiled, %d checked against the file they come from, %d fragments (not compiled), in %d Markdown files",
		res.compiled, res.copied, res.fragments, len(markdownFiles(t, root)))
	if res.compiled < 20 {
		t.Errorf("only %d Go blocks compiled; the guides have more: is the extraction broken?", res.compiled)
	}
}

// TestBrokenSnippetFails proves the check bites: a snippet that does not compile is reported at
// its Markdown line, a declaration snippet gets its imports, and a fragment is skipped.
func TestBrokenSnippetFails(t *testing.T) {
	root := moduleRoot(t)
	md := "# t\n\n```go\nfunc ok() time.Duration { return jobs.DefaultMaxAttempts * time.Second }\n```\n\n" +
		"text\n\n```go\nfunc bad() int {\n\treturn undefinedName\n}\n```\n\n<!-- fragment: on purpose -->\n```go\nx := 1\n```\n"
	snippets, err := extract("docs/broken.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(snippets) != 3 {
		t.Fatalf("extracted %d blocks, want 3", len(snippets))
	}
	res := build(t, root, snippets)
	if res.compiled != 2 || res.fragments != 1 {
		t.Errorf("compiled %d, fragments %d; want 2 and 1", res.compiled, res.fragments)
	}
	if len(res.errs) != 1 || !strings.Contains(res.errs[0], "docs/broken.md:11:") || !strings.Contains(res.errs[0], "undefinedName") {
		t.Errorf("errors = %q; want one, for docs/broken.md:11, naming undefinedName", res.errs)
	}
}

// TestReadmeIsShort: the README is the front door, at most 12 KiB; the rest lives in docs/.
func TestReadmeIsShort(t *testing.T) {
	const limit = 12 * 1024
	fi, err := os.Stat(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > limit {
		t.Errorf("README.md is %d bytes, more than %d: move the detail into a guide in docs/", fi.Size(), limit)
	}
}
