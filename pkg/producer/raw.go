package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// EnqueueRaw is Enqueue for a job known only by its kind and its args as JSON: for tools (the
// sqsworker CLI), gateways and other languages' payloads, where no Go type of the args exists.
// It applies the same validation as Enqueue: kind must match ^[a-z0-9][a-z0-9._:-]{0,127}$ and
// args must be valid JSON whose value is an object; the options are checked as they are for
// Enqueue. The args are compacted (insignificant whitespace removed) into the envelope. The
// returned error is also in Result.Err.
func (p *Producer) EnqueueRaw(ctx context.Context, kind string, args json.RawMessage, opts ...Option) (Result, error) {
	if err := checkRaw(kind, args); err != nil {
		res := Result{}
		label := "job"
		if jobs.ValidateKind(kind) == nil {
			res.Kind, label = kind, kind
		}
		res.Err = fmt.Errorf("producer: enqueue %s: %w", label, err)
		return res, res.Err
	}
	return p.Enqueue(ctx, rawArgs{kind: kind, args: args}, opts...)
}

// checkRaw validates what prepare cannot explain well for raw args: the kind (prepare would name
// the unexported args type) and the JSON itself.
func checkRaw(kind string, args json.RawMessage) error {
	if err := jobs.ValidateKind(kind); err != nil {
		return invalid("%v", err)
	}
	trimmed := bytes.TrimLeft(args, " \t\r\n")
	if len(trimmed) == 0 {
		return invalid("args are empty: want a JSON object, such as {}")
	}
	if !json.Valid(args) {
		var v any
		err := json.Unmarshal(args, &v) // for the position and cause
		return invalid("args are not valid JSON: %v", err)
	}
	if trimmed[0] != '{' {
		return invalid("args are a JSON %s; args must be a JSON object, such as {\"to\":\"a@b.c\"}", jsonType(trimmed[0]))
	}
	return nil
}

// rawArgs carries already-encoded args through prepare: its MarshalJSON returns them as they
// are (encoding/json validates and compacts a Marshaler's output).
type rawArgs struct {
	kind string
	args json.RawMessage
}

func (a rawArgs) Kind() string                 { return a.kind }
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.args, nil }

// CheckArgsJSON reports why raw is not what a job's args must be, a JSON object, in words
// meant for the person who typed it: name is what the caller calls the value ("ARGS_JSON" in
// the CLI, "args" in the console), e.g. `args is not valid JSON: …`. It makes no AWS call;
// EnqueueRaw checks the same again. The CLI and the console both call it, so that they accept
// and refuse the same args.
func CheckArgsJSON(name string, raw []byte) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return fmt.Errorf("%s is empty: want a JSON object, such as '{}'", name)
	}
	var v any
	if err := json.Unmarshal(trimmed, &v); err != nil {
		return fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("%s is a JSON %s: want a JSON object, such as '{\"to\":\"a@b.c\"}'", name, jsonValueKind(v))
	}
	return nil
}

func jsonValueKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}
