//go:build !linux

package lambdarun

// process is a child process of the RIE; only Linux finds them (under /proc).
type process struct{}

// childProcesses finds no process off Linux: there the RIE's own stop (on SIGTERM) is what
// ends the bootstrap.
func childProcesses(int) []process { return nil }

func (process) killGroup() {}
