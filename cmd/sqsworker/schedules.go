package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSchedulesCmd is a placeholder, replaced by the real command.
func newSchedulesCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "schedules", Short: "List, show and delete a stack's recurring schedules", Hidden: true,
		RunE: func(*cobra.Command, []string) error { return errors.New("not implemented yet") }}
}
