package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newRunCmd is a placeholder, replaced by the real command.
func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "run", Short: "Run a Lambda function locally against a stack's queue", Hidden: true,
		RunE: func(*cobra.Command, []string) error { return errors.New("not implemented yet") }}
}
