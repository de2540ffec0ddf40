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
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
	<-ctx.Done()
	b.Close()
}
