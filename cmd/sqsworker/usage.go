package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
)

// writeUsage is every command's usage text (cobra's layout: usage lines, examples, commands,
// flags). It is Go code, not a cobra usage template, on purpose: a template is executed by
// text/template, whose field lookup calls reflect's MethodByName with a name known only at run
// time, and a program that can reach that keeps every exported method of every type it uses (the
// linker's dead code elimination gives up): 14 MB of the CLI's 52 (docs/BENCHMARKS.md, "The CLI
// binary"). TestCLIBinarySize keeps it out.
//
// A command group (the root included) runs only to print its help, so its usage line is
// "sqsworker dlq [command]" alone, without the "sqsworker dlq [flags]" of a runnable command.
func writeUsage(w io.Writer, c *cobra.Command) {
	var b strings.Builder
	b.WriteString("Usage:")
	group := c.HasAvailableSubCommands()
	if c.Runnable() && !group {
		b.WriteString("\n  " + c.UseLine())
	}
	if group {
		b.WriteString("\n  " + c.CommandPath() + " [command]")
	}
	if c.HasExample() {
		b.WriteString("\n\nExamples:\n" + c.Example)
	}
	if group {
		b.WriteString("\n\nAvailable Commands:")
		for _, sub := range c.Commands() {
			if listed(sub) {
				fmt.Fprintf(&b, "\n  %-*s %s", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		b.WriteString("\n\nFlags:\n" + strings.TrimRightFunc(c.LocalFlags().FlagUsages(), unicode.IsSpace))
	}
	if c.HasAvailableInheritedFlags() {
		b.WriteString("\n\nGlobal Flags:\n" + strings.TrimRightFunc(c.InheritedFlags().FlagUsages(), unicode.IsSpace))
	}
	if group {
		fmt.Fprintf(&b, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	b.WriteString("\n")
	_, _ = io.WriteString(w, b.String())
}

// listed reports whether a group's usage names the subcommand: cobra's rule (available, and
// its help command).
func listed(sub *cobra.Command) bool {
	return sub.IsAvailableCommand() || sub.Name() == "help"
}
