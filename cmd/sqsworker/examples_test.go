package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// example is one command line of a --help's examples.
type example struct {
	cmd  string // the command whose help shows it, such as "dlq purge"
	line string // as printed (continuation lines joined)
	args []string
	// stdin is what the example pipes into sqsworker (echo '…' | sqsworker …).
	stdin string
	// pipedTo is the program the output goes to (jq), "" for none; redirect the file it writes
	// to (> file).
	pipedTo, redirect string
	// env holds the VAR=value words before sqsworker.
	env []string
}

// examples returns every example of every command, in the order of the command tree.
func examples(t *testing.T) []example {
	t.Helper()
	var out []example
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "sqsworker"), " ")
		text := strings.ReplaceAll(c.Example, "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			ex, err := parseExample(line)
			if err != nil {
				t.Errorf("%s --help: example %q: %v", c.CommandPath(), line, err)
				continue
			}
			ex.cmd = path
			out = append(out, ex)
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	return out
}

// parseExample splits one example line as a POSIX shell would (quotes, backslashes), stopping at
// a comment, a pipe or a redirection.
func parseExample(line string) (example, error) {
	ex := example{line: strings.TrimSpace(line)}
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	s := ex.line
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return ex, fmt.Errorf("unterminated quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return ex, fmt.Errorf("unterminated quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			j := strings.IndexByte(s[i:], ')') // a command substitution, kept as one word
			if j < 0 {
				return ex, fmt.Errorf("unterminated $(")
			}
			cur.WriteString(s[i : i+j+1])
			inWord, i = true, i+j
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inWord, i = true, i+1
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			s = s[:i]
		case c == '|':
			flush()
			rest := strings.TrimSpace(s[i+1:])
			if len(words) > 0 && words[0] == "echo" {
				// echo '…' | sqsworker …: the example proper comes after the pipe.
				sub, err := parseExample(rest)
				if err != nil {
					return ex, err
				}
				sub.line, sub.stdin = ex.line, strings.Join(words[1:], " ")+"\n"
				return sub, nil
			}
			ex.pipedTo = strings.Fields(rest)[0]
			s = s[:i]
		case c == '>':
			flush()
			ex.redirect = strings.TrimSpace(s[i+1:])
			s = s[:i]
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	for len(words) > 0 && strings.Contains(words[0], "=") && words[0] != "sqsworker" {
		ex.env, words = append(ex.env, words[0]), words[1:]
	}
	if len(words) == 0 || words[0] != "sqsworker" {
		return ex, fmt.Errorf("does not run sqsworker")
	}
	ex.args = words[1:]
	return ex, nil
}

// TestHelpExamplesParse: every example of every --help names a command of its own help (or one
// below it) and parses: known flags, valid values, the arguments the command takes.
func TestHelpExamplesParse(t *testing.T) {
	t.Parallel()
	all := examples(t)
	if len(all) < 60 {
		t.Fatalf("found %d examples; expected every command's", len(all))
	}
	for _, ex := range all {
		root := newRoot(io.Discard, io.Discard)
		cmd, rest, err := root.Find(ex.args)
		if err != nil {
			t.Errorf("%q: %v", ex.line, err)
			continue
		}
		path := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), "sqsworker"), " ")
		if ex.cmd != "" && path != ex.cmd && !strings.HasPrefix(path, ex.cmd+" ") && ex.cmd != "" {
			t.Errorf("%q in the help of %q runs %q", ex.line, ex.cmd, path)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%q: %v", ex.line, err)
			continue
		}
		if cmd.Runnable() && cmd.Args != nil {
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Errorf("%q: %v", ex.line, err)
			}
		}
	}
}

// notRunHere says why an example is not run against the emulator (it is still parsed).
func notRunHere(ex example) string {
	first := ""
	if len(ex.args) > 0 {
		first = ex.args[0]
	}
	switch {
	case first == "demo" || first == "up" || first == "run" || first == "ui":
		return "starts a server or a long run (tested by its own tests)"
	case strings.Contains(ex.line, "--dsn") || strings.Contains(ex.line, "outbox relay"):
		return "needs a PostgreSQL server at the example's address (TestOutboxPostgresCommands runs these commands)"
	case strings.Contains(ex.line, "...") || strings.Contains(ex.line, "…"):
		return "holds a placeholder"
	case first == "wait":
		return "waits for a job to finish (TestCancelRunningJobFromTheCLI runs wait)"
	}
	return ""
}

// placeholderIDs are ids the examples name that no job on a fresh stack has: such an example
// may end "not found" (exit 1), and nothing else.
var placeholderIDs = []string{"01JD5Q2Y7V3M8K4N6P0R2T4W6X", "5fea7756-0ea4-451a-a703-a558b933e274", "album-42", "report.build/2026-11", "backfill.orders/2026-11"}

var notFound = regexp.MustCompile(`^sqsworker: no (job|message|recurring schedule|batch|chain) `)

// TestHelpExamplesRunOnTheEmulator runs the examples of the operating commands against the
// emulator, in the order a user would (enqueue before status, schedules put before show, pause,
// resume and delete), on stacks named as in the examples (myapp, with its schedule group,
// payload bucket and outbox table; a FIFO one for the .fifo examples), with the files they read:
// each one succeeds, or ends "not found" when it names a job id no job has. An example piped to
// jq prints JSON.
func TestHelpExamplesRunOnTheEmulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := backend(t)
	std := newStack(t, "examples", false)
	fifo := newStack(t, "examplesf", true)
	for _, s := range []string{std, fifo} {
		if _, err := awslocal.ProvisionScheduleGroup(ctx, scheduler.NewFromConfig(b.Config), s); err != nil {
			t.Fatal(err)
		}
	}
	// The examples of several queues name critical and bulk (sqsworker queues, --queue).
	if _, _, err := awslocal.ProvisionQueues(ctx, sqs.NewFromConfig(b.Config), awslocal.StackOptions{Name: std},
		queues.Spec{Name: "critical", Weight: 6}, queues.Spec{Name: "bulk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := awslocal.ProvisionBucket(ctx, b.S3(), std); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamooutbox.CreateTable(ctx, b.DynamoDB(), awslocal.OutboxTableName(std)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"month.json": `{"month":"2026-11"}`, "rollup.json": `{"window":"15m"}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	order := []string{"", "enqueue", "status", "jobs", "dlq list", "dlq show", "dlq redrive", "dlq", "dlq purge",
		"schedules", "schedules put", "schedules list", "schedules show", "schedules pause", "schedules resume", "schedules delete",
		"outbox", "outbox list", "outbox show", "outbox retry", "outbox migrate", "queues", "version", "pause", "limits", "resume",
		"cancel", "wait", "cursor", "batches", "batches list", "batches show", "batches cancel", "batches repair",
		"chains", "chains list", "chains show", "chains cancel", "chains repair"}
	byCmd := map[string][]example{}
	ran := 0
	for _, ex := range examples(t) {
		byCmd[ex.cmd] = append(byCmd[ex.cmd], ex)
	}
	for cmd := range byCmd {
		found := false
		for _, o := range order {
			found = found || o == cmd
		}
		if !found && cmd != "up" && cmd != "run" && cmd != "demo" && cmd != "ui" && cmd != "outbox relay" {
			t.Errorf("the examples of %q are not run: add the command to the order", cmd)
		}
	}
	for _, cmd := range order {
		for _, ex := range byCmd[cmd] {
			if why := notRunHere(ex); why != "" {
				t.Logf("not run: %s (%s)", ex.line, why)
				continue
			}
			stack := std
			if strings.Contains(ex.line, ".fifo") || strings.Contains(ex.line, "--fifo") {
				stack = fifo
			}
			args := make([]string, 0, len(ex.args)+4)
			for _, a := range ex.args {
				a = strings.ReplaceAll(a, "myapp", stack)
				if strings.HasPrefix(a, "@") {
					a = "@" + filepath.Join(dir, a[1:])
				}
				args = append(args, a)
			}
			args = append(args, "--endpoint", b.URL)
			var out, errOut bytes.Buffer
			code := runWithInput(ctx, args, strings.NewReader(ex.stdin), &out, &errOut)
			ran++
			placeholder := false
			for _, id := range placeholderIDs {
				placeholder = placeholder || strings.Contains(ex.line, id)
			}
			switch {
			case code == exitOK:
			case code == exitError && placeholder && notFound.MatchString(errOut.String()):
			default:
				t.Errorf("sqsworker %s (the help of %q): exit %d\nstdout:\n%s\nstderr:\n%s", ex.line, ex.cmd, code, out.String(), errOut.String())
				continue
			}
			if code == exitOK && ex.pipedTo == "jq" && !json.Valid(out.Bytes()) {
				t.Errorf("sqsworker %s: piped to jq, but prints no JSON document:\n%s", ex.line, out.String())
			}
		}
	}
	if ran < 35 {
		t.Errorf("ran %d examples; expected most of the operating commands'", ran)
	}
}
