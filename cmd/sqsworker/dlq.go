package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/status"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

func newDLQCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, redrive and purge a stack's dead-letter queue",
		Long: `dlq works on the stack's dead-letter queue <stack>-jobs-dlq: the jobs the worker gave up on
(each with its reason in the sqsworker.failure message attribute) and the messages SQS moved
there after maxReceiveCount receives.

  list      peek at up to 10 dead letters, without removing them
  show      one job's dead letter: its reason, error, attributes and body
  redrive   move every dead letter, or one job's, back to the job queue
  purge     delete every dead letter, or one by its message id

A job too large for SQS is kept in S3 and its dead letter is a pointer: every command reads
the job's id and kind from the object (in the payload bucket, --payload-bucket or
<stack>-payloads) when the failure attribute does not give them.

Each queue of a stack of several queues has its own DLQ: --queue NAME works on
<stack>-jobs-NAME-dlq, and redrives to <stack>-jobs-NAME. 'sqsworker queues' shows how many
dead letters each DLQ holds.`,
		Example: `  sqsworker dlq list --stack myapp
  sqsworker dlq show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker dlq redrive --stack myapp
  sqsworker dlq purge --confirm myapp-jobs-dlq --stack myapp
  sqsworker dlq list --queue bulk --stack myapp          # the DLQ of the queue named bulk`,
		RunE: groupRunE,
	}
	cmd.PersistentFlags().String("queue", "", "the queue of the stack whose DLQ to work on, by name (default: the default queue's, <stack>-jobs-dlq; see 'sqsworker queues')")
	cmd.AddCommand(newDLQListCmd(g), newDLQShowCmd(g), newDLQRedriveCmd(g), newDLQPurgeCmd(g))
	return cmd
}

// openDLQ resolves the stack's queues (and its table, when it has one) and returns its DLQ;
// mutate, when given, adjusts its Config.
func openDLQ(ctx context.Context, g *globals, cmd *cobra.Command, fifo bool, mutate ...func(*dlq.Config)) (*dlq.DLQ, *stackRefs, error) {
	stack, err := g.stackName(cmd)
	if err != nil {
		return nil, nil, err
	}
	c, err := connect(ctx, g)
	if err != nil {
		return nil, nil, err
	}
	queue, _ := cmd.Flags().GetString("queue") // dlq's persistent --queue
	refs, err := resolveQueue(ctx, c, stack, queue, fifo, needQueue|needDLQ|optTable)
	if err != nil {
		return nil, nil, err
	}
	st, err := payloadStore(ctx, c, g, stack)
	if err != nil {
		return nil, nil, err
	}
	var table *status.Table
	if refs.Table != "" {
		if table, err = status.New(status.Config{Client: c.ddb, Table: refs.Table}); err != nil {
			return nil, nil, err
		}
	}
	cfg := stackDLQConfig(c, refs.DLQURL, refs.QueueURL, table, st)
	for _, m := range mutate {
		m(&cfg)
	}
	d, err := dlq.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return d, refs, nil
}

// stackDLQConfig is the dlq.Config of one queue's DLQ (dlqURL, redriving to sourceURL), with
// the stack's job table and payload store when it has them (nil otherwise): the dlq commands
// and the console build each queue's DLQ with it.
func stackDLQConfig(c *awsClients, dlqURL, sourceURL string, table *status.Table, payloads *payload.Store) dlq.Config {
	cfg := dlq.Config{SQS: c.sqs, DLQURL: dlqURL, SourceURL: sourceURL}
	if table != nil {
		cfg.Status = table
	}
	if payloads != nil {
		cfg.Payload = payloads
	}
	return cfg
}

// dlqError explains the dlq package's errors: bad arguments are usage errors; a job not found
// says whether it may be among dead letters kept in S3 that could not be read, and why.
func dlqError(err error, refs *stackRefs, jobID string) error {
	var nf *dlq.NotFoundError
	switch {
	case errors.As(err, &nf):
		msg := fmt.Sprintf("no job %q in the dead-letter queue %s", nf.JobID, refs.DLQName)
		if nf.MessageID != "" {
			msg = fmt.Sprintf("no message %q in the dead-letter queue %s (want a message id, as 'sqsworker dlq list' prints it)", nf.MessageID, refs.DLQName)
		}
		if nf.Unresolved > 0 {
			msg += fmt.Sprintf(" among the dead letters it could read\n  %s: %s", keptInS3(nf.Unresolved), unreadable(nf.Cause, refs))
		}
		return errors.New(msg)
	case errors.Is(err, dlq.ErrNotFound):
		return fmt.Errorf("no job %q in the dead-letter queue %s", jobID, refs.DLQName)
	case errors.Is(err, dlq.ErrInvalid), errors.Is(err, dlq.ErrConfirm):
		return &usageError{err}
	}
	return err
}

// keptInS3 says that n dead letters keep their job in S3 and could not be read.
func keptInS3(n int) string {
	if n == 1 {
		return "1 dead letter keeps its job in S3 and could not be read"
	}
	return fmt.Sprintf("%d dead letters keep their job in S3 and could not be read", n)
}

// unreadable says why the S3 object of a dead letter could not be read, in the CLI's words.
func unreadable(cause error, refs *stackRefs) string {
	if errors.Is(cause, dlq.ErrNoPayloadStore) {
		return fmt.Sprintf("the stack has no payload bucket here (%s was not found); name it with --payload-bucket", awslocal.BucketName(refs.Name))
	}
	return oneLine(fmt.Sprint(cause), 200)
}

// dlqMessageJSON is a dead letter in JSON output: every key is always present.
type dlqMessageJSON struct {
	MessageID    string            `json:"message_id"`
	JobID        string            `json:"job_id"`
	Kind         string            `json:"kind"`
	Reason       string            `json:"reason"`
	Attempts     int               `json:"attempts"`
	Error        string            `json:"error"`
	FailedAt     jsonTime          `json:"failed_at"`
	SentAt       jsonTime          `json:"sent_at"`
	ReceiveCount int               `json:"receive_count"`
	SourceQueue  string            `json:"source_queue"`
	Failure      *worker.Failure   `json:"failure"`
	Attributes   map[string]string `json:"attributes"`
	Body         string            `json:"body"`
	// Payload is set when the job's envelope is an object in S3 (the body is its pointer).
	Payload *dlqPayloadJSON `json:"payload"`
}

// dlqPayloadJSON is the S3 object of a dead letter whose body is a pointer.
type dlqPayloadJSON struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// Size is the payload's size in bytes, from the size attribute (-1: unknown).
	Size int64 `json:"size"`
	// Error is why the object could not be read, when it was ("": read, or not tried).
	Error string `json:"error,omitempty"`
}

func toDLQMessageJSON(m dlq.Message) dlqMessageJSON {
	out := dlqMessageJSON{
		MessageID: m.MessageID, JobID: m.JobID, Kind: m.Kind, Reason: m.Reason, Attempts: m.Attempts,
		FailedAt: jsonTime(m.FailedAt), SentAt: jsonTime(m.SentAt), ReceiveCount: m.ReceiveCount,
		Failure: m.Failure, Attributes: m.Attributes, Body: m.Body,
	}
	if m.Failure != nil {
		out.Error, out.SourceQueue = m.Failure.Error, m.Failure.SourceQueue
	}
	if out.Attributes == nil {
		out.Attributes = map[string]string{}
	}
	if p := m.Payload; p != nil {
		out.Payload = &dlqPayloadJSON{Bucket: p.Bucket, Key: p.Key, Size: p.Size}
		if p.Err != nil {
			out.Payload.Error = p.Err.Error()
		}
	}
	return out
}

// dlqListJSON is dlq list's --output json document.
type dlqListJSON struct {
	Queue    string           `json:"queue"`
	Messages []dlqMessageJSON `json:"messages"`
}

func newDLQListCmd(g *globals) *cobra.Command {
	var max int
	var fifo bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Peek at up to 10 dead letters without removing them",
		Long: `list receives up to --max dead letters from <stack>-jobs-dlq and makes them visible again at
once, and shows each one's job, reason, attempts, failure time and error. A peek counts as a
receive (it raises the message's ApproximateReceiveCount), and SQS returns a sample of the
queue, not necessarily the oldest messages.`,
		Example: `  sqsworker dlq list --stack myapp
  sqsworker dlq list --stack myapp --max 3 --output json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if max < 1 || max > 10 {
				return &usageError{fmt.Errorf("--max %d: want 1-10 (SQS returns at most 10 messages per receive)", max)}
			}
			ctx := cmd.Context()
			d, refs, err := openDLQ(ctx, g, cmd, fifo)
			if err != nil {
				return err
			}
			msgs, err := d.Peek(ctx, max)
			if err != nil {
				return dlqError(err, refs, "")
			}
			// SQS returns a sample in no order: show the oldest first.
			sort.SliceStable(msgs, func(a, b int) bool {
				if !msgs[a].SentAt.Equal(msgs[b].SentAt) {
					return msgs[a].SentAt.Before(msgs[b].SentAt)
				}
				if msgs[a].JobID != msgs[b].JobID {
					return msgs[a].JobID < msgs[b].JobID
				}
				return msgs[a].MessageID < msgs[b].MessageID
			})
			out := cmd.OutOrStdout()
			if g.json() {
				doc := dlqListJSON{Queue: refs.DLQName, Messages: make([]dlqMessageJSON, 0, len(msgs))}
				for _, m := range msgs {
					doc.Messages = append(doc.Messages, toDLQMessageJSON(m))
				}
				return writeJSON(out, doc)
			}
			if len(msgs) == 0 {
				fmt.Fprintf(out, "no dead letters in %s\n", refs.DLQName)
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "JOB ID\tKIND\tREASON\tATTEMPTS\tFAILED AT\tERROR\tMESSAGE ID")
			var un int
			var cause error
			for _, m := range msgs {
				errText := ""
				if m.Failure != nil {
					errText = m.Failure.Error
				}
				if m.JobID == "" && m.Payload != nil && m.Payload.Err != nil {
					if un++; un == 1 {
						cause = m.Payload.Err
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", orDash(m.JobID), orDash(m.Kind), orDash(m.Reason), m.Attempts,
					showTime(m.FailedAt), orDash(oneLine(errText, 60)), orDash(m.MessageID))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out, "\n%s peeked from %s; 'sqsworker dlq show JOB_ID' shows one in full\n", plural(len(msgs), "message"), refs.DLQName)
			if un > 0 {
				fmt.Fprintf(out, "%s (shown without a job id or kind): %s\n", keptInS3(un), unreadable(cause, refs))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&max, "max", 10, "the most dead letters to show, 1-10")
	cmd.Flags().BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	return cmd
}

func newDLQShowCmd(g *globals) *cobra.Command {
	var fifo bool
	cmd := &cobra.Command{
		Use:   "show JOB_ID",
		Short: "Show one job's dead letter: reason, error, attributes and body",
		Long: `show finds the dead letter of the job JOB_ID in <stack>-jobs-dlq (by scanning the queue, each
message made visible again at once) and shows its reason, attempts, times, full error, message
attributes and body.`,
		Example: `  sqsworker dlq show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker dlq show 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp --output json | jq -r .body`,
		Args: exactArgs("JOB_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return &usageError{errors.New("JOB_ID is empty")}
			}
			ctx := cmd.Context()
			d, refs, err := openDLQ(ctx, g, cmd, fifo)
			if err != nil {
				return err
			}
			m, err := d.Show(ctx, args[0])
			if err != nil {
				return dlqError(err, refs, args[0])
			}
			if g.json() {
				return writeJSON(cmd.OutOrStdout(), toDLQMessageJSON(m))
			}
			return printDeadLetter(cmd.OutOrStdout(), m)
		},
	}
	cmd.Flags().BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	return cmd
}

// printDeadLetter prints one dead letter as "field value" lines, then its body.
func printDeadLetter(w io.Writer, m dlq.Message) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "job id\t%s\n", orDash(m.JobID))
	fmt.Fprintf(tw, "kind\t%s\n", orDash(m.Kind))
	fmt.Fprintf(tw, "reason\t%s\n", orDash(m.Reason))
	fmt.Fprintf(tw, "attempts\t%d\n", m.Attempts)
	fmt.Fprintf(tw, "failed at\t%s\n", showTime(m.FailedAt))
	fmt.Fprintf(tw, "sent at\t%s\n", showTime(m.SentAt))
	fmt.Fprintf(tw, "receives\t%d\n", m.ReceiveCount)
	fmt.Fprintf(tw, "message id\t%s\n", safe(m.MessageID))
	errText, source := "", ""
	if m.Failure != nil {
		errText, source = m.Failure.Error, m.Failure.SourceQueue
	}
	fmt.Fprintf(tw, "source queue\t%s\n", orDash(source))
	if p := m.Payload; p != nil {
		size := "size unknown"
		if p.Size >= 0 {
			size = fmt.Sprintf("%d bytes", p.Size)
		}
		fmt.Fprintf(tw, "payload\ts3://%s/%s (%s; the body below is its pointer)\n", safe(p.Bucket), safe(p.Key), size)
		if p.Err != nil {
			fmt.Fprintf(tw, "\tnot readable: %s\n", oneLine(p.Err.Error(), 160))
		}
	}
	lines := textLines(errText)
	fmt.Fprintf(tw, "error\t%s\n", orDash(lines[0]))
	for _, l := range lines[1:] {
		fmt.Fprintf(tw, "\t%s\n", l)
	}
	names := make([]string, 0, len(m.Attributes))
	for name := range m.Attributes {
		if name != worker.FailureAttribute { // shown above, decoded
			names = append(names, name)
		}
	}
	sort.Strings(names)
	label := "attributes"
	if len(names) == 0 {
		fmt.Fprintf(tw, "%s\t-\n", label)
	}
	for _, name := range names {
		fmt.Fprintf(tw, "%s\t%s=%s\n", label, safe(name), oneLine(m.Attributes[name], 80))
		label = ""
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	body := []byte(m.Body)
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "  ", "  ") == nil {
		body = pretty.Bytes()
	}
	_, err := fmt.Fprintf(w, "body\n  %s\n", strings.Join(textLines(string(body)), "\n"))
	return err
}

// redriveJSON is dlq redrive's --output json document.
type redriveJSON struct {
	// JobID is the redriven job (--job), "" for a redrive of the whole queue.
	JobID  string `json:"job_id"`
	Method string `json:"method"`
	Moved  int    `json:"moved"`
	// Total is the DLQ's approximate message count when the redrive started (1 for --job).
	Total int `json:"total"`
	// LeftBehind counts the dead letters that arrived after the redrive started (or repeat a
	// job it moved), left in the DLQ for the next redrive.
	LeftBehind int    `json:"left_behind"`
	TaskHandle string `json:"task_handle"`
	// Status is the move task's status as the command returned (COMPLETED, or RUNNING with
	// --no-wait); "" for the fallback mover and --job.
	Status string `json:"status"`
	// Attached reports that a move task started earlier was running, and was followed instead of
	// starting one.
	Attached bool   `json:"attached"`
	From     string `json:"from"`
	To       string `json:"to"`
}

// maxRedriveRate is StartMessageMoveTask's largest MaxNumberOfMessagesPerSecond.
const maxRedriveRate = 500

func newDLQRedriveCmd(g *globals) *cobra.Command {
	var (
		jobID                  string
		keep, fifo, noWait, mv bool
		rate                   int
	)
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Move dead letters back to the job queue",
		Long: `redrive moves every dead letter of <stack>-jobs-dlq back to <stack>-jobs, or with --job only
that job's. The job's record in the job table is reset first, so that the job runs again with
a fresh attempt budget; --keep-attempts keeps the attempts it has spent instead.

A redrive of the whole queue moves the dead letters that were in the DLQ when it started, each
once; dead letters that arrive while it runs (a running worker dead-letters a redriven job that
fails again) stay for the next redrive. It uses SQS's StartMessageMoveTask where the backend
has it, and otherwise receives, re-sends and deletes the messages itself, at --rate messages
per second; either way it shows moved/total and the rate on a terminal until the redrive ends.

A move task runs in SQS: the command follows it (ListMessageMoveTasks) until it completes, or
with --no-wait prints its handle and returns. SQS runs one move task per queue at a time: while
one runs, redrive follows it instead of starting another. Interrupting it (Ctrl-C) loses
nothing: a move task keeps running in SQS (the command prints its handle and how to cancel
it), the fallback mover leaves every message in one of the two queues, and running the command
again is safe. --no-move-task moves the messages itself even where SQS has move tasks: a move
task sends each message back as it is, so a job's attempts_before stays, and a job kept in S3
keeps its old object; the command's own mover resets attempts_before and writes such a job's
envelope anew (a fresh object for the bucket's lifecycle rule). A redrive of one --job always
moves it itself.`,
		Example: `  sqsworker dlq redrive --stack myapp
  sqsworker dlq redrive --job 01JD5Q2Y7V3M8K4N6P0R2T4W6X --stack myapp
  sqsworker dlq redrive --stack myapp --rate 20 --keep-attempts --output json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("job") && strings.TrimSpace(jobID) == "" {
				return &usageError{errors.New("--job is empty: want a job id")}
			}
			if rate < 1 || rate > maxRedriveRate {
				return &usageError{fmt.Errorf("--rate %d: want 1-%d messages per second (StartMessageMoveTask's limit)", rate, maxRedriveRate)}
			}
			ctx := cmd.Context()
			d, refs, err := openDLQ(ctx, g, cmd, fifo, func(c *dlq.Config) { c.RatePerSecond = rate })
			if err != nil {
				return err
			}
			doc := redriveJSON{JobID: jobID, From: refs.DLQName, To: refs.QueueName}
			if jobID != "" {
				if err := d.RedriveJob(ctx, jobID, keep); err != nil {
					return dlqError(err, refs, jobID)
				}
				doc.Method, doc.Moved, doc.Total = dlq.MethodFallback, 1, 1
			} else {
				stderr := cmd.ErrOrStderr()
				label := "redrive " + refs.DLQName + " → " + refs.QueueName
				p := newProgress(stderr, label, isTerminal(stderr))
				res, err := d.RedriveAll(ctx, dlq.RedriveOptions{KeepAttempts: keep, NoMoveTask: mv, Progress: p.update})
				p.done()
				if err != nil {
					if errors.Is(err, context.Canceled) && ctx.Err() != nil {
						return redriveInterrupted(refs, res)
					}
					return dlqError(err, refs, "")
				}
				doc.Method, doc.Moved, doc.TaskHandle, doc.Attached = res.Method, res.Moved, res.TaskHandle, res.Attached
				doc.Total, doc.LeftBehind = max(res.Total, res.Moved), res.LeftBehind
				if res.Method == dlq.MethodMoveTask {
					doc.Status = dlq.MoveTaskRunning
					if res.Attached {
						fmt.Fprintf(stderr, "a message move task started earlier is running on %s (SQS runs one per queue): following it\n", refs.DLQName)
					}
					if !noWait {
						p := newProgress(stderr, label, isTerminal(stderr))
						task, err := d.WaitMoveTask(ctx, res.TaskHandle, dlq.WaitOptions{Progress: func(t dlq.MoveTask) {
							p.since(t.StartedAt)
							p.update(t.Moved, max(t.ToMove, t.Moved))
						}})
						p.done()
						switch {
						case errors.Is(err, context.Canceled) && ctx.Err() != nil:
							return moveTaskInterrupted(g, refs, task)
						case errors.Is(err, dlq.ErrMoveTask):
							return fmt.Errorf("redrive from %s to %s: %w", refs.DLQName, refs.QueueName, err)
						case err != nil:
							return dlqError(err, refs, "")
						}
						doc.Status, doc.Moved, doc.Total = task.Status, task.Moved, max(task.ToMove, task.Moved)
					}
				}
			}
			out := cmd.OutOrStdout()
			switch {
			case g.json():
				return writeJSON(out, doc)
			case jobID != "":
				fmt.Fprintf(out, "redrove job %s from %s to %s\n", safe(jobID), doc.From, doc.To)
			case doc.Method == dlq.MethodMoveTask && doc.Status == dlq.MoveTaskCompleted:
				fmt.Fprintf(out, "redrove about %d of %s from %s to %s (an SQS message move task", doc.Moved, plural(doc.Total, "message"), doc.From, doc.To)
				if doc.Attached {
					fmt.Fprint(out, ", started earlier")
				}
				fmt.Fprintln(out, "; dead letters that arrived after it started wait for the next redrive)")
			case doc.Method == dlq.MethodMoveTask:
				if doc.Attached {
					fmt.Fprintf(out, "a message move task from %s to %s started earlier is running in SQS\n", doc.From, doc.To)
				} else {
					fmt.Fprintf(out, "started a message move task from %s to %s; it runs on in SQS\n", doc.From, doc.To)
				}
				if doc.Total > 0 {
					fmt.Fprintf(out, "messages     about %d (in the DLQ when it started; later ones wait for the next redrive)\n", doc.Total)
				}
				fmt.Fprintf(out, "task handle  %s\n", safe(doc.TaskHandle))
			default:
				fmt.Fprintf(out, "redrove %d of %s from %s to %s\n", doc.Moved, plural(doc.Total, "message"), doc.From, doc.To)
				if doc.LeftBehind > 0 {
					fmt.Fprintf(out, "left %s in %s that arrived after the redrive started (or repeat a job it moved): the next redrive moves them\n",
						plural(doc.LeftBehind, "dead letter"), doc.From)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&jobID, "job", "", "redrive only this job's dead letter")
	f.BoolVar(&keep, "keep-attempts", false, "keep the attempts the jobs have spent (default: a fresh attempt budget)")
	f.IntVar(&rate, "rate", dlq.DefaultRatePerSecond, fmt.Sprintf("messages moved per second, 1-%d", maxRedriveRate))
	f.BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	f.BoolVar(&noWait, "no-wait", false, "with an SQS message move task: print its handle and return instead of following it")
	f.BoolVar(&mv, "no-move-task", false, "receive, re-send and delete the messages here instead of starting an SQS move task (resets attempts_before, rewrites jobs kept in S3)")
	return cmd
}

// moveTaskInterrupted is the error of a redrive stopped by Ctrl-C while it followed a move task:
// the task goes on in SQS; what it moved so far, how to cancel it, and that running the command
// again is safe.
func moveTaskInterrupted(g *globals, refs *stackRefs, t dlq.MoveTask) error {
	cancel := "aws sqs cancel-message-move-task --task-handle " + t.Handle
	if r := regionOf(refs.DLQURL); r != "" {
		cancel += " --region " + r
	}
	if g.endpoint != "" {
		cancel += " --endpoint-url " + g.endpoint
	}
	return fmt.Errorf("redrive interrupted: the message move task keeps running in SQS; it had moved about %d of %s from %s to %s\n"+
		"  task handle  %s\n"+
		"  to stop it:  %s\n"+
		"  running the same command again is safe: it follows the running task (SQS runs one per queue) instead of starting another",
		t.Moved, plural(max(t.ToMove, t.Moved), "message"), refs.DLQName, refs.QueueName, t.Handle, cancel)
}

// regionOf returns the region of an AWS SQS queue URL (https://sqs.REGION.amazonaws.com/…), or "".
func regionOf(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	parts := strings.Split(u.Hostname(), ".")
	if len(parts) >= 4 && parts[0] == "sqs" && parts[2] == "amazonaws" {
		return parts[1]
	}
	return ""
}

// redriveInterrupted is the error of a redrive stopped by Ctrl-C (or SIGTERM): what it moved,
// and that running it again is safe.
func redriveInterrupted(refs *stackRefs, res dlq.RedriveResult) error {
	return fmt.Errorf("redrive interrupted: moved %d of %s from %s to %s; the rest are still in %s, none lost\n"+
		"  running the same command again is safe: it moves what is left", res.Moved, plural(max(res.Total, res.Moved), "message"),
		refs.DLQName, refs.QueueName, refs.DLQName)
}

func newDLQPurgeCmd(g *globals) *cobra.Command {
	var confirm, messageID string
	var fifo, deletePayloads bool
	cmd := &cobra.Command{
		Use:   "purge --confirm QUEUE_NAME | --message MESSAGE_ID",
		Short: "Delete every dead letter (asks for the DLQ's name), or one by its message id",
		Long: `purge deletes every message of <stack>-jobs-dlq, for good. To guard against a slip, it runs
only when --confirm repeats the dead-letter queue's name. SQS allows one purge per queue
every 60 seconds, and the deletion may take up to 60 seconds to finish.

--message deletes one dead letter instead, the one whose SQS message id 'dlq list' and 'dlq
show' print (a body that is not a job, which has no job id, included): purge scans the DLQ for
it, making every other message visible again at once, and deletes it. It takes no --confirm.

Dead letters whose job was too large for SQS keep it in S3. --delete-payloads deletes those
objects too: purge first reads the DLQ for their pointers, then purges, then deletes them (a
dead letter that arrives in between leaves its object to the bucket's lifecycle rule); with
--message, the object of that dead letter.`,
		Example: `  sqsworker dlq purge --confirm myapp-jobs-dlq --stack myapp
  sqsworker dlq purge --confirm myapp-jobs-dlq.fifo --stack myapp
  sqsworker dlq purge --message 5fea7756-0ea4-451a-a703-a558b933e274 --stack myapp`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stack, err := g.stackName(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("message") {
				if confirm != "" {
					return &usageError{errors.New("dlq purge takes --confirm (the whole queue) or --message (one dead letter), not both")}
				}
				if strings.TrimSpace(messageID) == "" {
					return &usageError{errors.New("--message is empty: want a dead letter's message id, as 'sqsworker dlq list' prints it")}
				}
				return purgeMessage(cmd, g, fifo, messageID, deletePayloads)
			}
			if confirm == "" {
				return &usageError{fmt.Errorf("dlq purge needs --confirm QUEUE_NAME, the name of the dead-letter queue (%s, or %s for a FIFO stack)",
					awslocal.DLQName(stack, false), awslocal.DLQName(stack, true))}
			}
			ctx := cmd.Context()
			d, refs, err := openDLQ(ctx, g, cmd, fifo)
			if err != nil {
				return err
			}
			if confirm != refs.DLQName {
				return &usageError{fmt.Errorf("--confirm %q is not the dead-letter queue's name %q: nothing was purged", confirm, refs.DLQName)}
			}
			deleted := 0
			if deletePayloads {
				if deleted, err = d.PurgePayloads(ctx, confirm); err != nil {
					if errors.Is(err, dlq.ErrInvalid) {
						return &usageError{fmt.Errorf("--delete-payloads: the stack has no payload bucket (%s); name it with --payload-bucket", awslocal.BucketName(refs.Name))}
					}
					return dlqError(err, refs, "")
				}
			} else if err := d.Purge(ctx, confirm); err != nil {
				return dlqError(err, refs, "")
			}
			if g.json() {
				doc := map[string]any{"purged": refs.DLQName}
				if deletePayloads {
					doc["payloads_deleted"] = deleted
				}
				return writeJSON(cmd.OutOrStdout(), doc)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %s\n", refs.DLQName)
			if deletePayloads {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s from S3\n", plural(deleted, "payload object"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&confirm, "confirm", "", "the dead-letter queue's name, to confirm the purge (required without --message)")
	cmd.Flags().StringVar(&messageID, "message", "", "delete only the dead letter with this SQS message id")
	cmd.Flags().BoolVar(&deletePayloads, "delete-payloads", false, "also delete the S3 objects of the dead letters whose job is kept there")
	cmd.Flags().BoolVar(&fifo, "fifo", false, "the stack's queues are FIFO (found by name otherwise)")
	return cmd
}

// purgeMessageJSON is dlq purge --message's --output json document.
type purgeMessageJSON struct {
	Queue     string `json:"queue"`
	MessageID string `json:"message_id"`
	JobID     string `json:"job_id"`
	Kind      string `json:"kind"`
	// PayloadDeleted is the S3 object deleted with it (--delete-payloads), "" for none.
	PayloadDeleted string `json:"payload_deleted"`
}

// purgeMessage deletes one dead letter by its message id (dlq.DeleteMessage).
func purgeMessage(cmd *cobra.Command, g *globals, fifo bool, messageID string, deletePayloads bool) error {
	ctx := cmd.Context()
	d, refs, err := openDLQ(ctx, g, cmd, fifo)
	if err != nil {
		return err
	}
	m, err := d.DeleteMessage(ctx, messageID, dlq.DeleteOptions{DeletePayload: deletePayloads})
	if errors.Is(err, dlq.ErrInvalid) && deletePayloads {
		return &usageError{fmt.Errorf("--delete-payloads: the stack has no payload bucket (%s); name it with --payload-bucket", awslocal.BucketName(refs.Name))}
	}
	if m.MessageID == "" {
		return dlqError(err, refs, "")
	}
	doc := purgeMessageJSON{Queue: refs.DLQName, MessageID: m.MessageID, JobID: m.JobID, Kind: m.Kind}
	if deletePayloads && m.Payload != nil && err == nil {
		doc.PayloadDeleted = "s3://" + m.Payload.Bucket + "/" + m.Payload.Key
	}
	out := cmd.OutOrStdout()
	if g.json() {
		if werr := writeJSON(out, doc); werr != nil {
			return werr
		}
		return err
	}
	job := "no job id"
	if m.JobID != "" {
		job = "job " + safe(m.JobID)
		if m.Kind != "" {
			job += " (" + safe(m.Kind) + ")"
		}
	}
	fmt.Fprintf(out, "deleted dead letter %s from %s: %s\n", safe(m.MessageID), refs.DLQName, job)
	if doc.PayloadDeleted != "" {
		fmt.Fprintf(out, "deleted its job's object %s from S3\n", safe(doc.PayloadDeleted))
	}
	return err
}
