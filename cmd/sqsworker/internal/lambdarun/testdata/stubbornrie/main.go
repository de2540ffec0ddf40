// Command stubbornrie stands in for the RIE in tests of the pool's stop: it listens on its
// --runtime-interface-emulator-address, starts a child in a process group of the child's own at
// once (as the RIE starts the bootstrap), prints the child's pid, and ignores SIGTERM, so that
// only SIGKILL ends it and its child is left behind unless the pool kills that group too.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "child" {
		select {} // until killed
	}
	addr := flag.String("runtime-interface-emulator-address", "", "")
	flag.String("runtime-api-address", "", "")
	flag.String("log-level", "", "")
	flag.Parse()
	signal.Ignore(syscall.SIGTERM)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	child := exec.Command(self, "child")
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("child %d\n", child.Process.Pid)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Close()
	}
}
