package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// enqueueJSON is enqueue's --output json document.
type enqueueJSON struct {
	JobID          string `json:"job_id"`
	Kind           string `json:"kind"`
	Key            string `json:"key"`
	MessageID      string `json:"message_id"`
	SequenceNumber string `json:"sequence_number,omitempty"`
	Queue          string `json:"queue"`
	// Recorded reports whether the job table now holds the job as queued.
	Recorded bool `json:"recorded"`
}

func newEnqueueCmd(g *globals) *cobra.Command {
	var (
		key, group  string
		delay       time.Duration
		maxAttempts int
		fifo        bool
	)
	cmd := &cobra.Command{
		Use:   "enqueue KIND ARGS_JSON",
		Short: "Enqueue one job on a stack's queue",
		Long: `enqueue sends one job to the stack's queue <stack>-jobs (or <stack>-jobs.fifo), as the Go
producer does: KIND is the job's kind (^[a-z0-9][a-z0-9._:-]{0,127}$) and ARGS_JSON its
arguments, a JSON object ("-" reads it from standard input). It prints the job id, its
idempotency key (the id unless --key is given) and the SQS message id.

When the stack has its job table, the job is also recorded there as queued, so that
'sqsworker status' finds it before a worker picks it up.

A FIFO queue needs --group, and takes no --delay. Delays above 15 minutes need the
scheduler, which this version does not support yet.`,
		Example: `  sqsworker enqueue email.send '{"to":"a@b.c"}' --stack myapp
  sqsworker enqueue email.send '{"to":"a@b.c"}' --stack myapp --key order-42-welcome --delay 30s
  sqsworker enqueue report.build '{"month":"2026-11"}' --stack myapp --group tenant-7 --max-attempts 3
  echo '{"to":"a@b.c"}' | sqsworker enqueue email.send - --stack myapp --output json`,
		Args: exactArgs("KIND", "ARGS_JSON"),
		RunE: func(cmd *cobra.Command, args []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			kind, raw := args[0], []byte(args[1])
			if args[1] == "-" {
				if raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), producer.MaxMessageSize+1)); err != nil {
					return fmt.Errorf("read ARGS_JSON from standard input: %w", err)
				}
			}
			// The cheap checks first, so that a typo costs no AWS call; the producer checks again.
			if err := jobs.ValidateKind(kind); err != nil {
				return &usageError{fmt.Errorf("KIND: %v", err)}
			}
			if err := checkArgsJSON(raw); err != nil {
				return &usageError{err}
			}
			var opts []producer.Option
			if cmd.Flags().Changed("key") {
				opts = append(opts, producer.WithKey(key))
			}
			if cmd.Flags().Changed("group") {
				opts = append(opts, producer.WithGroupID(group))
			}
			if cmd.Flags().Changed("delay") {
				switch {
				case delay < 0:
					return &usageError{fmt.Errorf("--delay %v is negative", delay)}
				case delay > producer.MaxDelay:
					return &usageError{fmt.Errorf("--delay %v is longer than SQS's 15-minute maximum; longer delays need the scheduler, which this version does not support yet", delay)}
				}
				opts = append(opts, producer.WithDelay(delay))
			}
			if cmd.Flags().Changed("max-attempts") {
				if maxAttempts < 1 {
					return &usageError{fmt.Errorf("--max-attempts %d: must be at least 1", maxAttempts)}
				}
				opts = append(opts, producer.WithMaxAttempts(maxAttempts))
			}

			ctx := cmd.Context()
			c, err := connect(ctx, g)
			if err != nil {
				return err
			}
			refs, err := resolveStack(ctx, c, stack, fifo, needQueue|optTable)
			if err != nil {
				return err
			}
			if refs.FIFO && !cmd.Flags().Changed("group") {
				return &usageError{fmt.Errorf("%s is a FIFO queue: every job needs --group (its message group id)", refs.QueueName)}
			}
			if refs.FIFO && delay > 0 {
				return &usageError{fmt.Errorf("--delay: %s is a FIFO queue, and FIFO queues have no per-message delay (delayed FIFO jobs need the scheduler, which this version does not support yet)", refs.QueueName)}
			}
			cfg := producer.Config{SQS: c.sqs, QueueURL: refs.QueueURL}
			if refs.Table != "" {
				if cfg.Status, err = status.New(status.Config{Client: c.ddb, Table: refs.Table}); err != nil {
					return err
				}
			}
			p, err := producer.New(cfg)
			if err != nil {
				return err
			}
			res, err := p.EnqueueRaw(ctx, kind, raw, opts...)
			if errors.Is(err, producer.ErrInvalid) {
				// The job's own fault: say it without the library's prefix.
				return &usageError{errors.New(strings.TrimPrefix(err.Error(), "producer: "))}
			}
			if err != nil {
				return err
			}
			if res.StatusErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "sqsworker: warning: the job was enqueued, but not recorded as queued: %v\n", res.StatusErr)
			}
			doc := enqueueJSON{
				JobID: res.ID, Kind: res.Kind, Key: res.Key, MessageID: res.MessageID,
				SequenceNumber: res.SequenceNumber, Queue: refs.QueueName,
				Recorded: refs.Table != "" && res.StatusErr == nil,
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintf(tw, "enqueued\t%s on %s\n", doc.Kind, doc.Queue)
			fmt.Fprintf(tw, "job id\t%s\n", doc.JobID)
			fmt.Fprintf(tw, "key\t%s\n", doc.Key)
			fmt.Fprintf(tw, "message id\t%s\n", doc.MessageID)
			if doc.SequenceNumber != "" {
				fmt.Fprintf(tw, "sequence\t%s\n", doc.SequenceNumber)
			}
			if doc.Recorded {
				fmt.Fprintf(tw, "recorded\tqueued, in table %s\n", refs.Table)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "idempotency key, scoped by kind (default: the job id)")
	f.DurationVar(&delay, "delay", 0, "delay the first delivery, up to 15m (standard queues only)")
	f.IntVar(&maxAttempts, "max-attempts", 0, "override the kind's MaxAttempts for this job")
	f.StringVar(&group, "group", "", "message group id: required on FIFO queues, the tenant of a fair queue otherwise")
	f.BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	return cmd
}

// checkArgsJSON reports why raw is not a JSON object.
func checkArgsJSON(raw []byte) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return errors.New("ARGS_JSON is empty: want a JSON object, such as '{}'")
	}
	var v any
	if err := json.Unmarshal(trimmed, &v); err != nil {
		return fmt.Errorf("ARGS_JSON is not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("ARGS_JSON is a JSON %s: want a JSON object, such as '{\"to\":\"a@b.c\"}'", jsonKind(v))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}
