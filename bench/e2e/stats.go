package e2e

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqsworker/sqsworker/internal/testenv/awscost"
)

// Run is one timed run of a scenario.
type Run struct {
	// Scenario names what ran ("raw", "floor", "poller", "idem"); Batches how many batches were
	// handled at the same time; Round the repetition it belongs to.
	Scenario string
	Batches  int
	Round    int
	// Jobs is how many messages were consumed (deleted) in Elapsed.
	Jobs    int
	Elapsed time.Duration
	// ClientCPU and EmulatorCPU are the CPU time the benchmark process and the emulator process
	// spent during the run.
	ClientCPU, EmulatorCPU time.Duration
	// Calls are the AWS calls made during the run, per "service.Operation".
	Calls map[string]int64
}

// JobsPerSecond is the run's throughput.
func (r Run) JobsPerSecond() float64 { return float64(r.Jobs) / r.Elapsed.Seconds() }

// ClientMicros is the client CPU per job, in µs.
func (r Run) ClientMicros() float64 { return micros(r.ClientCPU) / float64(r.Jobs) }

// EmulatorMicros is the emulator CPU per job, in µs.
func (r Run) EmulatorMicros() float64 { return micros(r.EmulatorCPU) / float64(r.Jobs) }

// CallsPerJob is the calls per job of the operations starting with prefix ("dynamodb.", "sqs.").
func (r Run) CallsPerJob(prefix string) float64 {
	return float64(awscost.Sum(r.Calls, prefix)) / float64(r.Jobs)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Median returns the median of xs (the mean of the middle two for an even count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Comparison is a scenario measured against a reference scenario at the same batch count.
type Comparison struct {
	Scenario, Reference string
	Batches             int
	// Throughput, ClientCPU and EmulatorCPU are the medians, over the rounds, of the ratios of
	// the scenario's jobs/s and CPU per job to the reference's in the same round.
	Throughput, ClientCPU, EmulatorCPU float64
	// Rounds is how many rounds had both.
	Rounds int
}

// Compare returns the comparison of scenario to reference at batches, from the runs of each
// round that ran both.
func Compare(runs []Run, scenario, reference string, batches int) Comparison {
	c := Comparison{Scenario: scenario, Reference: reference, Batches: batches}
	byRound := map[int]map[string]Run{}
	for _, r := range runs {
		if r.Batches != batches || (r.Scenario != scenario && r.Scenario != reference) {
			continue
		}
		if byRound[r.Round] == nil {
			byRound[r.Round] = map[string]Run{}
		}
		byRound[r.Round][r.Scenario] = r
	}
	var tp, cc, ec []float64
	for _, m := range byRound {
		s, ok1 := m[scenario]
		ref, ok2 := m[reference]
		if !ok1 || !ok2 {
			continue
		}
		tp = append(tp, s.JobsPerSecond()/ref.JobsPerSecond())
		cc = append(cc, s.ClientMicros()/ref.ClientMicros())
		ec = append(ec, s.EmulatorMicros()/ref.EmulatorMicros())
	}
	c.Rounds = len(tp)
	c.Throughput, c.ClientCPU, c.EmulatorCPU = Median(tp), Median(cc), Median(ec)
	return c
}

// Summary is the medians of one scenario's runs at one batch count.
type Summary struct {
	Scenario                                    string
	Batches, Runs                               int
	JobsPerSecond, ClientMicros, EmulatorMicros float64
	DynamoDBCalls, SQSCalls                     float64
}

// Summarize returns the medians of runs per scenario and batch count, in the order the
// scenarios first appear.
func Summarize(runs []Run) []Summary {
	type key struct {
		s string
		b int
	}
	var order []key
	groups := map[key][]Run{}
	for _, r := range runs {
		k := key{r.Scenario, r.Batches}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Summary
	for _, k := range order {
		g := groups[k]
		med := func(f func(Run) float64) float64 {
			xs := make([]float64, len(g))
			for i, r := range g {
				xs[i] = f(r)
			}
			return Median(xs)
		}
		out = append(out, Summary{
			Scenario: k.s, Batches: k.b, Runs: len(g),
			JobsPerSecond: med(Run.JobsPerSecond), ClientMicros: med(Run.ClientMicros), EmulatorMicros: med(Run.EmulatorMicros),
			DynamoDBCalls: med(func(r Run) float64 { return r.CallsPerJob("dynamodb.") }),
			SQSCalls:      med(func(r Run) float64 { return r.CallsPerJob("sqs.") }),
		})
	}
	return out
}

// PrintRuns writes one line per run.
func PrintRuns(w io.Writer, runs []Run) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tscenario\tbatches\tjobs\tseconds\tjobs/s\tclient µs/job\temulator µs/job\tcalls\t")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.3f\t%.0f\t%.1f\t%.1f\t%s\t\n", r.Round, r.Scenario, r.Batches, r.Jobs,
			r.Elapsed.Seconds(), r.JobsPerSecond(), r.ClientMicros(), r.EmulatorMicros(), awscost.Format(r.Calls))
	}
	tw.Flush()
}

// PrintSummaries writes the medians, one line per scenario and batch count; units gives the
// DynamoDB write units per job measured for a scenario, if any.
func PrintSummaries(w io.Writer, sums []Summary, units map[string]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tbatches\truns\tjobs/s\tclient µs/job\temulator µs/job\tDynamoDB calls/job\tSQS calls/job\tDynamoDB WRU/job\t")
	for _, s := range sums {
		u := units[s.Scenario]
		if u == "" {
			u = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.3f\t%.3f\t%s\t\n", s.Scenario, s.Batches, s.Runs, s.JobsPerSecond,
			s.ClientMicros, s.EmulatorMicros, s.DynamoDBCalls, s.SQSCalls, u)
	}
	tw.Flush()
}

// PrintComparisons writes the ratios.
func PrintComparisons(w io.Writer, cs []Comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\t÷ reference\tbatches\trounds\tjobs/s ratio\tclient CPU/job ratio\temulator CPU/job ratio\t")
	for _, c := range cs {
		if c.Rounds == 0 {
			continue // not run (BENCH_E2E_ONLY)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t\n", c.Scenario, c.Reference, c.Batches, c.Rounds,
			c.Throughput, c.ClientCPU, c.EmulatorCPU)
	}
	tw.Flush()
}

// header is a line of '=' under a title.
func header(title string) string { return title + "\n" + strings.Repeat("=", len([]rune(title))) }
