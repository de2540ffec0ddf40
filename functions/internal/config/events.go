package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Environment variables of the completion events function (functions/events).
const (
	EnvEventBus    = "SQSWORKER_EVENT_BUS"
	EnvEventSource = "SQSWORKER_EVENT_SOURCE"
)

// Events is the completion events function's configuration.
type Events struct {
	// EventBus is the name or ARN of the EventBridge bus the events go to. Defaults to
	// "default", the account's default bus.
	EventBus string
	// Source is the events' source. Defaults to "sqsworker".
	Source string
	// LogLevel is the level of the JSON log on stderr. Defaults to info.
	LogLevel slog.Level
}

// LoadEvents reads the events function's settings with getenv (os.Getenv in main). The error
// joins one line per invalid setting.
func LoadEvents(getenv func(string) string) (Events, error) {
	var errs []error
	c := Events{
		EventBus: strings.TrimSpace(getenv(EnvEventBus)),
		Source:   strings.TrimSpace(getenv(EnvEventSource)),
		LogLevel: logLevel(getenv, &errs),
	}
	if c.EventBus == "" {
		c.EventBus = "default"
	}
	if len(c.EventBus) > 1600 || !strings.HasPrefix(c.EventBus, "arn:") && !isName(c.EventBus, 1, 256) {
		errs = append(errs, fmt.Errorf("%s=%q is not an event bus name (1–256 of [a-zA-Z0-9_.-]) or ARN", EnvEventBus, c.EventBus))
	}
	if c.Source == "" {
		c.Source = "sqsworker"
	}
	if len(c.Source) > 256 || strings.HasPrefix(c.Source, "aws.") {
		errs = append(errs, fmt.Errorf("%s=%q: at most 256 characters, not starting with \"aws.\" (EventBridge keeps those)", EnvEventSource, c.Source))
	}
	return c, errors.Join(errs...)
}
