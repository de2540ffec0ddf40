// Command sqsworker runs and operates sqsworker job systems: `sqsworker demo` runs the whole
// system end to end on the embedded emulator; `sqsworker up` provisions a stack's queues and job
// table (and serves the embedded emulator); `sqsworker run` runs a worker function locally;
// `enqueue`, `status`, `cancel`, `wait`, `jobs`, `dlq` and `schedules` operate a stack's jobs, on
// an emulator or on AWS.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/internal/termsafe"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError marks errors in the command line (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// globals are the flags every command has.
type globals struct {
	endpoint string
	region   string
	stack    string
	output   string
	// payloadBucket is the S3 bucket of jobs larger than SQS allows ("" for <stack>-payloads,
	// when it exists).
	payloadBucket string
}

func main() {
	// SIGHUP too: a closed terminal stops up, run and demo as Ctrl-C does, their children and
	// temporary files with them.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runWithInput is run with the standard input given (enqueue reads ARGS_JSON "-" from it).
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if strings.HasPrefix(err.Error(), "unknown command ") {
		err = &usageError{err} // cobra's, for a mistyped command name
	}
	err = explain(err)
	fmt.Fprintf(stderr, "sqsworker: %s\n", errorText(err))
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", commandPath(root, args))
		return exitUsage
	}
	return exitError
}

// errorText is err's message for the terminal: it may quote job data (an id, a key, an error a
// server sent), so each line is escaped (termsafe), tabs shown as spaces.
func errorText(err error) string {
	return strings.Join(termsafe.Lines(strings.ReplaceAll(err.Error(), "\t", "    ")), "\n")
}

// groupRunE is the RunE of a command group (dlq, schedules, outbox): without a subcommand it
// prints the group's help on stdout and exits 0, as the root does and as gh and other cobra
// CLIs do; a word that names none of its subcommands is a usage error (exit 2). (cobra would
// print the help for that too, and exit 0.)
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return &usageError{fmt.Errorf("unknown %s command %q: want %s", cmd.Name(), args[0], orList(names))}
	}
	return cmd.Help()
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// commandPath returns the command line of the command args name, such as "sqsworker dlq list":
// the root's name alone when args name no subcommand.
func commandPath(root *cobra.Command, args []string) string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return root.Name()
	}
	return cmd.CommandPath()
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	var showVersion bool
	root := &cobra.Command{
		Use:   "sqsworker",
		Short: "Background jobs on Amazon SQS + AWS Lambda",
		Long: `sqsworker turns Amazon SQS and AWS Lambda into a background-job system: typed jobs,
retries with backoff, dead-lettering with the reason, and partial batch failures.

This command runs the demo, provisions local stacks and runs the worker function locally
(demo, up, run: on the embedded emulator by default, which up and run serve on
localhost:4566 until Ctrl-C), and operates a stack's jobs (enqueue, status, cancel, wait,
jobs, dlq, schedules, outbox, queues, pause, resume, limits, and ui, the web console: on AWS
by default). Every command takes another endpoint with --endpoint or AWS_ENDPOINT_URL:
LocalStack, or an emulator, where no credentials are needed. Read commands print tables, or one
JSON document with --output json; tables show job data with control and bidi characters escaped
(\x1b, \u202e). 'sqsworker version' says which build this is.

A command group without a command (sqsworker, sqsworker dlq) prints its help.
Exit codes: 0 success, 1 failure, 2 bad command line.`,
		Example: `  sqsworker demo                 # the whole system end to end, in-process
  sqsworker run --stack myapp --function ./functions/worker   # a local stack and its worker
  sqsworker up --stack myapp     # serve a local stack: myapp-jobs, myapp-jobs-dlq, the table
  sqsworker enqueue email.send '{"to":"a@b.c"}' --stack myapp
  sqsworker jobs --status dead --stack myapp --output json
  sqsworker outbox list --state dead --stack myapp
  sqsworker pause email.send --stack myapp   # its jobs wait until 'sqsworker resume email.send'
  sqsworker limits --stack myapp  # paused kinds and queues, flow limits and their holders
  sqsworker ui --stack myapp     # the operator web console on http://127.0.0.1:8080
  sqsworker version`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a command: the help, on stdout, and exit code 0, as every command group does
		// (groupRunE). Args stays unset so that cobra still reports unknown commands (exit 2).
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), readVersion(debug.ReadBuildInfo()).line())
				return err
			}
			return cmd.Help()
		},
	}
	// Usage and --version are Go code, not cobra templates: see writeUsage.
	root.SetUsageFunc(func(c *cobra.Command) error { writeUsage(c.OutOrStderr(), c); return nil })
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "print the version (the first line of 'sqsworker version')")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoint, "endpoint", "", "AWS endpoint URL (default: AWS_ENDPOINT_URL, else the embedded emulator for demo, up and run, AWS itself for the others)")
	pf.StringVar(&g.region, "region", "", "AWS region (default: AWS_REGION, else the AWS profile's; us-east-1 on an endpoint)")
	pf.StringVar(&g.stack, "stack", "", "stack name the resource names derive from")
	pf.StringVarP(&g.output, "output", "o", outputTable, "output format of read commands: table or json (one JSON document, for scripts)")
	pf.StringVar(&g.payloadBucket, "payload-bucket", "", "S3 bucket of the jobs larger than SQS allows (default: <stack>-payloads, when it exists; the CDK stack's output PayloadBucketName)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.output != outputTable && g.output != outputJSON {
			return &usageError{fmt.Errorf("--output %q: want table or json", g.output)}
		}
		return nil
	}
	root.AddCommand(newDemoCmd(g), newUpCmd(g),
		newEnqueueCmd(g), newStatusCmd(g), newCursorCmd(g), newCancelCmd(g), newWaitCmd(g), newJobsCmd(g), newDLQCmd(g), newSchedulesCmd(g),
		newRunCmd(g), newOutboxCmd(g), newUICmd(g), newVersionCmd(g), newQueuesCmd(g), newBatchesCmd(g), newChainsCmd(g),
		newPauseCmd(g), newResumeCmd(g), newLimitsCmd(g))
	return root
}

// stackName returns --stack, or a usage error naming the command when it is missing or is not
// a stack name.
func (g *globals) stackName(cmd *cobra.Command) (string, error) {
	name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	if g.stack == "" {
		if name == "up" {
			return "", &usageError{errors.New("up needs --stack NAME (the resource names derive from it)")}
		}
		return "", &usageError{fmt.Errorf("%s needs --stack NAME (the name given to `sqsworker up`)", name)}
	}
	if len(g.stack) > 60 || strings.IndexFunc(g.stack, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return "", &usageError{fmt.Errorf("--stack %q: a stack name is 1-60 characters of letters, digits, '-' and '_'", g.stack)}
	}
	return g.stack, nil
}

// json reports whether --output json was asked for.
func (g *globals) json() bool { return g.output == outputJSON }

// noArgs is cobra.NoArgs with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), args)}
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments, such as "JOB".
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		if len(args) < len(names) {
			return &usageError{fmt.Errorf("%s needs %s, missing %s", path, strings.Join(names, " "), strings.Join(names[len(args):], " "))}
		}
		return &usageError{fmt.Errorf("%s takes %s, got %d arguments: %q", path, strings.Join(names, " "), len(args), args)}
	}
}
