package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// linkRE matches an inline Markdown link or image: [text](target) or ![alt](target "title").
var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// headingRE matches an ATX heading.
var headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
func slug(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1") // a link's text
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// outsideFences calls fn with every line of a Markdown text that is not in a fenced block,
// with its 1-based number.
func outsideFences(text string, fn func(n int, line string)) {
	in := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			fn(i+1, l)
		}
	}
}

// anchors returns the anchors GitHub makes for a Markdown text's headings (a repeated heading
// gets -1, -2, …), plus those of explicit <a id="…"> / <a name="…"> tags.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	explicit := regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	outsideFences(text, func(_ int, l string) {
		for _, m := range explicit.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			return
		}
		s := slug(m[2])
		if n := count[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		count[s]++
	})
	return out
}

// trackedMarkdown lists the repository's Markdown files (git ls-files), relative to the root.
func trackedMarkdown(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		// Not a git checkout: the README and docs/ still get checked.
		return markdownFiles(t, root)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if strings.Contains(f, "node_modules/") || strings.Contains(f, "cdk.out/") {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			files = append(files, f)
		}
	}
	return files
}

// TestLinksResolve: every relative link of the repository's Markdown files names a file that
// exists, and every #anchor one of the target's headings.
func TestLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	files := trackedMarkdown(t, root)
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := anchors(string(text))
		cache[path] = a
		return a, nil
	}
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		outsideFences(string(text), func(n int, l string) {
			l = regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "") // code spans are not links
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				full := filepath.Join(root, f)
				if path != "" {
					full = filepath.Join(root, filepath.Dir(f), filepath.FromSlash(path))
					if _, err := os.Stat(full); err != nil {
						t.Errorf("%s:%d: link to %s: no such file", f, n, target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(full, ".md") {
					t.Errorf("%s:%d: link to %s: an anchor into a file that is not Markdown", f, n, target)
					continue
				}
				a, err := anchorsOf(full)
				if err != nil {
					t.Errorf("%s:%d: %v", f, n, err)
					continue
				}
				if !a[anchor] {
					t.Errorf("%s:%d: link to %s: no heading makes the anchor #%s", f, n, target, anchor)
				}
			}
		})
	}
	t.Logf("%d relative links checked in %d Markdown files", checked, len(files))
	if checked < 50 {
		t.Errorf("only %d relative links found; is the link pattern broken?", checked)
	}
}

// TestSlug pins GitHub's anchor rule on headings of these docs.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"6. Backends for tests and local runs":                              "6-backends-for-tests-and-local-runs",
		"Jobs larger than SQS allows: the S3 pointer form":                  "jobs-larger-than-sqs-allows-the-s3-pointer-form",
		"Recursive loop detection":                                          "recursive-loop-detection",
		"End to end: the raw SDK and ours, side by side (`make bench-e2e`)": "end-to-end-the-raw-sdk-and-ours-side-by-side-make-bench-e2e",
		"`by_status`: jobs that need attention":                             "by_status-jobs-that-need-attention",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
