package e2e

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 {
		t.Error("Median sorted its argument")
	}
}

func run(round int, scenario string, batches int, jobs int, secs float64, client, emu time.Duration, ddb int64) Run {
	return Run{Scenario: scenario, Batches: batches, Round: round, Jobs: jobs, Elapsed: time.Duration(secs * float64(time.Second)),
		ClientCPU: client, EmulatorCPU: emu, Calls: map[string]int64{"dynamodb.PutItem": ddb, "sqs.ReceiveMessage": int64(jobs / 10)}}
}

func TestCompareUsesRatiosOfTheSameRound(t *testing.T) {
	runs := []Run{
		// Round 1 is twice as fast as round 2 for both: the ratios stay the same.
		run(1, "raw", 4, 1000, 1, 100*time.Millisecond, 50*time.Millisecond, 0),
		run(1, "poller", 4, 1000, 1.25, 150*time.Millisecond, 60*time.Millisecond, 0),
		run(2, "raw", 4, 1000, 2, 200*time.Millisecond, 100*time.Millisecond, 0),
		run(2, "poller", 4, 1000, 2.5, 300*time.Millisecond, 120*time.Millisecond, 0),
		run(3, "raw", 4, 1000, 1, 100*time.Millisecond, 50*time.Millisecond, 0), // no poller run in round 3
		run(1, "poller", 1, 1000, 9, time.Second, time.Second, 0),               // another batch count
	}
	c := Compare(runs, "poller", "raw", 4)
	if c.Rounds != 2 {
		t.Fatalf("rounds = %d, want 2", c.Rounds)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(c.Throughput, 0.8) || !near(c.ClientCPU, 1.5) || !near(c.EmulatorCPU, 1.2) {
		t.Errorf("ratios = %+v, want throughput 0.8, client 1.5, emulator 1.2", c)
	}
}

func TestSummarize(t *testing.T) {
	runs := []Run{
		run(1, "idem", 1, 100, 1, 50*time.Millisecond, 30*time.Millisecond, 200),
		run(2, "idem", 1, 100, 3, 70*time.Millisecond, 10*time.Millisecond, 200),
		run(3, "idem", 1, 100, 2, 60*time.Millisecond, 20*time.Millisecond, 200),
		run(1, "raw", 1, 100, 1, 10*time.Millisecond, 10*time.Millisecond, 0),
	}
	sums := Summarize(runs)
	if len(sums) != 2 || sums[0].Scenario != "idem" || sums[1].Scenario != "raw" {
		t.Fatalf("summaries = %+v", sums)
	}
	s := sums[0]
	if s.Runs != 3 || s.JobsPerSecond != 50 || s.ClientMicros != 600 || s.EmulatorMicros != 200 || s.DynamoDBCalls != 2 || s.SQSCalls != 0.1 {
		t.Errorf("idem summary = %+v", s)
	}
	var b bytes.Buffer
	PrintSummaries(&b, sums, map[string]string{"idem": "2.00"})
	PrintRuns(&b, runs)
	PrintComparisons(&b, []Comparison{Compare(runs, "idem", "raw", 1)})
	out := b.String()
	for _, want := range []string{"DynamoDB WRU/job", "2.00", "dynamodb.PutItem=200", "jobs/s ratio"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCPUTime(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc on this system")
	}
	before, err := CPUTime(0)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the process has used 20 ms more CPU, with a generous wall-clock bound.
	deadline := time.Now().Add(30 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		now, err := CPUTime(0)
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 20*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time grew by %v only in 30 s of spinning", now-before)
		}
	}
	_ = x
	if _, err := CPUTime(os.Getpid()); err != nil {
		t.Errorf("CPUTime(own pid): %v", err)
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Error("CPUTime of a pid that does not exist: no error")
	}
}

func TestParseSchedstat(t *testing.T) {
	if d, err := parseSchedstat("103392935 48051316 382\n"); err != nil || d != 103392935 {
		t.Errorf("parseSchedstat = %v, %v", d, err)
	}
	for _, bad := range []string{"", "x 1 2", "-5 1 2"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat(%q) accepted", bad)
		}
	}
	if la := LoadAverage(); len(strings.Fields(la)) != 3 && la != "unknown" {
		t.Errorf("LoadAverage = %q", la)
	}
}
