package queues

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Spec describes a queue to create, as the CLI's --queue flag writes it:
//
//	name[:option,option…]
//
// with the options weight=N (the poller's weight, 1–1,000), fifo (a FIFO queue), visibility=D
// (the queue's visibility timeout, a Go duration of whole seconds, 0s–12h) and max-receive=N
// (its redrive policy's maxReceiveCount, 1–1,000). For example "critical:weight=6",
// "bulk:weight=1,visibility=5m", "orders:fifo".
type Spec struct {
	// Name is the queue's name in the stack (ValidateName).
	Name string
	// Weight is the poller's weight of the queue. Defaults to 1.
	Weight int
	// FIFO makes the queue (and its DLQ) FIFO queues. Defaults to false, or to the stack's
	// setting where the stack has one (sqsworker up --fifo).
	FIFO bool
	// Visibility is the queue's visibility timeout. Defaults to 0: the stack's.
	Visibility time.Duration
	// MaxReceiveCount is the redrive policy's maxReceiveCount. Defaults to 0: the stack's.
	MaxReceiveCount int
}

// ParseSpec reads a queue spec (see Spec). Every problem is in the error, which wraps ErrInvalid.
func ParseSpec(s string) (Spec, error) {
	name, opts, _ := strings.Cut(strings.TrimSpace(s), ":")
	sp := Spec{Name: strings.TrimSpace(name), Weight: DefaultWeight}
	if err := ValidateName(sp.Name); err != nil {
		return Spec{}, fmt.Errorf("%w: queue %q: %v", ErrInvalid, s, err)
	}
	if strings.TrimSpace(opts) == "" {
		return sp, nil
	}
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: queue %q: "+format, append([]any{ErrInvalid, s}, args...)...)
	}
	seen := map[string]bool{}
	for _, opt := range strings.Split(opts, ",") {
		key, val, hasVal := strings.Cut(strings.TrimSpace(opt), "=")
		key = strings.TrimSpace(key)
		if seen[key] {
			return bad("option %s is given twice", key)
		}
		seen[key] = true
		switch key {
		case "weight":
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if !hasVal || err != nil || n < 1 || n > MaxWeight {
				return bad("weight=%s: want a whole number from 1 to %d", val, MaxWeight)
			}
			sp.Weight = n
		case "fifo":
			if hasVal {
				return bad("fifo takes no value")
			}
			sp.FIFO = true
		case "visibility":
			d, err := time.ParseDuration(strings.TrimSpace(val))
			if !hasVal || err != nil || d < 0 || d > 12*time.Hour || d%time.Second != 0 {
				return bad("visibility=%s: want a duration of whole seconds from 0s to 12h, such as 30s or 5m", val)
			}
			sp.Visibility = d
		case "max-receive":
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if !hasVal || err != nil || n < 1 || n > 1000 {
				return bad("max-receive=%s: want a whole number from 1 to 1000", val)
			}
			sp.MaxReceiveCount = n
		default:
			return bad("unknown option %q (want weight=N, fifo, visibility=D or max-receive=N)", opt)
		}
	}
	return sp, nil
}

// String returns the spec in the form ParseSpec reads, with only the options that differ from
// the defaults.
func (s Spec) String() string {
	var opts []string
	if s.Weight != 0 && s.Weight != DefaultWeight {
		opts = append(opts, "weight="+strconv.Itoa(s.Weight))
	}
	if s.FIFO {
		opts = append(opts, "fifo")
	}
	if s.Visibility != 0 {
		opts = append(opts, "visibility="+s.Visibility.String())
	}
	if s.MaxReceiveCount != 0 {
		opts = append(opts, "max-receive="+strconv.Itoa(s.MaxReceiveCount))
	}
	if len(opts) == 0 {
		return s.Name
	}
	return s.Name + ":" + strings.Join(opts, ",")
}
