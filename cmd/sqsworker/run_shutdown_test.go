package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// buildCLI builds this command into dir and returns the executable's path.
func buildCLI(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "sqsworker")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, b)
	}
	return bin
}

// procStat is a process's parent and process group, from /proc/<pid>/stat.
func procStat(pid int) (ppid, pgid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 3 || f[0] == "Z" {
		return 0, 0, false // a zombie is dead
	}
	ppid, _ = strconv.Atoi(f[1])
	pgid, _ = strconv.Atoi(f[2])
	return ppid, pgid, true
}

// descendants returns the live processes under pid, children first.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, _, ok := procStat(p); ok {
			parent[p] = pp
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		next := frontier[0]
		frontier = frontier[1:]
		for p, pp := range parent {
			if pp == next {
				out = append(out, p)
				frontier = append(frontier, p)
			}
		}
	}
	return out
}

// TestRunStopsCleanlyWhateverStdoutIs: `sqsworker run` (the built binary) with its output into a
// pipe whose reader has gone (`run … | tee log` after a Ctrl-C, which ends tee too) stops as it
// does on a terminal: exit status 0, not death by SIGPIPE; the RIE and the bootstrap, each in a
// process group of its own, stopped and reaped; the build's temporary directory removed; and,
// where stderr still has a reader, "stopped" said there. It used to die of SIGPIPE, leaving the
// directory (22 MB) and, once, the RIE and the bootstrap running under init.
func TestRunStopsCleanlyWhateverStdoutIs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("processes are found under /proc")
	}
	t.Parallel()
	bin := buildCLI(t, t.TempDir())
	for _, tt := range []struct {
		name string
		// both sends stderr into the pipe too (`2>&1 | tee log`); otherwise stderr is a file.
		both bool
	}{
		{"stdout and stderr into a closed pipe", true},
		{"stdout into a closed pipe, stderr to a file", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir() // run's TMPDIR: where its build goes
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer errFile.Close()
			cmd := exec.Command(bin, "run", "--stack", awslocal.UniqueName("cli-pipe"), "--port", "0",
				"--function", "./internal/lambdarun/testdata/echofn")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			cmd.Stdout, cmd.Stderr = pw, errFile
			if tt.both {
				cmd.Stderr = pw
			}
			// Its own process group, as a shell pipeline's, which the terminal's Ctrl-C reaches.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				select {
				case <-exited:
				default:
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
			}()

			// Read what it says until it runs: the running line is on stderr.
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(pr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			running := func() bool {
				if tt.both {
					for {
						select {
						case l, ok := <-lines:
							if !ok {
								return false
							}
							if strings.HasPrefix(l, "running ") {
								return true
							}
						default:
							return false
						}
					}
				}
				b, _ := os.ReadFile(errFile.Name())
				return strings.HasPrefix(string(b), "running ") || strings.Contains(string(b), "\nrunning ")
			}
			waitFor(t, 120*time.Second, "the running line", func() bool {
				select {
				case err := <-exited:
					b, _ := os.ReadFile(errFile.Name())
					t.Fatalf("run exited early: %v\n%s", err, b)
				default:
				}
				return running()
			})
			builds, _ := filepath.Glob(filepath.Join(tmp, "sqsworker-run-*"))
			if len(builds) != 1 {
				t.Errorf("run's build directories in TMPDIR: %v, want one while it runs", builds)
			}
			// The function's processes: the RIE (a child of run) and the bootstrap (the RIE's),
			// started by an invoke.
			kids := descendants(cmd.Process.Pid)
			if len(kids) == 0 {
				t.Fatal("run has no child process")
			}
			for _, k := range kids {
				if _, pgid, ok := procStat(k); ok && pgid == cmd.Process.Pid {
					t.Errorf("process %d is in run's process group: a Ctrl-C would reach it", k)
				}
			}

			// The reader goes (tee ended by the Ctrl-C), then the Ctrl-C reaches run's group.
			pr.Close()
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			var werr error
			select {
			case werr = <-exited:
			case <-time.After(60 * time.Second):
				t.Fatal("run did not exit within 60s of SIGINT")
			}
			var ee *exec.ExitError
			if werr != nil && errors.As(werr, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					t.Errorf("run died of %v", ws.Signal())
				}
			}
			if code := cmd.ProcessState.ExitCode(); code != exitOK {
				t.Errorf("exit status %d (%v), want 0", code, werr)
			}
			for _, k := range kids {
				if _, _, ok := procStat(k); ok {
					t.Errorf("process %d (started by run) is alive after it exited", k)
					_ = syscall.Kill(k, syscall.SIGKILL)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "sqsworker-run-*")); len(left) > 0 {
				t.Errorf("run left %v", left)
			}
			if !tt.both {
				b, _ := os.ReadFile(errFile.Name())
				if !strings.HasSuffix(string(b), "stopped\n") {
					t.Errorf("stderr does not end with stopped:\n%s", b)
				}
				if strings.Contains(string(b), "SandboxTerminated") {
					t.Errorf("stderr has the RIE's warning about the stop run caused:\n%s", b)
				}
			}
		})
	}
}
