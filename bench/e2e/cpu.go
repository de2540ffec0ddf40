package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPUTime returns the CPU time process pid has used so far (0: this process), summed over its
// threads from /proc/<pid>/task/*/schedstat, whose first field is the nanoseconds a thread ran
// (nanosecond precision, where /proc/<pid>/stat counts clock ticks of 10 ms). Threads that have
// exited are not counted; Go processes rarely end threads.
func CPUTime(pid int) (time.Duration, error) {
	dir := "/proc/self/task"
	if pid > 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("e2e: CPU time of %s: %w", dir, err)
	}
	var total time.Duration
	read := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		ns, err := parseSchedstat(string(b))
		if err != nil {
			return 0, fmt.Errorf("e2e: %s/%s/schedstat: %w", dir, task.Name(), err)
		}
		total += ns
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("e2e: no readable schedstat under %s", dir)
	}
	return total, nil
}

// parseSchedstat reads the first field of a schedstat line ("<run ns> <wait ns> <slices>").
func parseSchedstat(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) < 1 {
		return 0, fmt.Errorf("empty schedstat %q", s)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("schedstat %q: want nanoseconds first", s)
	}
	return time.Duration(ns), nil
}

// LoadAverage returns the first three fields of /proc/loadavg ("1.23 0.98 0.50").
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}
