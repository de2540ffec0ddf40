// Command sqsworker runs and operates sqsworker job systems: `sqsworker demo` runs the whole
// system end to end on the embedded emulator; `sqsworker up` provisions a stack's queues.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
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
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "sqsworker: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run 'sqsworker %s --help' for usage.\n", commandPath(root, args))
		return exitUsage
	}
	return exitError
}

func commandPath(root *cobra.Command, args []string) string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == root {
		return ""
	}
	return cmd.Name()
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "sqsworker",
		Short: "Background jobs on Amazon SQS + AWS Lambda",
		Long: `sqsworker turns Amazon SQS and AWS Lambda into a background-job system: typed jobs,
retries with backoff, dead-lettering with the reason, and partial batch failures.

This command runs the demo and operates queues, on the embedded emulator by default
or on any endpoint (--endpoint or AWS_ENDPOINT_URL).`,
		Example: `  sqsworker demo                 # the whole system end to end, in-process
  sqsworker up --stack myapp     # provision myapp-jobs and myapp-jobs-dlq`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoint, "endpoint", "", "AWS endpoint URL (default: AWS_ENDPOINT_URL, else the embedded emulator)")
	pf.StringVar(&g.region, "region", "", "AWS region (default: AWS_REGION, else us-east-1)")
	pf.StringVar(&g.stack, "stack", "", "stack name the resource names derive from")
	root.AddCommand(newDemoCmd(g), newUpCmd(g))
	return root
}

// exactArgs is cobra.ExactArgs with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), args)}
	}
	return nil
}
