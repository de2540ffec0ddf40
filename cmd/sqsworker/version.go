package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// versionJSON is sqsworker version's --output json document: every key is always present.
type versionJSON struct {
	// Version is the module's version as the build recorded it: a tag such as v1.4.0 (go
	// install …@v1.4.0), a pseudo-version, or "(devel)" for a build from a checkout.
	Version string `json:"version"`
	Module  string `json:"module"`
	Go      string `json:"go"`
	// Revision is the VCS commit the binary was built from ("" when the build recorded none:
	// go install of a module version, go run, -buildvcs=false), Time its commit time, Modified
	// whether the work tree had uncommitted changes.
	Revision string   `json:"revision"`
	Time     jsonTime `json:"time"`
	Modified bool     `json:"modified"`
	Platform string   `json:"platform"`
}

// readVersion reads what the Go toolchain recorded in the binary (debug.ReadBuildInfo).
func readVersion(bi *debug.BuildInfo, ok bool) versionJSON {
	v := versionJSON{Version: "(unknown)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	v.Module = bi.Main.Path
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			var t jsonTime
			if t.UnmarshalJSON([]byte(`"`+s.Value+`"`)) == nil {
				v.Time = t
			}
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// line is the one-line form: "sqsworker v1.4.0 (abc1234, go1.26.8 linux/amd64)".
func (v versionJSON) line() string {
	rev := "no revision recorded"
	if v.Revision != "" {
		rev = v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if v.Modified {
			rev += ", modified"
		}
	}
	return fmt.Sprintf("sqsworker %s (%s, %s %s)", v.Version, rev, v.Go, v.Platform)
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the Go version and the commit sqsworker was built from",
		Long: `version prints what the Go toolchain recorded in this binary: the module's version (a tag
such as v1.4.0 for 'go install …@v1.4.0', "(devel)" for a build from a checkout), the Go
version, the platform, and the VCS revision and commit time of a build from a checkout (with
"modified" when the work tree had uncommitted changes). 'sqsworker --version' prints the
first line alone.`,
		Example: `  sqsworker version
  sqsworker version --output json | jq -r .revision`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion(debug.ReadBuildInfo())
			out := cmd.OutOrStdout()
			if g.json() {
				return writeJSON(out, v)
			}
			tw := newTable(out)
			fmt.Fprintln(tw, v.line())
			fmt.Fprintf(tw, "version\t%s\n", safe(v.Version))
			fmt.Fprintf(tw, "module\t%s\n", orDash(v.Module))
			fmt.Fprintf(tw, "go\t%s\n", safe(v.Go))
			fmt.Fprintf(tw, "platform\t%s\n", v.Platform)
			rev := orDash(v.Revision)
			if v.Modified {
				rev += " (modified)"
			}
			fmt.Fprintf(tw, "revision\t%s\n", rev)
			fmt.Fprintf(tw, "committed\t%s\n", showTime(time.Time(v.Time)))
			return tw.Flush()
		},
	}
}
