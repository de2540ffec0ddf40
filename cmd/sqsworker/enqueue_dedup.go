package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sqsworker/sqsworker/pkg/dedup"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// dedupFlags are enqueue's deduplication flags (pkg/dedup): one rule at most.
type dedupFlags struct {
	unique      time.Duration
	uniqueWhile string
	debounce    time.Duration
	maxWait     time.Duration
	throttle    string
	key         string
	fields      []string
}

// dedupHelp is the part of enqueue's --help about the deduplication flags.
const dedupHelp = `

Deduplication (docs/DEDUP.md; the stack's job table is needed): --unique WINDOW makes the
job unique by its kind and key for the window: an enqueue while the key is held sends nothing
and prints "duplicate" with the holding job's id. --unique-while active frees the key once that
job has succeeded, been dead-lettered or cancelled; any (the default) holds it for the whole
window. --debounce PERIOD delays the job until no enqueue of its key came for the period (the
last args win), --max-wait bounding the wait (default 10 × the period); it prints "debounced"
with the job that will run and when. --throttle N/PERIOD drops the enqueues of the key beyond N
per period (exit status 1, saying when the period ends). The key is --dedup-key, or derived from
the args (--dedup-fields lists the top-level fields it covers; without them, a unique key covers
all the args and a debounce or throttle key is the kind alone).`

// dedupExamples are enqueue's --help examples of the flags.
const dedupExamples = `
  sqsworker enqueue report.export '{"user":7}' --stack myapp --unique 1h --unique-while active
  sqsworker enqueue search.reindex '{"doc":42}' --stack myapp --debounce 2m --max-wait 10m --dedup-fields doc
  sqsworker enqueue email.digest '{"tenant":"t7"}' --stack myapp --throttle 10/1h --dedup-fields tenant`

func (f *dedupFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.unique, "unique", 0, "make the job unique by kind and key for this `WINDOW` (a duplicate sends nothing)")
	fs.StringVar(&f.uniqueWhile, "unique-while", "any", "with --unique: any (the key is held the whole window) or active (until the job is over)")
	fs.DurationVar(&f.debounce, "debounce", 0, "delay the job until no enqueue of its key came for this `PERIOD` (the last args win)")
	fs.DurationVar(&f.maxWait, "max-wait", 0, "with --debounce: the longest the job waits after its key's first enqueue (default 10 × the period)")
	fs.StringVar(&f.throttle, "throttle", "", "drop the enqueues of the key beyond `N/PERIOD` (for example 10/1m)")
	fs.StringVar(&f.key, "dedup-key", "", "the key of --unique, --debounce or --throttle (default: derived from the args)")
	fs.StringSliceVar(&f.fields, "dedup-fields", nil, "the top-level args `FIELDS` the derived key covers (comma-separated)")
}

// rule returns the rule the flags ask for, nil for none, or a usage error.
func (f *dedupFlags) rule(cmd *cobra.Command) (dedup.Rule, error) {
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	var chosen []string
	for _, n := range []string{"unique", "debounce", "throttle"} {
		if set(n) {
			chosen = append(chosen, "--"+n)
		}
	}
	if len(chosen) > 1 {
		return nil, &usageError{fmt.Errorf("%s: choose one deduplication rule", strings.Join(chosen, " and "))}
	}
	for _, only := range []struct{ flag, needs string }{{"unique-while", "unique"}, {"max-wait", "debounce"}} {
		if set(only.flag) && !set(only.needs) {
			return nil, &usageError{fmt.Errorf("--%s goes with --%s", only.flag, only.needs)}
		}
	}
	if len(chosen) == 0 {
		if set("dedup-key") || set("dedup-fields") {
			return nil, &usageError{errors.New("--dedup-key and --dedup-fields go with --unique, --debounce or --throttle")}
		}
		return nil, nil
	}
	if set("dedup-key") && f.key == "" {
		return nil, &usageError{errors.New("--dedup-key is empty: leave it out to derive the key from the args")}
	}
	switch {
	case set("unique"):
		u := dedup.Unique{Key: f.key, Fields: f.fields, Window: f.unique}
		switch f.uniqueWhile {
		case "any":
		case "active":
			u.States = dedup.WhileActive
		default:
			return nil, &usageError{fmt.Errorf("--unique-while %q: want any or active", f.uniqueWhile)}
		}
		return u, nil
	case set("debounce"):
		return dedup.Debounce{Key: f.key, Fields: f.fields, Period: f.debounce, MaxWait: f.maxWait}, nil
	}
	limit, period, err := parseThrottle(f.throttle)
	if err != nil {
		return nil, &usageError{err}
	}
	return dedup.Throttle{Key: f.key, Fields: f.fields, Limit: limit, Period: period}, nil
}

// parseThrottle reads --throttle's N/PERIOD.
func parseThrottle(s string) (int, time.Duration, error) {
	n, p, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("--throttle %q: want N/PERIOD, such as 10/1m", s)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return 0, 0, fmt.Errorf("--throttle %q: %q is not a whole number of enqueues", s, n)
	}
	period, err := time.ParseDuration(strings.TrimSpace(p))
	if err != nil {
		return 0, 0, fmt.Errorf("--throttle %q: %q is not a duration such as 1m or 1h", s, p)
	}
	return limit, period, nil
}

// dedupJSON is what enqueue --output json adds for a deduplication rule.
type dedupJSON struct {
	// Outcome is enqueued, duplicate, debounced or throttled.
	Outcome string `json:"outcome"`
	// RuleKey is the key the rule applied to (derived ones start with "args:").
	RuleKey string `json:"rule_key"`
	// State is the holding job's state when a duplicate was judged by its record.
	State string `json:"state,omitempty"`
	// Events is how many enqueues a debounced job has gathered.
	Events int `json:"events,omitempty"`
	// Count and Limit are a throttled key's enqueues in the period, and its limit.
	Count int `json:"count,omitempty"`
	Limit int `json:"limit,omitempty"`
}

// enqueueDeduped enqueues under rule through a dedup.Enqueuer on the stack's job table, and
// prints what became of the job.
func enqueueDeduped(ctx context.Context, cmd *cobra.Command, g *globals, c *awsClients, refs *stackRefs, p *producer.Producer,
	table *status.Table, sc *schedule.Client, kind string, raw []byte, rule dedup.Rule, opts []producer.Option) error {
	cfg := dedup.Config{Producer: p, DynamoDB: c.ddb, Table: refs.Table, Jobs: table, LocalScheduler: c.local}
	if sc != nil {
		cfg.Scheduler = sc
	}
	enq, err := dedup.New(cfg)
	if err != nil {
		return err
	}
	res, err := enq.EnqueueRaw(ctx, kind, json.RawMessage(raw), rule, opts...)
	var te *dedup.ThrottledError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("throttled: %s reached its limit of %d per %v; nothing was sent (the period ends at %s)", rulesKey(te.Key, kind), te.Limit, te.Period, showTime(te.RetryAt))
	case errors.Is(err, dedup.ErrInvalid):
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "dedup: "), "producer: ")
		return &usageError{errors.New(flagWords.Replace(msg))}
	case err != nil:
		return err
	}
	doc := enqueueJSON{
		JobID: res.ID, Kind: res.Kind, Key: res.Key, MessageID: res.MessageID, SequenceNumber: res.SequenceNumber,
		Queue: refs.QueueName, Recorded: res.Outcome == dedup.Enqueued && res.StatusErr == nil,
		Dedup: &dedupJSON{Outcome: string(res.Outcome), RuleKey: res.RuleKey, State: string(res.State), Events: res.Events, Count: res.Count, Limit: res.Limit},
	}
	if res.Outcome == dedup.Debounced {
		doc.ScheduledAt, doc.Schedule = jsonTime(res.RunAt), res.Schedule
		if sc != nil {
			doc.ScheduleGroup = sc.Group()
		}
	}
	if res.StatusErr != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "sqsworker: warning: the job was enqueued, but not recorded as queued: %s\n", errorText(res.StatusErr))
	}
	if g.json() {
		return writeJSON(cmd.OutOrStdout(), doc)
	}
	return writeDedupTable(cmd.OutOrStdout(), doc, refs.Table)
}

// flagWords turns the library's names of rule fields and producer options into the flags that
// set them.
var flagWords = strings.NewReplacer(
	"Unique.Window", "--unique", "Unique.Key", "--dedup-key", "Unique.Fields", "--dedup-fields", "Unique.States", "--unique-while",
	"Debounce.Period", "--debounce", "Debounce.MaxWait", "--max-wait", "Debounce.Key", "--dedup-key", "Debounce.Fields", "--dedup-fields",
	"Throttle.Limit", "--throttle's N", "Throttle.Period", "--throttle's PERIOD", "Throttle.Key", "--dedup-key", "Throttle.Fields", "--dedup-fields",
	"producer.WithDelay or WithRunAt", "--delay", "producer.WithKey", "--key", "producer.WithDeduplicationID", "a deduplication id",
	"Config.RecordTTL", "the record TTL", "Debounce with", "--debounce with", "Unique on", "--unique on",
	"Config.LocalScheduler with the local dispatcher", "the emulator",
)

// rulesKey names a rule's key in messages: the kind alone when the key is empty.
func rulesKey(key, kind string) string {
	if key == "" {
		return "kind " + safe(kind) + " (no key of its own)"
	}
	return "key " + safe(key)
}

// writeDedupTable prints enqueue's table output for a job enqueued under a rule.
func writeDedupTable(w io.Writer, doc enqueueJSON, table string) error {
	d := doc.Dedup
	tw := newTable(w)
	switch dedup.Outcome(d.Outcome) {
	case dedup.Duplicate:
		state := ""
		if d.State != "" {
			state = " (" + safe(d.State) + ")"
		}
		fmt.Fprintf(tw, "duplicate\t%s: nothing sent; the unique key is held by job %s%s\n", safe(doc.Kind), safe(doc.JobID), state)
	case dedup.Debounced:
		fmt.Fprintf(tw, "debounced\t%s: %d enqueue(s) of the key so far; the last args win\n", safe(doc.Kind), d.Events)
	default:
		fmt.Fprintf(tw, "enqueued\t%s on %s\n", safe(doc.Kind), safe(doc.Queue))
	}
	fmt.Fprintf(tw, "job id\t%s\n", safe(doc.JobID))
	fmt.Fprintf(tw, "key\t%s\n", safe(doc.Key))
	if d.RuleKey == "" {
		fmt.Fprintf(tw, "rule key\t- (the kind alone)\n")
	} else {
		fmt.Fprintf(tw, "rule key\t%s\n", safe(d.RuleKey))
	}
	switch {
	case doc.Schedule != "":
		fmt.Fprintf(tw, "runs at\t%s (schedule %s in group %s), unless another enqueue of the key moves it\n",
			showTime(time.Time(doc.ScheduledAt)), safe(doc.Schedule), safe(doc.ScheduleGroup))
	case doc.MessageID != "":
		fmt.Fprintf(tw, "message id\t%s\n", safe(doc.MessageID))
	}
	if d.Limit > 0 {
		fmt.Fprintf(tw, "throttle\t%d of %d in this period\n", d.Count, d.Limit)
	}
	if doc.Recorded {
		fmt.Fprintf(tw, "recorded\tqueued, in table %s\n", safe(table))
	}
	return tw.Flush()
}
