// Command kumobin finds or builds the kumo binary that package kumoserve runs as a server (the
// version go.mod requires; see its documentation for where it looks) and prints its path. `make
// kumo` runs it before the tests, so that a first build, a few minutes on a fresh machine, does
// not count against go test's timeout.
package main

import (
	"fmt"
	"os"

	"github.com/sqsworker/sqsworker/internal/kumoserve"
)

func main() {
	path, err := kumoserve.Binary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kumobin:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
