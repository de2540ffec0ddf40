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
	"strings"
	"syscall"

	"github.com/spf13/cobra"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	if errors.Is(err, errHelpShown) {
		return exitUsage
	}
	err = explain(err)
	fmt.Fprintf(stderr, "sqsworker: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", commandPath(root, args))
		return exitUsage
	}
	return exitError
}

// errHelpShown is returned by a command that printed its help instead of running (sqsworker
// without a command): exit code 2, nothing more to say.
var errHelpShown = errors.New("help shown")

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
	root := &cobra.Command{
		Use:   "sqsworker",
		Short: "Background jobs on Amazon SQS + AWS Lambda",
		Long: `sqsworker turns Amazon SQS and AWS Lambda into a background-job system: typed jobs,
retries with backoff, dead-lettering with the reason, and partial batch failures.

This command runs the demo, provisions local stacks and runs the worker function locally
(demo, up, run: on the embedded emulator by default, which up and run serve on
localhost:4566 until Ctrl-C), and operates a stack's jobs (enqueue, status, cancel, wait,
jobs, dlq, schedules, and ui, the web console: on AWS by default). Every command takes another endpoint with --endpoint or
AWS_ENDPOINT_URL: LocalStack, or an emulator, where no credentials are needed. Read
commands print tables, or one JSON document with --output json.

Exit codes: 0 success, 1 failure, 2 bad command line.`,
		Example: `  sqsworker demo                 # the whole system end to end, in-process
  sqsworker run --stack myapp --function ./functions/worker   # a local stack and its worker
  sqsworker up --stack myapp     # serve a local stack: myapp-jobs, myapp-jobs-dlq, the table
  sqsworker enqueue email.send '{"to":"a@b.c"}' --stack myapp
  sqsworker jobs --status dead --stack myapp --output json
  sqsworker ui --stack myapp     # the operator web console on http://127.0.0.1:8080`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a command: the help, on stderr, and exit code 2 (a command line that does
		// nothing is a bad one). Args stays unset so that cobra still reports unknown commands.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			if err := cmd.Help(); err != nil {
				return err
			}
			return errHelpShown
		},
	}
	// The root runs only to print its help: its usage line is "sqsworker [command]" alone.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable .HasParent}}", 1))
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
		newEnqueueCmd(g), newStatusCmd(g), newCursorCmd(g), newCancelCmd(g), newWaitCmd(g), newJobsCmd(g), newDLQCmd(g), newSchedulesCmd(g), newRunCmd(g), newOutboxCmd(g),
		newUICmd(g))
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
