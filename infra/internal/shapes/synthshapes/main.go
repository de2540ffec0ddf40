// Command synthshapes synthesizes every stack shape of package shapes into a directory, for
// cfn-lint (make infra-lint). Run it from infra/: go run ./internal/shapes/synthshapes -out DIR.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/internal/shapes"
	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

func main() {
	out := flag.String("out", "", "directory to write the templates to (required)")
	cdkJSON := flag.String("cdk-json", "cdk.json", "the cdk.json whose feature flags the app uses")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "synthshapes: -out DIR is required")
		os.Exit(2)
	}
	if err := run(*out, *cdkJSON); err != nil {
		fmt.Fprintln(os.Stderr, "synthshapes:", err)
		os.Exit(1)
	}
}

func run(out, cdkJSON string) error {
	defer jsii.Close()
	// The templates reference the worker asset by hash only; a stub zip is enough to lint them.
	asset, cleanup, err := testasset.Setup()
	if err != nil {
		return err
	}
	defer cleanup()
	results, err := shapes.Synth(out, cdkJSON, asset, nil)
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Println(r.Path)
	}
	return nil
}
