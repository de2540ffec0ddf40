package status

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// A page token records, for every shard of the listed state, where the next page continues: the
// index keys of the last entry the previous pages consumed (or skipped), or that the shard is
// exhausted. Shards absent from the token start from the newest entry. It is JSON, base64url
// encoded without padding; clients treat it as opaque.
type pageToken struct {
	V      int           `json:"v"`
	State  string        `json:"st"`
	Kind   string        `json:"k,omitempty"`
	Shards int           `json:"n"`
	Pos    []shardCursor `json:"s"`
}

// shardCursor is one shard's position: Done, or after the entry with partition key PK and
// by_status sort key SK (SK is nil only when a backend returned a LastEvaluatedKey without it).
type shardCursor struct {
	I    int    `json:"i"`
	Done bool   `json:"d,omitempty"`
	PK   string `json:"pk,omitempty"`
	SK   *int64 `json:"sk,omitempty"`
}

const (
	tokenVersion = 1
	// maxKeyBytes is DynamoDB's limit on a partition key: a position beyond it is no item's, and
	// DynamoDB would answer the query with a ValidationException (a server error to the caller).
	maxKeyBytes = 2048
	// maxTokenLen bounds a page token: 16 shards of the longest keys DynamoDB allows fit well.
	maxTokenLen = 256 << 10
)

func encodeToken(tok *pageToken) string {
	b, err := json.Marshal(tok)
	if err != nil { // cannot happen: plain fields only
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// PageTokenError is the error List returns for a ListQuery.PageToken it cannot continue. It
// wraps ErrInvalid.
type PageTokenError struct {
	// Reason says what is wrong with the token, e.g. "not base64url: …" or
	// `it continues a listing of state "dead", not "retrying"`.
	Reason string
	// OtherListing reports that the token is intact but continues another listing (another
	// state, kind or shard count): the caller passed the wrong query with it. Otherwise the token
	// is damaged, truncated, or not a page token at all.
	OtherListing bool
}

// Error implements error.
func (e *PageTokenError) Error() string {
	return ErrInvalid.Error() + ": ListQuery.PageToken: " + e.Reason
}

// Unwrap returns ErrInvalid.
func (e *PageTokenError) Unwrap() error { return ErrInvalid }

// decodeToken parses and checks a token against the query it continues.
func decodeToken(s string, state idempotency.State, kind string, shards int) (*pageToken, error) {
	bad := func(format string, args ...any) error {
		return &PageTokenError{Reason: fmt.Sprintf(format, args...)}
	}
	other := func(format string, args ...any) error {
		return &PageTokenError{Reason: fmt.Sprintf(format, args...), OtherListing: true}
	}
	if len(s) > maxTokenLen {
		return nil, bad("%d bytes long, the limit is %d", len(s), maxTokenLen)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad("not base64url: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var tok pageToken
	if err := dec.Decode(&tok); err != nil {
		return nil, bad("not a page token: %v", err)
	}
	if dec.More() {
		return nil, bad("trailing data")
	}
	switch {
	case tok.V != tokenVersion:
		return nil, bad("version %d, want %d", tok.V, tokenVersion)
	case tok.State != string(state):
		return nil, other("it continues a listing of state %q, not %q", tok.State, state)
	case tok.Kind != kind:
		return nil, other("it continues a listing of kind %q, not %q", tok.Kind, kind)
	case tok.Shards != shards:
		return nil, other("it was made for %d shards, this table uses %d", tok.Shards, shards)
	}
	seen := make(map[int]bool, len(tok.Pos))
	for _, c := range tok.Pos {
		switch {
		case c.I < 0 || c.I >= shards:
			return nil, bad("shard %d out of range 0–%d", c.I, shards-1)
		case seen[c.I]:
			return nil, bad("shard %d appears twice", c.I)
		case c.Done && (c.PK != "" || c.SK != nil):
			return nil, bad("shard %d is both done and positioned", c.I)
		case !c.Done && c.PK == "":
			return nil, bad("shard %d has no position", c.I)
		case len(c.PK) > maxKeyBytes:
			return nil, bad("shard %d: key of %d bytes, longer than any item's (at most %d)", c.I, len(c.PK), maxKeyBytes)
		case !c.Done && idempotency.Shard(c.PK, shards) != c.I:
			return nil, bad("shard %d: key %q belongs to shard %d", c.I, c.PK, idempotency.Shard(c.PK, shards))
		case c.SK != nil && *c.SK < 0:
			return nil, bad("shard %d: negative sort key", c.I)
		}
		seen[c.I] = true
	}
	return &tok, nil
}
