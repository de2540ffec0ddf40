package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/cmd/sqsworker/internal/demo"
	"github.com/sqsworker/sqsworker/internal/logattr"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

func newDemoCmd(g *globals) *cobra.Command {
	var verbose, ui bool
	var uiOpts uiOptions
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system end to end on the embedded emulator",
		Long: `demo provisions a queue and its DLQ, enqueues a mix of jobs (successes, a job that
fails twice then succeeds, a poison job, a cancelled job, a malformed body and an unknown
kind), runs the poller with the worker until every message is settled, and prints a
table of outcomes and the DLQ with the reasons.`,
		Example: `  sqsworker demo
  sqsworker demo --verbose      # also print the worker's log lines (JSON) on stderr`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return &usageError{fmt.Errorf("--timeout %v: want a positive duration, such as 2m", timeout)}
			}
			keepRunningOnBrokenPipe()
			opts := demo.Options{Stack: g.stack, Timeout: timeout}
			if ui {
				if err := uiOpts.check(); err != nil {
					return err
				}
				opts.Serve = demoUI(cmd, &uiOpts)
			}
			if verbose {
				// Debug: the worker logs successes at Debug.
				opts.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: logattr.DurationText}))
			}
			// The embedded emulator unless an endpoint is given; SQSWORKER_BACKEND is for tests.
			// Listen: the emulator answers only requests addressed to this machine (see up).
			bo := awslocal.Options{Backend: awslocal.Embedded, Region: g.region, Listen: true}
			if endpoint := endpointOf(g); endpoint != "" {
				bo.Backend, bo.Endpoint, bo.Listen = awslocal.Endpoint, endpoint, false
			}
			b, err := awslocal.Start(cmd.Context(), bo)
			if err != nil {
				return err
			}
			defer b.Close()
			opts.Backend = b
			_, err = demo.Run(cmd.Context(), cmd.OutOrStdout(), opts)
			return err
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the worker's and the poller's log lines on stderr")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up when the messages are not settled by then")
	cmd.Flags().BoolVar(&ui, "ui", false, "then keep the demo's stack and worker running and serve the operator console on it (see 'sqsworker ui')")
	addUIFlags(cmd.Flags(), &uiOpts, "ui-")
	return cmd
}
