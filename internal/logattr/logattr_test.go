package logattr_test

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/internal/logattr"
)

func TestDurationText(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: logattr.DurationText}))
	log.Info("job", slog.Duration("visibility", 2307255417*time.Nanosecond), slog.Any("backoff", 150*time.Millisecond),
		slog.Group("batch", slog.Duration("window", 0), slog.Int("size", 10)), slog.String("id", "j1"))
	got := buf.String()
	for _, want := range []string{`"visibility":"2.307255417s"`, `"backoff":"150ms"`, `"batch":{"window":"0s","size":10}`, `"id":"j1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log line lacks %s:\n%s", want, got)
		}
	}
}

func ExampleDurationText() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // a fixed output for the example
			}
			return logattr.DurationText(groups, a)
		},
	}))
	log.Info("job succeeded", slog.Duration("duration", 1500*time.Millisecond))
	// Output: {"level":"INFO","msg":"job succeeded","duration":"1.5s"}
}
