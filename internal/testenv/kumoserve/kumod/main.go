// Command kumod serves the emulator (kumo's own server, the code `kumo serve` runs) as a process
// of its own on a loopback port, until SIGTERM or SIGINT:
//
//	kumod serve --host 127.0.0.1 --port 4566
//
// It takes the same arguments as `kumo serve`, so package kumoserve runs either. kumoserve builds
// it when no kumo binary of the version go.mod requires is installed: it compiles from packages
// this module's tests compile anyway (seconds), where building kumo's own command line in its
// own module downloads and compiles another set of dependencies (minutes on a fresh machine).
// It reaches kumo's server through the embedded emulator of pkg/awslocal, which forwards the port
// to it.
//
// Like `kumo serve`, it serves Go's profiles (net/http/pprof) when KUMO_PPROF is true, on
// KUMO_PPROF_ADDR (default 127.0.0.1:6060), for the end-to-end benchmark's emulator profiles.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("kumod", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1", "listen address (loopback only)")
	port := fs.Int("port", 4566, "listen port")
	_ = fs.Parse(args)
	if *host != "127.0.0.1" && *host != "localhost" {
		fmt.Fprintf(os.Stderr, "kumod: --host %s: only the loopback address is served\n", *host)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b, err := awslocal.Start(ctx, awslocal.Options{Backend: awslocal.Embedded, Port: *port})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kumod:", err)
		os.Exit(1)
	}
	fmt.Println("kumod: serving", b.URL)
	if on, _ := strconv.ParseBool(os.Getenv("KUMO_PPROF")); on {
		servePprof(os.Getenv("KUMO_PPROF_ADDR"))
	}
	<-ctx.Done()
	b.Close()
}

// servePprof serves /debug/pprof/ on addr (a loopback address; default 127.0.0.1:6060) in the
// background.
func servePprof(addr string) {
	if addr == "" {
		addr = "127.0.0.1:6060"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kumod: pprof:", err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Println("kumod: pprof on", ln.Addr())
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(ln) }()
}
