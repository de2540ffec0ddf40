package lambdarun

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// process is a process found under /proc: its id and its start time (in clock ticks since
// boot), which tells it apart from a later process given the same id.
type process struct {
	pid   int
	start uint64
}

// childProcesses returns the live children of ppid (read from /proc/<pid>/stat).
func childProcesses(ppid int) []process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, start, ok := readStat(pid); ok && parent == ppid {
			kids = append(kids, process{pid: pid, start: start})
		}
	}
	return kids
}

// readStat returns the parent and the start time of pid.
func readStat(pid int) (ppid int, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid pgrp … starttime …": comm may hold spaces and parentheses, so the
	// fields are counted after the last ')'; starttime is field 22, the 20th after comm.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	return ppid, start, err1 == nil && err2 == nil
}

// killGroup kills the process group p leads (the RIE starts its bootstrap as the leader of a
// group of its own), if p is still the same process; a process already gone, or an id now
// taken by another process, is left alone.
func (p process) killGroup() {
	if _, start, ok := readStat(p.pid); !ok || start != p.start {
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}
