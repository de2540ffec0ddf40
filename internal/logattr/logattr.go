// Package logattr holds the slog attribute rewriting the programs' handlers share.
package logattr

import "log/slog"

// DurationText is a slog.HandlerOptions.ReplaceAttr that writes every time.Duration as its text,
// such as "2.307s" or "150ms", where slog.JSONHandler writes a count of nanoseconds
// ("visibility":2307255417): log lines are read by people first. It leaves every other attribute
// as it is, in groups too.
func DurationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
